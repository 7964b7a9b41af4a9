"""Shared fixtures: gensim's own test corpus, small and real."""
import signal

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
