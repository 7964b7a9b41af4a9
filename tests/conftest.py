"""Shared fixtures (gensim's own test corpus, small and real; freezing a busy worker; a worker that
sees another filesystem) and the lanes.

Every test runs in exactly one lane, a marker registered in pyproject.toml:

``unit``
    in-process: no subprocess, no socket opened (checked while it runs);
``cluster``
    servers on loopback: name servers, dispatchers, shards and workers as processes, other
    subprocesses, or an in-process socket server;
``system``
    something outside Python: the docs built by Sphinx, the notebook in a kernel, a browser,
    the benchmarks, network or mount namespaces, openssl, git.

A file of one lane says so once (``pytestmark = pytest.mark.unit``); a file of several marks each
test. Collection fails on a test with no lane or two. ``pytest -m unit`` is the quick lane.

The lanes run in that order (unit first, so a broken edit fails in a minute), each lane's tests in
their files' order. Each lane's time (its first test's start to its last test's end) and its
tests' summed durations are printed at the end and kept in pytest's cache (``lanes/last``); a unit
lane that takes over :data:`UNIT_BUDGET` seconds fails the run, naming its slowest tests (README.rst
promises the quick lane).
"""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from gensim.models.word2vec import LineSentence
from gensim.test.utils import datapath

from gensim_distw2v.client.cluster import ManagedProcess

from .lanes import LANES, UNIT_BUDGET, LaneClock, lane_of


# A shell starts background commands with SIGINT ignored, and an ignored signal is inherited: Python
# would then never raise KeyboardInterrupt, here or in the processes the tests start. The Ctrl-C tests
# need Python's own handler, whatever launched the test run.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser):
    parser.addoption("--unit-budget", type=float, default=UNIT_BUDGET, metavar="SECONDS",
                     help=f"fail the run if the unit lane takes longer (default {UNIT_BUDGET:.0f})")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Refuse the run if a test has no lane or more than one (before ``-m`` picks a lane)."""
    wrong = []
    for item in items:
        lanes = sorted({mark.name for mark in item.iter_markers() if mark.name in LANES})
        if len(lanes) != 1:
            wrong.append(f"  {item.nodeid}: " + ("no lane" if not lanes else "lanes " + " and ".join(lanes)))
    if wrong:
        raise pytest.UsageError(
            f"{len(wrong)} tests are not in exactly one lane ({', '.join(LANES)}):\n" + "\n".join(wrong) +
            "\nmark each once: pytestmark = pytest.mark.LANE at the top of a file of one lane, else "
            "@pytest.mark.LANE on each test (tests/conftest.py says what goes in which lane)")
    items.sort(key=lambda item: LANES.index(lane_of(item)))  # stable: files keep their order in a lane
    config.stash[_CLOCK] = LaneClock({item.nodeid: lane_of(item) for item in items})


_CLOCK = pytest.StashKey[LaneClock]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.monotonic()
    try:
        return (yield)
    finally:
        clock = item.config.stash.get(_CLOCK, None)
        if clock is not None:
            clock.ran(item.nodeid, start, time.monotonic())


def pytest_sessionfinish(session, exitstatus):
    """Keep the lanes' times in the cache; fail the run when the unit lane is over its budget."""
    clock = session.config.stash.get(_CLOCK, None)
    if clock is None:
        return
    if getattr(session.config, "cache", None) is not None:
        session.config.cache.set("lanes/last", clock.summary())
    if clock.over_budget(session.config.getoption("unit_budget")) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    clock = config.stash.get(_CLOCK, None)
    if clock is None or not clock.summary():
        return
    terminalreporter.section("lanes")
    for lane, row in clock.summary().items():
        terminalreporter.write_line(f"{lane}: {row['tests']} tests in {row['wall_s']:.1f} s "
                                    f"(their own durations {row['sum_s']:.1f} s)")
    message = clock.over_budget(config.getoption("unit_budget"))
    if message:
        terminalreporter.write_line("FAILED: " + message, red=True)


def _refuse(what):
    def refused(*args, **kwargs):
        raise AssertionError(f"a unit test {what}: unit tests run in-process; mark this test "
                             f"@pytest.mark.cluster (or system)")
    return refused


@pytest.fixture(autouse=True)
def _unit_stays_in_process(request, monkeypatch):
    """In the unit lane, starting a process or opening a connection or a server fails the test."""
    if request.node.get_closest_marker("unit") is not None:
        monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("started a subprocess"))
        for method in ("connect", "connect_ex", "listen"):
            monkeypatch.setattr(socket.socket, method, _refuse(f"called socket.{method}"))
    yield


def _grant(shard, sid, owner, **fields):
    """The dispatcher's word to an in-process shard: it runs session ``sid``, whose owner's secret is
    ``owner`` (the shard then lets that owner open it)."""
    from gensim_distw2v import protocol

    shard.on_beat(None, shard.beat_request(), protocol.ShardBeat(session=sid, ranks=[], next_rank=0, hello=False,
                                                                 owner=protocol.owner_digest(owner), **fields))


@pytest.fixture
def grant():
    """:func:`_grant`: tell an in-process shard who owns a session."""
    return _grant


@pytest.fixture(scope="session")
def lee_corpus():
    """``lee_background.cor`` from gensim's test data: 300 documents, about 60,000 words."""
    return list(LineSentence(datapath("lee_background.cor")))


@pytest.fixture
def freeze_busy_worker():
    """``freeze(cluster, dispatcher, rank)``: ``(name, process)`` of the session's worker of ``rank``,
    frozen (SIGSTOP) while it holds jobs it has not merged, else None (it runs on).

    Seen holding jobs is not enough: it may merge them all before a kill lands (at an epoch end). A
    frozen worker merges nothing more, so once a merge it had sent is through (0.3 s), what it
    holds is what losing it re-queues.
    """
    def freeze(cluster, dispatcher, rank):
        for name, info in dispatcher.call("status").workers.items():
            if info.rank == rank and info.words > 0 and info.in_flight > 0:
                proc = cluster.process_of(name)
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(0.3)
                if getattr(dispatcher.call("status").workers.get(name), "in_flight", 0) > 0:
                    return name, proc
                os.kill(proc.pid, signal.SIGCONT)
        return None
    return freeze


SPACES = [" ", "\t", "\r", "\x0b", "\x1c", "\u0085", "\u00a0", "\u1680", "\u2003", "\u2028", "\u202f", "\u3000", "  "]
WORDS = ["a", "bb", "ccc", "é", "日本語", "naïve", "Ωmega", "ŀl", "x\u2010y", "\u0100", "rare"]


def _awkward_text(rng, lines=200):
    """Empty lines, Unicode whitespace and tokens, CRLF, lines over 10,000 tokens, no final newline."""
    out = []
    for _ in range(lines):
        kind = rng.random()
        if kind < 0.1:
            out.append(rng.choice(["", " ", "\t\u3000"]))
        elif kind < 0.13:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(10_000, 21_000))))
        else:
            out.append("".join(rng.choice(WORDS) + rng.choice(SPACES) for _ in range(rng.randint(1, 40))))
    return "\n".join(out) + rng.choice(["", "\r\n"])


@pytest.fixture(scope="session")
def awkward_text():
    """``awkward_text(rng, lines=200)``: a corpus file's text that gensim's ``LineSentence`` must
    split with care (:func:`_awkward_text`)."""
    return _awkward_text


@pytest.fixture
def start_namespaced_worker():
    """``start(cluster, name, setup)``: a worker of ``cluster`` in a mount namespace of its own, where
    ``setup`` (shell, e.g. a tmpfs mounted over the corpus's folder) changed what it sees, as on
    another host; its registered name."""
    def start(cluster, name, setup):
        port = cluster.ns_conf["port"]
        command = f"{setup} && exec {sys.executable} -P -m gensim_distw2v.worker --ns-port {port} --threads 1"
        proc = ManagedProcess(name, ["unshare", "--mount", "--propagation", "private", "sh", "-c", command],
                              env=cluster._env())
        cluster.processes[name] = proc
        return proc.wait_for(r"gensim_distw2v\.worker (\S+) ready at", timeout=60).group(1)
    return start
