"""gensim_distw2v: a distributed, drop-in ``Word2Vec`` for gensim.

``from gensim_distw2v import Word2Vec`` replaces ``from gensim.models import Word2Vec``; the model
trains with gensim's own Cython kernels and is a plain gensim model once trained.

``Word2Vec`` and ``LocalCluster`` load on first use: a daemon of the cluster that imports a module of
the package (``python -m gensim_distw2v.shard``) does not pay for gensim's import unless it trains.
"""
import importlib
import logging

from gensim_distw2v.versions import __version__

logger = logging.getLogger(__name__)

__all__ = ["Word2Vec", "LocalCluster", "__version__"]

_LAZY = {"Word2Vec": "gensim_distw2v.model", "LocalCluster": "gensim_distw2v.client.cluster"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "Word2Vec":
        from gensim_distw2v import build

        build.check()  # a clear error if the kernel does not fit the installed gensim
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
