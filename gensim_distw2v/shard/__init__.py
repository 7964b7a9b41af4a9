"""The shard role (:mod:`~gensim_distw2v.shard.service`) and its command line
(:mod:`~gensim_distw2v.shard.daemon`, ``python -m gensim_distw2v.shard``)."""
from gensim_distw2v.shard.daemon import main
from gensim_distw2v.shard.service import *  # noqa: F401,F403
