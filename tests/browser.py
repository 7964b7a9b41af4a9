"""Helpers for tests that look at a page in a real browser: headless Chromium (Debian's ``chromium``)
and OCR of its screenshots (``tesseract``, Debian's ``tesseract-ocr``).

From a test module in this directory: ``from . import browser``, then::

    browser.require()                      # skips the test, with the reason, if a tool is missing
    dom = browser.dump_dom(url)            # the DOM after the page's scripts ran (a string)
    browser.screenshot(url, tmp_path / "shot.png")
    text = browser.ocr(tmp_path / "shot.png")
    assert browser.ocr_finds(text, "3f9a1b2c4d5e")

Chromium runs with virtual time (``--virtual-time-budget``): the page's timers and fetches run
as fast as they can until that much page time has passed (pending network requests hold the clock),
so a page that polls every second has fetched and rendered several times before the DOM is dumped
or the screenshot taken, in about a second of real time. Each run has its own throwaway profile and
HOME, and the whole process group is killed if it overruns its timeout.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")
WINDOW = (1400, 1000)
VIRTUAL_TIME_MS = 2000
TIMEOUT = 60


def chromium_path():
    """The Chromium executable on PATH, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def missing():
    """The tools these helpers need that are not on PATH (as Debian names the packages)."""
    absent = []
    if chromium_path() is None:
        absent.append("chromium")
    if shutil.which("tesseract") is None:
        absent.append("tesseract-ocr")
    return absent


def require():
    """Skip the calling test, saying what to install, unless Chromium and tesseract are on PATH."""
    absent = missing()
    if absent:
        pytest.skip(f"needs a headless browser and OCR on PATH: apt-get install -y {' '.join(absent)}")


def _run(cmd, timeout, env=None):
    """Run ``cmd`` in its own process group; stdout as text. Raises RuntimeError if it fails or
    overruns ``timeout`` seconds (then its whole group is killed: Chromium leaves helpers)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise RuntimeError(f"{cmd[0]} overran {timeout} s; stderr ends:\n{err.decode(errors='replace')[-2000:]}")
    finally:
        try:                        # helpers Chromium may leave behind
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited with {proc.returncode}; stderr ends:\n"
                           f"{err.decode(errors='replace')[-2000:]}")
    return out.decode("utf-8", errors="replace")


def chromium(url, *args, window=WINDOW, virtual_time_ms=VIRTUAL_TIME_MS, timeout=TIMEOUT):
    """Run headless Chromium on ``url`` with the extra ``args`` (``--dump-dom``, ``--screenshot=...``);
    its stdout.

    Parameters
    ----------
    url : str
        The page.
    *args : str
        What to do with it: ``--dump-dom`` or ``--screenshot=PATH``.
    window : (int, int), optional
        The window's width and height in CSS pixels (also the screenshot's size).
    virtual_time_ms : int, optional
        Page time to let pass (timers, fetches) before the DOM is dumped or the screenshot taken.
    timeout : float, optional
        Real seconds before the browser is killed.

    Returns
    -------
    str
        What Chromium wrote on stdout.
    """
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("no chromium on PATH (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="chromium-") as home:
        env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
                   XDG_CACHE_HOME=os.path.join(home, ".cache"))
        cmd = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--hide-scrollbars", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
               "--disable-background-networking", "--disable-sync", "--disable-component-update",
               "--mute-audio", "--force-device-scale-factor=1", "--run-all-compositor-stages-before-draw",
               f"--user-data-dir={os.path.join(home, 'profile')}",
               f"--window-size={window[0]},{window[1]}", f"--virtual-time-budget={int(virtual_time_ms)}",
               *args, url]
        return _run(cmd, timeout, env)


def dump_dom(url, **kwargs):
    """The page's DOM, serialized, once its scripts have run (see :func:`chromium` for ``kwargs``)."""
    return chromium(url, "--dump-dom", **kwargs)


def screenshot(url, path, **kwargs):
    """A PNG screenshot of the page (the window's size) at ``path``, once its scripts have run
    (see :func:`chromium` for ``kwargs``); returns ``path``."""
    path = os.fspath(path)
    if os.path.exists(path):
        os.unlink(path)
    chromium(url, f"--screenshot={os.path.abspath(path)}", **kwargs)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        raise RuntimeError(f"chromium wrote no screenshot at {path}")
    return path


def ocr(path, timeout=TIMEOUT):
    """The text tesseract reads in the image at ``path`` (one OCR thread: light on CPU)."""
    if shutil.which("tesseract") is None:
        raise RuntimeError("no tesseract on PATH (apt-get install -y tesseract-ocr)")
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    return _run(["tesseract", os.fspath(path), "stdout"], timeout, env)


# OCR's usual confusions, applied to both sides: hex names have no o, l, i, |, s
_CONFUSABLE = str.maketrans("oli|s", "01115")


def _normalize(text):
    return text.lower().translate(_CONFUSABLE)


def _edits_within(word, token):
    """The fewest edits (insert, delete, substitute) that turn ``word`` into some substring of ``token``."""
    previous = [0] * (len(token) + 1)             # a match may start anywhere in token
    for i, w in enumerate(word, 1):
        current = [i] + [0] * len(token)
        for j, t in enumerate(token, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (w != t))
        previous = current
    return min(previous)                            # ... and end anywhere


def ocr_finds(text, word, max_edits=1):
    """Whether OCR ``text`` has ``word`` in it, case-insensitive, allowing the common confusions
    (``l``/``1``, ``o``/``0``, ...) and ``max_edits`` other misread, missing or extra characters.

    Tokens are runs of letters and digits (with the confusable symbols), so ``max_edits=1`` cannot
    join two words into a match. A 12-character name differs from another random one by far more
    than one edit: a name that is not on the page is not found.
    """
    word = _normalize(word)
    tokens = re.findall(r"[0-9a-z|]+", _normalize(text))
    return any(_edits_within(word, token) <= max_edits for token in tokens if len(token) >= len(word) - max_edits)
