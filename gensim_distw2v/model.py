"""``Word2Vec``: gensim's model, plus the switch to distributed training.

The smallest possible override of :class:`gensim.models.Word2Vec`: every gensim argument is
accepted unchanged; ``distributed=False`` (the default) trains exactly as gensim does, and
``distributed=True`` runs ``train()`` on a cluster through :mod:`gensim_distw2v.client.training`. Saved
models are plain gensim models: :meth:`Word2Vec.save` writes a file that
``gensim.models.Word2Vec.load`` opens without this package, and :meth:`Word2Vec.load` opens
files written by plain gensim. The distributed settings' keywords, attributes and docstring
entries are generated from the fields of :class:`gensim_distw2v.config.settings.Settings`.
"""
import dataclasses
import functools
import inspect
import logging
import os

import gensim.models

from gensim_distw2v.config import fields
from gensim_distw2v.config.settings import Settings

logger = logging.getLogger(__name__)

__all__ = ["Word2Vec"]

# Attributes this class adds to gensim's model; never written to disk (ns_conf may hold a key).
_DISTRIBUTED_ATTRS = ("distributed", "ns_conf", "settings", "cluster_stats", "vocab_stats")


def _setting(field):
    """A model attribute that reads one of :attr:`Word2Vec.settings` and replaces it, validated."""
    name = field.name

    def get(self):
        return getattr(self.settings, name)

    def put(self, value):
        self.settings = self.settings.replace(**{name: value})
    return property(get, put, doc=f"{fields.describe(field)} Assigning it replaces :attr:`settings` with a validated "
                                  f"copy.")


# settings that were removed, and why: a clear error rather than gensim's "unexpected keyword"
REMOVED = {"bytes_per_word": "the traffic budget was removed: the merge schedule bounds the bytes per word (hot rows "
                             "every round, the others every cold_every-th, int8 both ways; docs/schedule.rst); "
                             "drop the argument"}


def _refuse_removed(kwargs):
    """ValueError naming a removed setting found in ``kwargs``, and what to do instead."""
    for name in REMOVED:
        if name in kwargs:
            raise ValueError(f"{name}: {REMOVED[name]}")


_GENSIM = inspect.signature(gensim.models.Word2Vec.__init__)


@functools.lru_cache(maxsize=None)
def _keywords():
    """The constructor's keywords: gensim's, ``distributed``, ``ns_conf`` and the settings."""
    return frozenset(inspect.signature(Word2Vec).parameters)


def _split(kwargs):
    """``kwargs`` of the constructor as (the settings', gensim's); a TypeError naming an unknown
    keyword and the closest valid one."""
    if not any(p.kind is p.VAR_KEYWORD for p in _GENSIM.parameters.values()):
        fields.check_keywords(kwargs, _keywords(), "Word2Vec()")
    return {name: kwargs.pop(name) for name in Settings.names() if name in kwargs}, kwargs


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
    <settings>

    Attributes
    ----------
    settings : gensim_distw2v.config.settings.Settings
        The settings above (from ``sync_words`` on), validated, as one object; each is also an
        attribute of the model (``model.sync_words = 5000`` replaces it, validated).
    """

    def __init__(self, *args, distributed=False, ns_conf=None, **kwargs):
        _refuse_removed(kwargs)
        settings, kwargs = _split(kwargs)
        self.settings = Settings(**settings)
        self.distributed = bool(distributed)
        self.ns_conf = dict(ns_conf or {})
        self.cluster_stats = {}
        self.vocab_stats = {}  # the last count on the cluster's (gensim_distw2v.client.vocab.Counts.stats)
        super().__init__(*args, **kwargs)

    def build_vocab(self, corpus_iterable=None, corpus_file=None, update=False, progress_per=10000,
                    keep_raw_vocab=False, trim_rule=None, **kwargs):
        """Build the vocabulary as :meth:`gensim.models.Word2Vec.build_vocab` does (same arguments, same
        result); a distributed model counts a file on the cluster (:meth:`scan_vocab`)."""
        # what scan_vocab needs to know of the call: whether words below min_count can stay on the shards
        self._vocab_call = dict(update=update, keep_raw_vocab=keep_raw_vocab, trim_rule=trim_rule, **kwargs)
        try:
            return super().build_vocab(corpus_iterable=corpus_iterable, corpus_file=corpus_file, update=update,
                                       progress_per=progress_per, keep_raw_vocab=keep_raw_vocab, trim_rule=trim_rule,
                                       **kwargs)
        finally:
            self.__dict__.pop("_vocab_call", None)
            self.__dict__.pop("_dropped", None)

    def _kept_from(self):
        """The least count a word needs to be kept by this build_vocab call, when every rarer word can stay
        on the shards without changing the model (a fresh vocabulary, its raw counts not kept, no trim_rule,
        no max_vocab_size nor max_final_vocab, no dry run): else 1."""
        call = getattr(self, "_vocab_call", None)
        if not call or call["update"] or call["keep_raw_vocab"] or call["trim_rule"] is not None or \
                call.get("dry_run") or self.max_vocab_size or self.max_final_vocab is not None:
            return 1
        return max(1, int(call.get("min_count") or self.min_count or 1))

    def prepare_vocab(self, *args, **kwargs):
        """:meth:`gensim.models.Word2Vec.prepare_vocab`; where the cluster left the words below
        ``min_count`` on the shards, its report and its two lifecycle events about what ``min_count``
        drops name them as gensim's would."""
        dropped = self.__dict__.pop("_dropped", None)
        seen = len(getattr(self, "lifecycle_events", None) or ())
        report = super().prepare_vocab(*args, **kwargs)
        if dropped and dropped[0]:
            report["drop_unique"] += dropped[0]
            self._restate_drops(seen, report, *dropped)
        return report

    def _restate_drops(self, seen, report, unique, total):
        """gensim's two "effective_min_count=..." events of this prepare_vocab, with the words the shards kept."""
        kept, kept_total = len(self.wv.index_to_key), report["retain_total"]
        emc = self.effective_min_count
        for event in self.lifecycle_events[seen:]:
            if event.get("event") != "prepare_vocab":
                continue
            if event["msg"].startswith(f"effective_min_count={emc} retains "):
                event["msg"] = (f"effective_min_count={emc} retains {kept} unique words "
                                f"({kept * 100 / max(kept + unique, 1):.2f}% of original {kept + unique}, "
                                f"drops {unique})")
            elif event["msg"].startswith(f"effective_min_count={emc} leaves "):
                event["msg"] = (f"effective_min_count={emc} leaves {kept_total} word corpus "
                                f"({kept_total * 100 / max(kept_total + total, 1):.2f}% of original "
                                f"{kept_total + total}, drops {total})")
            else:
                continue
            logger.info("prepare_vocab: %s (the words counted fewer times stayed on the shards)", event["msg"])

    def scan_vocab(self, corpus_iterable=None, corpus_file=None, progress_per=10000, workers=None, trim_rule=None):
        """Count the corpus's words as :meth:`gensim.models.Word2Vec.scan_vocab` does (``build_vocab``
        calls it); a distributed model counts a ``corpus_file``, or a ``LineSentence`` /
        ``PathLineSentences`` the workers can read, on the cluster
        (:mod:`gensim_distw2v.client.vocab`: the same ``raw_vocab``, in the same order, the same
        ``corpus_count`` and raw words; ``max_vocab_size`` prunes once the words are counted).

        Returns
        -------
        (int, int)
            Raw words and sentences of the corpus.
        """
        if not getattr(self, "distributed", False):
            return super().scan_vocab(corpus_iterable=corpus_iterable, corpus_file=corpus_file,
                                      progress_per=progress_per, workers=workers, trim_rule=trim_rule)
        from gensim_distw2v.client import readable, vocab

        paths = corpus_file
        if corpus_file is None:
            paths, why = readable.readable_paths(corpus_iterable) if self.settings.workers_read else \
                (None, "the workers do not read iterables (workers_read is off)")
            if paths is None:
                logger.info("the vocabulary is counted on this machine: %s", why or "the workers cannot read an "
                            "iterable of sentences (give build_vocab corpus_file, or a LineSentence of a file)")
                return super().scan_vocab(corpus_iterable=corpus_iterable, progress_per=progress_per, workers=workers,
                                          trim_rule=trim_rule)
            paths = paths[0] if len(paths) == 1 else paths
        paths = os.path.abspath(paths) if isinstance(paths, (str, os.PathLike)) else [os.path.abspath(p) for p in paths]
        if self.max_vocab_size:
            logger.warning("max_vocab_size=%i: the cluster counts every word exactly, then prunes the vocabulary as "
                           "gensim does until it fits (gensim prunes while it scans, so its counts and words can "
                           "differ; docs/corpus_file.rst)", self.max_vocab_size)
        found = vocab.ClusterCount(self.ns_conf, self.settings.cluster_timeout).count(paths, self._kept_from())
        vocab.prune_like_gensim(found.raw_vocab, self.max_vocab_size, trim_rule)
        self.raw_vocab, self._dropped = found.raw_vocab, found.dropped
        self.vocab_stats = found.stats
        return found.total_words, found.corpus_count

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
        sees no file or another file there. A ``LineSentence`` of a plain file goes the same way
        (``workers_read``; if a worker does not see the file, the client streams it).

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
            ``merge``, ..., ``tensorboard_dir``: :class:`gensim_distw2v.config.settings.Settings`) for further
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
        model.settings, model.cluster_stats, model.vocab_stats = settings, {}, {}
        return model


def _signature(init):
    """``Word2Vec``'s signature as documented: gensim's arguments (positional as gensim's), then
    ``init``'s own keywords (``distributed``, ``ns_conf``) and every setting, keyword-only, with its
    default."""
    own = [p for p in inspect.signature(init).parameters.values() if p.kind is p.KEYWORD_ONLY]
    own += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
            for f in dataclasses.fields(Settings)]
    gensims = [p for p in _GENSIM.parameters.values() if p.kind is not p.VAR_KEYWORD]
    return _GENSIM.replace(parameters=gensims + own)


for _field in dataclasses.fields(Settings):  # an attribute per setting: model.sync_words = 5000
    setattr(Word2Vec, _field.name, _setting(_field))
Word2Vec.__init__.__signature__ = _signature(Word2Vec.__init__)
if Word2Vec.__doc__:  # None under python -OO
    Word2Vec.__doc__ = Word2Vec.__doc__.replace("    <settings>\n", fields.numpydoc(Settings))
