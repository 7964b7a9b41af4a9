"""The dispatcher role (:mod:`~gensim_distw2v.dispatcher.service`) and its command line
(:mod:`~gensim_distw2v.dispatcher.daemon`, ``python -m gensim_distw2v.dispatcher``)."""
from gensim_distw2v.dispatcher.service import Dispatcher

__all__ = ["Dispatcher"]
