"""Shared fixtures: gensim's own test corpus, small and real."""
import pytest
from gensim.models.word2vec import LineSentence
from gensim.test.utils import datapath


@pytest.fixture(scope="session")
def lee_corpus():
    """``lee_background.cor`` from gensim's test data: 300 documents, about 19,000 words."""
    return list(LineSentence(datapath("lee_background.cor")))
