"""The worker role: its server and membership (:mod:`~gensim_distw2v.worker.service`), a session's
trainer threads and job fetching (:mod:`~gensim_distw2v.worker.training`), its merge rounds
(:mod:`~gensim_distw2v.worker.merger`), and its command line (:mod:`~gensim_distw2v.worker.daemon`,
``python -m gensim_distw2v.worker``)."""
from gensim_distw2v.worker.service import SessionLost, Worker

__all__ = ["SessionLost", "Worker"]
