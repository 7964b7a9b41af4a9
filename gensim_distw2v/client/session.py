"""A session's set-up and its weights on the client: its config, opening it, the arrays up, the weights down."""
import logging
import os
import time

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.io import transport
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.protocol import errors
from gensim_distw2v.io.corpusfile import fingerprint, fingerprint_files, vocab_arrays
from gensim_distw2v.core.kernel import MAX_WORDS_IN_JOB, model_arrays, node_counts, reverse_tree, reverse_tree_order
from gensim_distw2v.core.schedule import (damp_words, damped_rows, default_cold_output_down, default_cold_output_every,
                                          default_sync_words, hot_rows, output_hot_rows, tree_hot_rows)
from gensim_distw2v.protocol.transfers import fetch_rows, send_in_parts
from gensim_distw2v.client.checkpoints import _NotOpened, _RestoreFailed, run_identity
from gensim_distw2v.client.links import ShardLinks
from gensim_distw2v.versions import versions

logger = logging.getLogger(__name__)

__all__ = ["SessionSetup"]

RESUME_WAIT = 600.0  # seconds a resume waits for the run's previous session (its client dead) to end
RESUME_LOOK = 5.0  # seconds between its tries


class SessionSetup:
    """Opening a session (config, arrays up, shards started) and the trained weights back, for
    :class:`gensim_distw2v.client.training.DistributedTraining`.

    Parameters
    ----------
    run : gensim_distw2v.client.run.RunState
        The run's model, settings and open session (``open`` sets its ``token``).
    """

    def __init__(self, run):
        self.run = run

    def config(self, n_workers, compute_loss, epochs, corpus_file=None, total_words=None, total_examples=None,
                resume=False, below=None, threads=None):
        """The session's :class:`gensim_distw2v.protocol.SessionConfig` (checked) and its arrays (a corpus
        file's ranges handed out from one stretch of it per trainer thread: ``threads``, else ``n_workers``)."""
        model = self.run.model
        kernel, arrays = model_arrays(model)
        arrays = reverse_tree(arrays)  # hs: tree nodes busiest first, as the merge rules' tiers expect
        if corpus_file is not None:
            arrays["vocab_bytes"], arrays["vocab_offsets"] = vocab_arrays(model.wv.index_to_key)
        params = protocol.TrainParams(**kernel, sample=bool(model.sample), vector_size=int(model.wv.vector_size),
                                  vocab_size=len(model.wv), seed=int(model.seed) & 0xFFFFFFFF)
        if not params.sample:
            arrays.pop("sample_int", None)
        rng = model.random if isinstance(model.random, np.random.RandomState) else np.random.RandomState(model.seed)
        settings = self.run.settings
        # the interval grows with the corpus (words per epoch: given, or counted by build_vocab)
        corpus_words = int(total_words or getattr(model, "corpus_total_words", 0) or 0)
        sync_words = int(settings.sync_words or default_sync_words(n_workers, corpus_words, sg=bool(model.sg)))
        counts = model.wv.expandos.get("count")
        if counts is None:  # no counts (a vocabulary built by hand): rows are in no known order of frequency
            counts = np.zeros(len(model.wv))
        # hs: how often each tree node is on a trained word's path (the tiers of syn1's rows)
        tree = node_counts(arrays["points"], arrays["code_offsets"], counts, len(arrays["syn1"])) \
            if "syn1" in arrays else None
        spec = None
        if corpus_file is not None:
            several = not isinstance(corpus_file, (str, os.PathLike))  # a folder's files (PathLineSentences)
            path = os.path.commonpath([os.path.abspath(p) for p in corpus_file]) if several else \
                os.path.abspath(corpus_file)
            found = fingerprint_files(corpus_file) if several else fingerprint(path)
            # ranges of about batch_words words: the unit of work and of load balancing; with a merge
            # interval longer than a job (a large corpus merges every 1/5,400 of it), of the interval,
            # but at least four per worker and epoch (a range costs the dispatcher the same whatever
            # its length)
            range_words = model.batch_words
            if sync_words > MAX_WORDS_IN_JOB:
                range_words = max(range_words, min(sync_words, int(total_words) // (4 * max(1, n_workers))))
            trainers = max(1, min(protocol.MAX_STREAMS, int(threads or n_workers)))
            spec = protocol.CorpusFileSpec(
                path=path, size=found["size"], digest=found["digest"], total_words=int(total_words),
                range_bytes=max(1, round(range_words * found["size"] / max(1, total_words))),
                start_alpha=float(model.alpha), end_alpha=float(model.min_alpha), files=found.get("files"),
                # a corpus_file as gensim's corpus_file mode reads it, a stretch a trainer thread; a LineSentence
                # the workers read, front to back, as gensim's iterable mode does (docs/schedule.rst, "Ordered files")
                streams=trainers if self.run.given_file else 1,
                rate_threads=trainers if self.run.given_file and settings.corpus_file_rate == "gensim" else 1)
        config = protocol.SessionConfig(
            versions=versions(),
            params=params,
            arrays={name: {"dtype": a.dtype.name, "shape": list(a.shape)} for name, a in arrays.items()},
            settings=settings.replace(sync_words=sync_words, cold_output_every=int(
                settings.cold_output_every or default_cold_output_every(bool(model.sg))),
                cold_output_down=settings.cold_output_down or default_cold_output_down(bool(model.sg))),
            damp_rows=damped_rows(counts, damp_words(sync_words), tree_counts=tree,
                                  output_most=settings.damp_output_rows),
            hot_rows=hot_rows(counts, sync_words),
            output_hot_rows=output_hot_rows(counts, sync_words, params.negative, arrays.get("cum_table"), bool(model.sg)),
            tree_hot_rows=0 if tree is None else tree_hot_rows(tree, np.sum(counts, dtype=np.float64), sync_words),
            compute_loss=bool(compute_loss), epochs=int(epochs), rng_state=protocol.RngState.of(rng), workers=int(n_workers),
            total_words=int(total_words or model.corpus_total_words or 0), corpus_file=spec)
        if settings.checkpoint_dir is not None:
            config.checkpoint = protocol.CheckpointSpec(
                dir=settings.checkpoint_dir, every=settings.checkpoint_every, resume=bool(resume), below=below,
                identity=run_identity(model, params, epochs, spec, total_examples, total_words))
        config.check()
        return config, arrays

    @staticmethod
    def _open_session(dispatcher, config):
        """``open_session``; a resume finding the dispatcher busy (with the run's session whose client
        died, say) tries again every :data:`RESUME_LOOK` seconds for up to :data:`RESUME_WAIT`."""
        resume = config.checkpoint is not None and config.checkpoint.resume
        deadline, told = time.monotonic() + RESUME_WAIT, 0.0
        while True:
            try:
                return dispatcher.call("open_session", config)
            except errors.Busy as err:
                now = time.monotonic()
                if not resume or now + RESUME_LOOK > deadline:
                    raise
                if now - told >= 30.0:
                    logger.warning("resume: %s; waiting for it (up to %.0f s more)", err, deadline - now)
                    told = now
                time.sleep(RESUME_LOOK)

    def open(self, dispatcher, config, arrays):
        """Open a session: the dispatcher names its shards, the arrays go up (a resumed session's
        weights come from the checkpoint), shards and dispatcher start. Returns ``(session id,
        ShardLinks, Resumed or None)``; on failure the session is closed everywhere."""
        opened = self._open_session(dispatcher, config)
        sid, links, self.run.token = opened.session, None, opened.owner  # (the client's own secret)
        try:  # each shard is shown its own capability only, never the owner's secret (not even closing early)
            links = ShardLinks(opened.shards, self.run.hmac_key, self.run.ns_conf, [
                protocol.shard_capability(opened.owner, sid, shard) for shard in range(len(opened.shards))],
                opened.token)
            self._upload(dispatcher, sid, arrays, config, links, opened)
            dispatcher.call("start", session=sid, token=opened.owner)
            return sid, links, opened.resumed
        except BaseException:
            if links is not None:
                links.close(sid)
            try:
                dispatcher.call("close", session=sid, token=opened.owner)
            except transport.PyroError:
                pass
            raise

    def _upload(self, dispatcher, sid, arrays, config, links, opened):
        """The static arrays to the dispatcher, each shard's rows of the weights to that shard (or,
        resuming, where the shards read them); start the shards (each with its capability)."""
        resumed = opened.resumed
        weights = {name: a for name, a in arrays.items() if name in protocol.WEIGHTS}
        part_bytes = self.run.settings.part_bytes
        for name, array in arrays.items():
            if name not in weights:
                send_in_parts(array, part_bytes, lambda lo, part, name=name: dispatcher.call(
                    "upload", session=sid, name=name, lo=lo, array=part, token=opened.owner))
        restore = None if resumed is None else protocol.RestoreSpec(
            dir=config.checkpoint.dir, sequence=resumed.checkpoint, count=resumed.shards, run=resumed.run)

        capabilities = links.close_tokens

        def give(shard):
            capability = capabilities[shard]
            spec = protocol.ShardSpec(
                session=sid, index=shard, count=len(links.shards), vocab_size=config.params.vocab_size,
                vector_size=config.params.vector_size, weights=list(weights), merge=config.settings.merge,
                merge_dtype=config.settings.merge_dtype, damp_rows=config.damp_rows, hot_rows=config.hot_rows,
                tree_hot_rows=config.tree_hot_rows, versions=config.versions, restore=restore, token=opened.token,
                owner=capability, cold_output_down=config.settings.cold_output_down or "held",
                output_hot_rows=config.output_hot_rows,
                max_delta=protocol.max_delta_for(max(self.run.model.alpha, self.run.model.min_alpha),
                                                 config.params.vector_size))
            try:
                links.call(shard, "open_session", spec)
            except errors.RestoreFailed as err:
                if restore is not None:
                    raise _RestoreFailed(resumed.checkpoint, str(err)) from None
                raise
            except errors.SessionClosed as err:  # the dispatcher's word did not reach it: nothing trained yet
                raise _NotOpened(f"shard {links.shards[shard][0]} did not hear of the new session", err) from None
            if restore is None:
                for name, array in weights.items():
                    send_in_parts(links.layout.rows_of(array, shard), part_bytes, lambda lo, part, name=name: links.call(
                        shard, "upload", session=sid, name=name, lo=lo, array=part, token=capability))
            links.call(shard, "start", session=sid, token=capability)
        links.each(give)

    def download_weights(self, links, sid):
        """The trained weights from the shards, into the model once all are in and checked finite and
        bounded (:func:`gensim_distw2v.protocol.within`): a failed check leaves the model as it was."""
        model = self.run.model
        targets = {"syn0": model.wv.vectors}
        if model.negative:
            targets["syn1neg"] = model.syn1neg
        if model.hs:
            targets["syn1"] = model.syn1
        got = {name: np.empty_like(target) for name, target in targets.items()}
        bound = protocol.weight_bound(protocol.max_delta_for(max(model.alpha, model.min_alpha), model.wv.vector_size))

        def fetch(shard):
            for name, target in got.items():
                def check(part, name=name):
                    if not protocol.within(part, bound):
                        raise ClusterError(
                            f"shard {links.shards[shard][0]} sent {name} weights that are not finite or larger than "
                            f"{bound:.3g}: the model keeps the weights it had before this train() call")
                fetch_rows(links.layout.rows_of(target, shard), self.run.settings.part_bytes,
                           lambda lo, hi, name=name: links.call(shard, "download", session=sid, name=name, lo=lo, hi=hi,
                                                               token=links.token),
                           f"final {name}", check)
        links.each(fetch)
        if model.hs:  # trained busiest node first (kernel.reverse_tree)
            got["syn1"] = got["syn1"][reverse_tree_order(len(model.syn1))]
        for name, target in targets.items():
            target[...] = got[name]
        model.wv.norms = None  # the vectors changed: most_similar() must not use the old norms
