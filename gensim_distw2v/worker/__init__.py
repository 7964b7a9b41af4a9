"""The worker role (:mod:`~gensim_distw2v.worker.service`) and its command line
(:mod:`~gensim_distw2v.worker.daemon`, ``python -m gensim_distw2v.worker``)."""
from gensim_distw2v.worker.daemon import main
from gensim_distw2v.worker.service import *  # noqa: F401,F403
