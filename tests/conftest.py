"""Shared fixtures: gensim's own test corpus, small and real; freezing a busy worker."""
import os
import signal
import time

import pytest
from gensim.models.word2vec import LineSentence
from gensim.test.utils import datapath

# A shell starts background commands with SIGINT ignored, and an ignored signal is inherited: Python
# would then never raise KeyboardInterrupt, here or in the processes the tests start. The Ctrl-C tests
# need Python's own handler, whatever launched the test run.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
        for name, info in dispatcher.status()["workers"].items():
            if info["rank"] == rank and info["words"] > 0 and info["in_flight"] > 0:
                proc = next(p for n, p in cluster.processes.items()
                            if n.startswith("worker-") and any(name in line and "ready at" in line for line in p.lines))
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(0.3)
                if dispatcher.status()["workers"].get(name, {}).get("in_flight", 0) > 0:
                    return name, proc
                os.kill(proc.pid, signal.SIGCONT)
        return None
    return freeze
