"""Where a measurement came from: every benchmark's ``--json`` output carries this record.

The docs render tables from those files (``docs/_ext/measurements.py``) and print the date and
command beside every table, so a figure never loses how to reproduce it.
"""
import datetime
import os
import platform
import shlex
import subprocess
import sys


def provenance(argv=None):
    """``{"date", "command", "machine", "python", "commit"}`` of the running benchmark (``commit`` ends in
    ``+changes`` when the package's code differs from it).

    Parameters
    ----------
    argv : list of str, optional
        The benchmark's command line (default ``sys.argv``); its script is named by its path
        from the repository's root, as the docs print it.
    """
    argv = list(sys.argv if argv is None else argv)
    script = os.path.join("benchmarks", os.path.basename(argv[0])) if argv else "?"
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
        # the package's code changed since that commit: the figures are not that commit's
        changed = subprocess.run(["git", "-C", here, "diff", "--quiet", "HEAD", "--", "../gensim_distw2v", "../cython"],
                                 capture_output=True, timeout=10).returncode == 1
        commit = f"{commit}+changes" if commit and changed else commit
    except (OSError, subprocess.SubprocessError):
        commit = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError, AttributeError):
        memory = float("nan")
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": shlex.join(["python", script] + argv[1:]),
            "machine": f"{os.cpu_count()} cores, {memory:.0f} GiB, {platform.machine()}",
            "python": platform.python_version(), "commit": commit}
