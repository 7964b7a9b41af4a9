"""``Word2Vec``: gensim's model, plus the switch to distributed training.

The smallest possible override of :class:`gensim.models.Word2Vec`: every gensim argument is
accepted unchanged; ``distributed=False`` (the default) trains exactly as gensim does, and
``distributed=True`` runs ``train()`` on a cluster through :mod:`gensim_distw2v.client.training`. Saved
models are plain gensim models: :meth:`Word2Vec.save` writes a file that
``gensim.models.Word2Vec.load`` opens without this package, and :meth:`Word2Vec.load` opens
files written by plain gensim.
"""
import logging

import gensim.models

from gensim_distw2v.settings import COLD_EVERY, HOLD_BACK, MERGE_DTYPE
from gensim_distw2v.settings import CHECKPOINT_EVERY, Settings, TENSORBOARD_WORDS

logger = logging.getLogger(__name__)

__all__ = ["Word2Vec"]

# Attributes this class adds to gensim's model; never written to disk (ns_conf may hold a key).
_DISTRIBUTED_ATTRS = ("distributed", "ns_conf", "settings", "cluster_stats")


def _setting(name):
    """A model attribute that reads one of :attr:`Word2Vec.settings` and replaces it, validated."""

    def get(self):
        return getattr(self.settings, name)

    def put(self, value):
        self.settings = self.settings.replace(**{name: value})
    return property(get, put, doc=f"The ``{name}`` setting (:class:`gensim_distw2v.settings.Settings`).")


# settings that were removed, and why: a clear error rather than gensim's "unexpected keyword"
REMOVED = {"bytes_per_word": "the traffic budget was removed: the merge schedule bounds the bytes per word (hot rows "
                             "every round, the others every cold_every-th, int8 both ways; docs/schedule.rst); "
                             "drop the argument"}


def _refuse_removed(kwargs):
    """ValueError naming a removed setting found in ``kwargs``, and what to do instead."""
    for name in REMOVED:
        if name in kwargs:
            raise ValueError(f"{name}: {REMOVED[name]}")


class Word2Vec(gensim.models.Word2Vec):
    """gensim's ``Word2Vec`` that can train on a cluster of Pyro4 workers.

    Parameters
    ----------
    *args, **kwargs
        Exactly gensim's :class:`gensim.models.Word2Vec` arguments.
    distributed : bool, optional
        Train on a cluster of ``python -m gensim_distw2v.worker`` processes (found through the
        name server of ``ns_conf``) instead of local threads.
    ns_conf : dict, optional
        Where the Pyro4 name server is: ``host``, ``port``, ``broadcast``, ``hmac_key`` (as in
        gensim's ``LdaModel(distributed=True, ns_conf=...)``); default 127.0.0.1:9090.
    sync_words : int, optional
        Words each worker trains between merges (default, with two workers or more whatever their
        number: a 5,400th of the corpus's words per epoch, at least 2,200 and at most 1 M; 1 M with
        one worker: :func:`gensim_distw2v.core.merge.default_sync_words`).
    merge : {'damp', 'sum', 'mean'}, optional
        How the parameter shards merge the workers' updates (see :mod:`gensim_distw2v.core.merge`):
        ``'sum'`` applies every delta, ``'damp'`` counts updates that workers made alike once
        (input vectors, and the most frequent output vectors), ``'mean'`` is plain model
        averaging, which trains like 1/K of the data.
    sync : {'ssp', 'bsp', 'asp', 'local'}, optional
        How the workers' merge rounds are ordered. ``'ssp'`` (the default): a worker trains on
        while its round is in flight, at most one interval ahead. ``'bsp'``: jobs are dealt to
        the workers in a fixed way and rounds are taken in turn (by epoch, round, worker rank),
        each taken in before its worker trains on: a model trained twice with the same seed and
        the same number of workers (of one thread each, as gensim needs ``workers=1``) is
        bit-identical. ``'asp'``: no bound at all. ``'local'``: no merges within an epoch, the
        replicas are merged at epoch ends. Measured in ``docs/schedule.rst``.
    hold_back : float, optional
        Share of its squared change (the rows that changed least) a worker may keep back in a
        routine merge, to send later once grown (error feedback); 0 sends every changed row.
        Default 0.3. Epoch ends always merge everything.
    cold_every : int, optional
        The rows of rare words (beyond the hot rows: those a worker sees less than a quarter of a
        time per merge interval, :func:`gensim_distw2v.core.merge.hot_rows`) merge only every
        ``cold_every``-th round, and at epoch ends; their change waits meanwhile, as held-back
        rows do. Routine rounds then read and move only the frequent words' rows. 1: every row
        in every round. Default: 6.
    merge_dtype : {'float16', 'int8', 'float32'}, optional
        How routine merges carry deltas, and the values of rows a worker lacks, on the wire, both
        ways: ``'int8'`` (the default) as levels with a float32 scale per row, about half the bytes
        of ``'float16'``; ``'float32'`` exactly. What rounding loses goes with a later round (error
        feedback); epoch ends are exact.
    cluster_timeout : float, optional
        Seconds to wait for a first worker and parameter shard, and without any worker during
        training, before ``train()`` raises; with ``checkpoint_dir``, also how long to wait for a
        lost dispatcher or shard to be back before the run resumes.
    checkpoint_dir : str, optional
        A folder the cluster writes checkpoints to: the dispatcher its record of the run's progress,
        each parameter shard its rows (the same path must reach the same folder on every node that
        runs one: a shared filesystem, as for ``corpus_file``). A checkpoint is taken at every epoch
        end and every ``checkpoint_every`` seconds; when the dispatcher or a shard dies, ``train()``
        waits for it to be restarted (``cluster_timeout``) and goes on from the last checkpoint
        (``docs/checkpoints.rst``). Default None: no checkpoints.
    checkpoint_every : float, optional
        Seconds between timed checkpoints (default 300; never sooner than 49 times as long as the
        last one took, so they cost at most about 2 % of the run).
    tensorboard_dir : str, optional
        A folder ``train()`` writes TensorBoard event files to (distributed only; ``tensorboard
        --logdir DIR`` shows them): loss, words/s overall and per node, learning rate, bytes per
        word each way, the merges' share of wall time, CPU and memory per node, against words
        trained and wall time; at the end, the embedding projector's files. Default None: none.
    tensorboard_words : int, optional
        The projector gets the vectors of this many most frequent words (default 10,000; 0: none).
    tensorboard_quality : bool, optional
        With ``tensorboard_dir``, also score the model at every epoch end (analogies, WordSim353,
        SimLex-999 from gensim's test data); each pulls the weights from the shards once.

    Attributes
    ----------
    settings : gensim_distw2v.settings.Settings
        The settings above, validated, as one object; each is also an attribute of the model
        (``model.sync_words = 5000`` replaces it, validated).
    """

    sync_words = _setting("sync_words")
    merge = _setting("merge")
    sync = _setting("sync")
    hold_back = _setting("hold_back")
    cold_every = _setting("cold_every")
    merge_dtype = _setting("merge_dtype")
    cluster_timeout = _setting("cluster_timeout")
    part_bytes = _setting("part_bytes")  # bytes per message part for arrays and merges (tests shrink it)
    checkpoint_dir = _setting("checkpoint_dir")
    checkpoint_every = _setting("checkpoint_every")
    tensorboard_dir = _setting("tensorboard_dir")
    tensorboard_words = _setting("tensorboard_words")
    tensorboard_quality = _setting("tensorboard_quality")

    def __init__(self, *args, distributed=False, ns_conf=None, sync_words=None, merge="damp", sync="ssp",
                 hold_back=HOLD_BACK, cold_every=COLD_EVERY, merge_dtype=MERGE_DTYPE, cluster_timeout=30.0,
                 checkpoint_dir=None, checkpoint_every=CHECKPOINT_EVERY, tensorboard_dir=None,
                 tensorboard_words=TENSORBOARD_WORDS, tensorboard_quality=False, **kwargs):
        _refuse_removed(kwargs)
        self.settings = Settings(sync_words=sync_words, merge=merge, sync=sync, hold_back=hold_back,
                                 cold_every=cold_every, merge_dtype=merge_dtype, cluster_timeout=cluster_timeout,
                                 checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                                 tensorboard_dir=tensorboard_dir, tensorboard_words=tensorboard_words,
                                 tensorboard_quality=tensorboard_quality)
        self.distributed = bool(distributed)
        self.ns_conf = dict(ns_conf or {})
        self.cluster_stats = {}
        super().__init__(*args, **kwargs)

    def train(self, corpus_iterable=None, corpus_file=None, total_examples=None, total_words=None,
              epochs=None, start_alpha=None, end_alpha=None, word_count=0, queue_factor=2, report_delay=1.0,
              compute_loss=False, callbacks=(), resume_from=None, **kwargs):
        """Train as :meth:`gensim.models.Word2Vec.train` does (same arguments, same return value).

        ``resume_from`` (distributed only): a checkpoint folder of a run whose client died; this
        call goes on from its last checkpoint, given the same corpus, vocabulary (build it again
        from the same corpus) and hyper-parameters (it refuses others, naming what differs), and
        returns what the uninterrupted call would have returned.

        With ``distributed=True`` the jobs are trained by the cluster's workers; statistics of
        the cluster run (merges, bytes moved and of those the exact epoch flushes' (``exact_bytes_up``,
        ``exact_bytes_down``), seconds, CPU seconds of the workers' kernels and of the merges) are left
        in ``model.cluster_stats``. With
        ``corpus_file``, every worker reads the file itself, at the same path (a shared
        filesystem): the dispatcher hands out byte ranges of it, and refuses to train if a worker
        sees no file or another file there.

        Returns
        -------
        (int, int)
            Effective words trained and raw words processed.
        """
        if not getattr(self, "distributed", False):
            if resume_from is not None:
                raise ValueError("resume_from: only a distributed model (distributed=True) resumes from checkpoints")
            if self.settings.tensorboard_dir is not None:
                raise ValueError("tensorboard_dir: only a distributed model (distributed=True) writes TensorBoard "
                                 "events; drop tensorboard_dir to train with plain gensim")
            return super().train(
                corpus_iterable=corpus_iterable, corpus_file=corpus_file, total_examples=total_examples,
                total_words=total_words, epochs=epochs, start_alpha=start_alpha, end_alpha=end_alpha,
                word_count=word_count, queue_factor=queue_factor, report_delay=report_delay,
                compute_loss=compute_loss, callbacks=callbacks, **kwargs)
        from gensim_distw2v.client.training import DistributedTraining

        self.alpha = start_alpha or self.alpha
        self.min_alpha = end_alpha or self.min_alpha
        self.epochs = epochs
        self._check_training_sanity(epochs=epochs, total_examples=total_examples, total_words=total_words)
        self._check_corpus_sanity(corpus_iterable=corpus_iterable, corpus_file=corpus_file, passes=epochs)
        if corpus_file is not None and not total_words:
            raise ValueError("total_words must be provided alongside corpus_file argument.")
        self.add_lifecycle_event(
            "train",
            msg=(f"training model on a cluster on {len(self.wv)} vocabulary and {self.layer1_size} features, "
                 f"using sg={self.sg} hs={self.hs} sample={self.sample} negative={self.negative} "
                 f"window={self.window} shrink_windows={self.shrink_windows} merge={self.merge}"),
        )
        self.compute_loss = compute_loss
        self.running_training_loss = 0.0
        for callback in callbacks:
            callback.on_train_begin(self)
        session = DistributedTraining(self, self.ns_conf, self.settings)
        trained, raw = session.train(corpus_iterable, total_examples, total_words, epochs, compute_loss,
                                     callbacks, report_delay=report_delay, corpus_file=corpus_file,
                                     resume_from=resume_from)
        self.cluster_stats = session.stats
        elapsed = max(session.stats.get("call_seconds", 0.0), 1e-9)  # all of it, resumes included
        self.total_train_time += elapsed
        self.add_lifecycle_event("train", msg=(
            f"training on {raw} raw words ({trained} effective words) took {elapsed:.1f}s, "
            f"{trained / elapsed:.0f} effective words/s"))
        self.train_count += 1
        self._clear_post_train()
        for callback in callbacks:
            callback.on_train_end(self)
        return trained, raw

    def save(self, *args, **kwargs):
        """Save as a plain :class:`gensim.models.Word2Vec` (loadable without gensim_distw2v).

        The distributed settings (``distributed``, ``ns_conf``, ``sync_words``, ``merge``) are not saved.
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
            As :meth:`gensim.models.Word2Vec.load`; besides, any setting of the class (``sync_words``,
            ``merge``, ..., ``tensorboard_dir``: :class:`gensim_distw2v.settings.Settings`) for further
            training of the loaded model.
        distributed, ns_conf
            As for the class.
        """
        _refuse_removed(kwargs)
        settings = Settings(**{name: kwargs.pop(name) for name in Settings.names() if name in kwargs})
        model = gensim.models.Word2Vec.load(*args, **kwargs)
        if not isinstance(model, cls):
            model.__class__ = cls
        model.distributed, model.ns_conf = bool(distributed), dict(ns_conf or {})
        model.settings, model.cluster_stats = settings, {}
        return model
