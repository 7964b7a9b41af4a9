"""The shard role: its server, membership and checkpoints (:mod:`~gensim_distw2v.shard.service`), a
held session's rows (:mod:`~gensim_distw2v.shard.held`), and its command line
(:mod:`~gensim_distw2v.shard.daemon`, ``python -m gensim_distw2v.shard``)."""
from gensim_distw2v.shard.service import Shard

__all__ = ["Shard"]
