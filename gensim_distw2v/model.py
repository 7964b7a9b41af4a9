"""``Word2Vec``: gensim's model, plus the switch to distributed training.

The smallest possible override of :class:`gensim.models.Word2Vec`: every gensim argument is
accepted unchanged; ``distributed=False`` (the default) trains exactly as gensim does. Saved
models are plain gensim models: :meth:`Word2Vec.save` writes a file that
``gensim.models.Word2Vec.load`` opens without this package, and :meth:`Word2Vec.load` opens
files written by plain gensim.
"""
import logging

import gensim.models

logger = logging.getLogger(__name__)

__all__ = ["Word2Vec"]

# Attributes this class adds to gensim's model; never written to disk (ns_conf may hold a key).
_DISTRIBUTED_ATTRS = ("distributed", "ns_conf")


class Word2Vec(gensim.models.Word2Vec):
    """gensim's ``Word2Vec`` that can train on a cluster of Pyro4 workers.

    Parameters
    ----------
    *args, **kwargs
        Exactly gensim's :class:`gensim.models.Word2Vec` arguments.
    distributed : bool, optional
        Train on a cluster of ``python -m gensim_distw2v.worker`` processes instead of local threads.
    ns_conf : dict, optional
        Where the Pyro4 name server is: ``host``, ``port``, ``broadcast``, ``hmac_key`` (as in
        gensim's ``LdaModel(distributed=True, ns_conf=...)``).
    """

    def __init__(self, *args, distributed=False, ns_conf=None, **kwargs):
        self.distributed = bool(distributed)
        self.ns_conf = dict(ns_conf or {})
        self._check_distributed()
        super().__init__(*args, **kwargs)

    def _check_distributed(self):
        if self.distributed:
            raise NotImplementedError(
                "distributed=True is not available in this version of gensim_distw2v yet; "
                "train with distributed=False (gensim's own multi-threaded training)")

    def train(self, *args, **kwargs):
        """Train as :meth:`gensim.models.Word2Vec.train` does (same arguments, same return value)."""
        self._check_distributed()
        return super().train(*args, **kwargs)

    def save(self, *args, **kwargs):
        """Save as a plain :class:`gensim.models.Word2Vec` (loadable without gensim_distw2v).

        The distributed settings (``distributed``, ``ns_conf``) are not saved.
        """
        extra = {name: self.__dict__.pop(name) for name in _DISTRIBUTED_ATTRS if name in self.__dict__}
        own_class, self.__class__ = self.__class__, gensim.models.Word2Vec
        try:
            gensim.models.Word2Vec.save(self, *args, **kwargs)
        finally:
            self.__class__ = own_class
            self.__dict__.update(extra)

    @classmethod
    def load(cls, *args, distributed=False, ns_conf=None, **kwargs):
        """Load a model saved by gensim or by this package.

        Parameters
        ----------
        *args, **kwargs
            As :meth:`gensim.models.Word2Vec.load`.
        distributed, ns_conf
            Settings for further training of the loaded model (see the class).
        """
        model = gensim.models.Word2Vec.load(*args, **kwargs)
        if not isinstance(model, cls):
            model.__class__ = cls
        model.distributed, model.ns_conf = bool(distributed), dict(ns_conf or {})
        model._check_distributed()
        return model
