"""A training session seen from the client: set-up, job producer, progress, callbacks, final pull.

:class:`DistributedTraining` runs one ``train()`` call of a :class:`gensim_distw2v.Word2Vec` on a
cluster: it opens a session on the dispatcher with the model's hyper-parameters and static
arrays, gives the weights to the session's parameter shards,
streams the corpus as encoded jobs with gensim's cuts and learning rates (never holding more
than a few jobs) or, with ``corpus_file``, lets the workers read the shared file's byte ranges
themselves, logs gensim-style progress, runs the epoch callbacks, and copies the merged weights
back from the shards into the model.

With ``checkpoint_dir``, it asks for a checkpoint at every epoch end, and when the dispatcher or a
shard is lost it waits up to ``cluster_timeout`` for the cluster to be back and resumes the run
from the last checkpoint (a new session that starts where the checkpoint left off: the jobs it
trained are skipped, the corpus file's trained ranges are not handed out); ``resume_from`` does the
same for a run whose client died.
"""
import concurrent.futures
import hashlib
import logging
import os
import time
import zlib

import gensim
import numpy as np

import gensim_distw2v
from gensim_distw2v import protocol
from gensim_distw2v.io import transport
from gensim_distw2v.io.board import Board, evaluate
from gensim_distw2v.io.corpusfile import fingerprint, vocab_arrays
from gensim_distw2v.core.jobs import iter_epoch_jobs, next_alpha
from gensim_distw2v.core.kernel import MAX_WORDS_IN_JOB, model_arrays, node_counts, reverse_tree, reverse_tree_order
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.core.schedule import damped_rows, default_sync_words, hot_rows, row_ranges, tree_hot_rows
from gensim_distw2v.settings import Settings

logger = logging.getLogger(__name__)

JOBS_PER_CALL = 8
MAX_RESUMES = 20  # a run resumes from its checkpoints after at most this many losses of a server


class _Retry(Exception):
    """A session of the run ended in a way the run may recover from (with checkpoints)."""


class _Lost(_Retry):
    """The dispatcher or a shard was lost: ``what`` happened, ``error`` is raised if the run cannot resume."""

    def __init__(self, what, error):
        super().__init__(what)
        self.what, self.error = what, error


class _RestoreFailed(_Retry):
    """A shard could not read its rows of checkpoint ``sequence`` (damaged on disk): resume from an older one."""

    def __init__(self, sequence, message):
        super().__init__(message)
        self.sequence = sequence


class SkippedJobs:
    """The jobs of a resumed epoch that its checkpoint trained: skipped, and checked to be the
    jobs it trained (their number and the sum of their words' CRC-32), and the epoch's first jobs
    checked to be those of the run's epochs (their CRC-32): another corpus is refused.

    Parameters
    ----------
    point : gensim_distw2v.protocol.Resumed or None
        Where the run resumes (None: nothing to skip).
    """

    def __init__(self, point):
        self.point, self.seen, self.crc, self.checked = point, 0, 0, point is None
        if point is not None:
            self.ids = set(point.done_jobs)
            self.count = point.done_below - point.first_job + len(point.done_jobs)
            self.last = max([point.done_below - 1] + list(point.done_jobs))

    def skips(self, job_id, job):
        """Whether job ``job_id`` (a :class:`gensim_distw2v.core.jobs.Job`) was trained before the resume.

        Raises
        ------
        ValueError
            Once the last trained job has passed, if the jobs differ from those the checkpoint trained.
        """
        point = self.point
        if point is None:
            return False
        position = job_id - point.first_job
        if position < len(point.head) and zlib.crc32(np.ascontiguousarray(job.indices, dtype=np.uint32)) \
                != point.head[position]:
            raise ValueError(
                f"resume: this corpus is not the one checkpoint {point.checkpoint} was trained on: job {position} of "
                f"an epoch holds other words here. Resume with the same corpus, in the same order (and the same "
                f"batch_words)")
        if self.checked:
            return False
        trained = job_id < point.done_below or job_id in self.ids
        if trained:
            self.seen += 1
            self.crc = (self.crc + zlib.crc32(np.ascontiguousarray(job.indices, dtype=np.uint32))) % 2 ** 64
        if job_id >= self.last:
            self.finish()
        return trained

    def finish(self):
        """Check the skipped jobs (at the last of them, or at the end of the corpus)."""
        if self.checked:
            return
        self.checked = True
        point = self.point
        if self.seen != self.count or self.crc != point.crc:
            raise ValueError(
                f"resume: this corpus is not the one checkpoint {point.checkpoint} was trained on: the "
                f"{self.count} jobs it trained of epoch {point.epoch} " + (
                    f"are {self.seen} here" if self.seen != self.count else "hold other words here")
                + ". Resume with the same corpus, in the same order (and the same batch_words)")


def find_dispatcher(ns_conf, hmac_key=None, timeout=60.0):
    """A proxy to the dispatcher registered in the name server of ``ns_conf``.

    Raises
    ------
    transport.ClusterError
        No name server, or no dispatcher registered in it; the message says how to start it.
    """
    host, port, _broadcast, key = transport.ns_settings(ns_conf)
    hmac_key = hmac_key or key  # the cluster's key, given in ns_conf
    uri = transport.lookup(ns_conf, transport.DISPATCHER_NAME)
    if uri is None:
        raise transport.ClusterError(
            f"no dispatcher is registered as {transport.DISPATCHER_NAME} in the name server at {host}:{port}. "
            f"Start one with: python -m gensim_distw2v.dispatcher --ns-host {host} --ns-port {port}")
    proxy = transport.connect(uri, hmac_key, timeout=timeout)
    try:
        proxy._pyroBind()
    except transport.PyroError as err:
        raise transport.ClusterError(
            f"the dispatcher registered at {uri} does not answer ({err}); it may have died: start it again "
            f"with: python -m gensim_distw2v.dispatcher --ns-host {host} --ns-port {port}") from None
    return proxy


def wait_for_workers(dispatcher, ns_conf, timeout):
    """Wait until at least one worker and one shard are registered; return the number of workers."""
    host, port, _broadcast, _key = transport.ns_settings(ns_conf)
    deadline = time.monotonic() + timeout
    while True:
        status = protocol.Status.from_wire(dispatcher.status())
        if status.workers and status.shards:
            return len(status.workers)
        if time.monotonic() >= deadline:
            role = "workers" if not status.workers else "parameter shards"
            module = "worker" if not status.workers else "shard"
            raise transport.ClusterError(
                f"no {role} registered with the dispatcher within {timeout:.0f} s. Start one on each node with: "
                f"python -m gensim_distw2v.{module} --ns-host {host} --ns-port {port}")
        time.sleep(0.2)


class ShardLinks:
    """The client's connections to a session's shards, and calls to all of them at once.

    Parameters
    ----------
    shards : list of (str, str)
        ``[name, uri]`` of each shard, in the session's order.
    hmac_key : bytes, optional
        The cluster's key.
    ns_conf : dict
        Where the name server is (for the restart command in errors).
    """

    def __init__(self, shards, hmac_key, ns_conf, token):
        self.shards, self.ns_conf, self.token = [tuple(s) for s in shards], ns_conf, token
        self.layout = ShardLayout(len(self.shards))
        self.proxies = [transport.connect(uri, hmac_key, timeout=60.0) for _name, uri in self.shards]
        self.pool = concurrent.futures.ThreadPoolExecutor(len(self.shards), thread_name_prefix="shard-link")

    def call(self, shard, method, *args):
        """``method(*args)`` on one shard; one that does not answer raises ClusterError naming it."""
        try:
            return getattr(self.proxies[shard], method)(*args)
        except transport.PyroError as err:
            name, uri = self.shards[shard]
            host, port, _broadcast, _key = transport.ns_settings(self.ns_conf)
            raise transport.ClusterError(
                f"lost parameter shard {name} at {uri} ({type(err).__name__}: {err}); this train() call did not "
                f"finish and the model keeps the weights it had before it (or at the last epoch end, with "
                f"callbacks). Restart the shard with: python -m gensim_distw2v.shard --ns-host {host} --ns-port "
                f"{port}, then call train() again") from None

    def each(self, fn):
        """``[fn(0), fn(1), ...]``, one per shard, in parallel."""
        return list(self.pool.map(fn, range(len(self.shards))))

    def close(self, sid):
        """Close the session on every shard (best effort) and the connections."""
        for shard, proxy in enumerate(self.proxies):
            try:
                proxy._pyroTimeout = 5.0
                proxy.close(sid, self.token)
            except (transport.PyroError, ValueError) as err:
                logger.warning("could not close session %s on shard %s: %s", sid, self.shards[shard][0], err)
            transport.release(proxy)
        self.pool.shutdown(wait=False)


def _per_word(worker):
    """``"up/down B/w"``: a worker's (:class:`gensim_distw2v.protocol.WorkerCounts`) bytes sent and
    received per raw word it trained (merged)."""
    words = max(1, worker.words)
    return f"{worker.bytes_up / words:.0f}/{worker.bytes_down / words:.0f} B/w"


def _node_brief(name, node):
    """``"worker 3f9a 97% 210MB"``: a node's (:class:`gensim_distw2v.protocol.NodeMetrics`) role, id,
    CPU share of one core over the session and resident memory, for the progress lines."""
    short = name.rsplit(".", 1)[-1]
    label = node.role if short == node.role else f"{node.role} {short}"
    return f"{label} {100 * node.cpu / max(node.seconds, 1e-9):.0f}% {node.rss / 2 ** 20:.0f}MB"


def _node_line(name, node):
    """A node's closing summary (:class:`gensim_distw2v.protocol.NodeMetrics`), for the log."""
    return (f"{name}: {node.words} words ({node.words / max(node.seconds, 1e-9):.0f} words/s), CPU seconds kernel "
            f"{node.kernel_cpu:.1f} / merge {node.merge_cpu:.1f} / other {node.other_cpu:.1f} "
            f"({100 * node.cpu / max(node.seconds, 1e-9):.0f}% of a core), RSS {node.rss / 2 ** 20:.0f} MB (peak "
            f"{node.peak_rss / 2 ** 20:.0f} MB), sent {node.bytes_sent / 1e6:.1f} MB, received "
            f"{node.bytes_received / 1e6:.1f} MB")


class DistributedTraining:
    """One ``train()`` call of a model on a cluster.

    Parameters
    ----------
    model : gensim_distw2v.Word2Vec
        The model (vocabulary built); its weights are sent, trained remotely and copied back.
    ns_conf : dict
        Where the name server is (``host``, ``port``, ``broadcast``, ``hmac_key``).
    settings : gensim_distw2v.settings.Settings, optional
        How to train on the cluster (default: the model's ``settings``).
    """

    def __init__(self, model, ns_conf, settings=None):
        self.model, self.ns_conf = model, dict(ns_conf or {})
        self._token = None  # the open session's secret (protocol.Opened.token)
        self.settings = settings if settings is not None else model.settings
        if not isinstance(self.settings, Settings):
            raise ValueError(f"settings must be a gensim_distw2v.settings.Settings, got {type(self.settings).__name__}")
        self.hmac_key = transport.ns_settings(self.ns_conf)[3]
        self.stats = {}
        self.board = None  # a board.Board while train() writes TensorBoard events
        self._failed_reported = 0  # the last failed checkpoint logged (each is logged once)
        self._awaiting = None  # the epoch end's checkpoint _checkpoint() waits for (it logs that one)

    def _identity(self, params, epochs, spec, total_examples, total_words):
        """What must be equal for a run to resume from a checkpoint: the versions, the vocabulary (its
        words and counts, digested), the hyper-parameters, the epochs, the corpus (a file's
        fingerprint; an iterable's counts; its jobs are checked as they are skipped:
        :class:`gensim_distw2v.protocol.Resumed`)."""
        model = self.model
        digest = hashlib.blake2b(digest_size=16)
        digest.update("\n".join(model.wv.index_to_key).encode("utf8"))
        counts = model.wv.expandos.get("count")
        if counts is not None:
            digest.update(np.ascontiguousarray(counts, dtype=np.int64).tobytes())
        kernel = params.to_wire()
        return {"versions": {"gensim": gensim.__version__, "gensim_distw2v": gensim_distw2v.__version__},
                "vocabulary": digest.hexdigest(), "vocab_size": params.vocab_size, "epochs": int(epochs),
                "params": {key: kernel[key] for key in sorted(kernel)}, "alpha": float(model.alpha),
                "min_alpha": float(model.min_alpha), "batch_words": int(model.batch_words),
                "corpus_file": None if spec is None else f"{spec.path} ({spec.size} bytes, {spec.digest})",
                "total_words": int(total_words or 0), "total_examples": int(total_examples or 0)}

    def _config(self, n_workers, compute_loss, epochs, corpus_file=None, total_words=None, total_examples=None,
                resume=False, below=None):
        """The session's :class:`gensim_distw2v.protocol.SessionConfig` (checked) and its arrays."""
        model = self.model
        kernel, arrays = model_arrays(model)
        arrays = reverse_tree(arrays)  # hs: tree nodes busiest first, as the merge rules' tiers expect
        if corpus_file is not None:
            arrays["vocab_bytes"], arrays["vocab_offsets"] = vocab_arrays(model.wv.index_to_key)
        params = protocol.TrainParams(**kernel, sample=bool(model.sample), vector_size=int(model.wv.vector_size),
                                  vocab_size=len(model.wv), seed=int(model.seed) & 0xFFFFFFFF)
        if not params.sample:
            arrays.pop("sample_int", None)
        rng = model.random if isinstance(model.random, np.random.RandomState) else np.random.RandomState(model.seed)
        settings = self.settings
        # the interval grows with the corpus (words per epoch: given, or counted by build_vocab)
        corpus_words = int(total_words or getattr(model, "corpus_total_words", 0) or 0)
        sync_words = int(settings.sync_words or default_sync_words(n_workers, corpus_words))
        counts = model.wv.expandos.get("count")
        if counts is None:  # no counts (a vocabulary built by hand): rows are in no known order of frequency
            counts = np.zeros(len(model.wv))
        # hs: how often each tree node is on a trained word's path (the tiers of syn1's rows)
        tree = node_counts(arrays["points"], arrays["code_offsets"], counts, len(arrays["syn1"])) \
            if "syn1" in arrays else None
        spec = None
        if corpus_file is not None:
            path = os.path.abspath(corpus_file)
            found = fingerprint(path)
            # ranges of about batch_words words: the unit of work and of load balancing; with a merge
            # interval longer than a job (a large corpus merges every 1/5,400 of it), of the interval,
            # but at least four per worker and epoch (a range costs the dispatcher the same whatever
            # its length)
            range_words = model.batch_words
            if sync_words > MAX_WORDS_IN_JOB:
                range_words = max(range_words, min(sync_words, int(total_words) // (4 * max(1, n_workers))))
            spec = protocol.CorpusFileSpec(
                path=path, size=found["size"], digest=found["digest"], total_words=int(total_words),
                range_bytes=max(1, round(range_words * found["size"] / max(1, total_words))),
                start_alpha=float(model.alpha), end_alpha=float(model.min_alpha))
        config = protocol.SessionConfig(
            versions={"gensim": gensim.__version__, "gensim_distw2v": gensim_distw2v.__version__},
            params=params,
            arrays={name: {"dtype": a.dtype.name, "shape": list(a.shape)} for name, a in arrays.items()},
            settings=settings.replace(sync_words=sync_words),
            damp_rows=damped_rows(counts, sync_words, tree_counts=tree), hot_rows=hot_rows(counts, sync_words),
            tree_hot_rows=0 if tree is None else tree_hot_rows(tree, np.sum(counts, dtype=np.float64), sync_words),
            compute_loss=bool(compute_loss), epochs=int(epochs), rng_state=protocol.RngState.of(rng), workers=int(n_workers),
            total_words=int(total_words or model.corpus_total_words or 0), corpus_file=spec)
        if settings.checkpoint_dir is not None:
            config.checkpoint = protocol.CheckpointSpec(
                dir=settings.checkpoint_dir, every=settings.checkpoint_every, resume=bool(resume), below=below,
                identity=self._identity(params, epochs, spec, total_examples, total_words))
        config.check()
        return config, arrays

    def _open(self, dispatcher, config, arrays):
        """Open a session: the dispatcher names its shards, the arrays go up (a resumed session's
        weights come from the checkpoint), shards and dispatcher start. Returns ``(session id,
        ShardLinks, Resumed or None)``; on failure the session is closed everywhere."""
        opened = protocol.Opened.from_wire(dispatcher.open_session(config.to_wire()))
        sid, links, self._token = opened.session, None, opened.token
        try:
            links = ShardLinks(opened.shards, self.hmac_key, self.ns_conf, opened.token)
            self._upload(dispatcher, sid, arrays, config, links, opened.resumed)
            dispatcher.start(sid)
            return sid, links, opened.resumed
        except BaseException:
            if links is not None:
                links.close(sid)
            try:
                dispatcher.close(sid, opened.token)
            except transport.PyroError:
                pass
            raise

    def _upload(self, dispatcher, sid, arrays, config, links, resumed=None):
        """The static arrays to the dispatcher, each shard's rows of the weights to that shard (or,
        resuming, where the shards read them); start the shards."""
        weights = {name: a for name, a in arrays.items() if name in protocol.WEIGHTS}
        for name, array in arrays.items():
            if name in weights:
                continue
            row_bytes = max(1, array.nbytes // max(1, len(array)))
            for lo, hi in row_ranges(len(array), row_bytes, self.settings.part_bytes):
                dispatcher.upload(sid, name, lo, protocol.pack_array(array[lo:hi]), links.token)
        restore = None if resumed is None else protocol.RestoreSpec(
            dir=config.checkpoint.dir, sequence=resumed.checkpoint, count=resumed.shards, run=resumed.run)

        def give(shard):
            spec = protocol.ShardSpec(
                session=sid, index=shard, count=len(links.shards), vocab_size=config.params.vocab_size,
                vector_size=config.params.vector_size, weights=list(weights), merge=config.settings.merge,
                merge_dtype=config.settings.merge_dtype, damp_rows=config.damp_rows, hot_rows=config.hot_rows,
                tree_hot_rows=config.tree_hot_rows, versions=config.versions, restore=restore, token=links.token,
                max_delta=protocol.max_delta_for(max(self.model.alpha, self.model.min_alpha), config.params.vector_size))
            try:
                links.call(shard, "open_session", spec.to_wire())
            except ValueError as err:
                if restore is not None and str(err).startswith("restore:"):
                    raise _RestoreFailed(resumed.checkpoint, str(err)) from None
                raise
            if restore is None:
                for name, array in weights.items():
                    rows = links.layout.rows_of(array, shard)
                    for lo, hi in row_ranges(len(rows), 4 * array.shape[1], self.settings.part_bytes):
                        links.call(shard, "upload", sid, name, lo, protocol.pack_array(rows[lo:hi]), links.token)
            links.call(shard, "start", sid)
        links.each(give)

    def _download_weights(self, links, sid):
        """The trained weights from the shards, into the model once all are in and checked finite and
        bounded (:func:`gensim_distw2v.protocol.within`): a failed check leaves the model as it was."""
        model = self.model
        targets = {"syn0": model.wv.vectors}
        if model.negative:
            targets["syn1neg"] = model.syn1neg
        if model.hs:
            targets["syn1"] = model.syn1
        got = {name: np.empty_like(target) for name, target in targets.items()}
        bound = 100 * protocol.max_delta_for(max(model.alpha, model.min_alpha), model.wv.vector_size)

        def fetch(shard):
            for name, target in got.items():
                rows = links.layout.rows_of(target, shard)
                for lo, hi in row_ranges(len(rows), target.shape[1] * 4, self.settings.part_bytes):
                    part = protocol.unpack_array(links.call(shard, "download", sid, name, lo, hi), f"final {name}",
                                             "float32", shape=(hi - lo, target.shape[1]))
                    if not protocol.within(part, bound):
                        raise transport.ClusterError(
                            f"shard {links.shards[shard][0]} sent {name} weights that are not finite or larger than "
                            f"{bound:.3g}: the model keeps the weights it had before this train() call")
                    rows[lo:hi] = part
        links.each(fetch)
        if model.hs:  # trained busiest node first (kernel.reverse_tree)
            got["syn1"] = got["syn1"][reverse_tree_order(len(model.syn1))]
        for name, target in targets.items():
            target[...] = got[name]
        model.wv.norms = None  # the vectors changed: most_similar() must not use the old norms

    def _shard_stats(self, links, sid, nodes):
        """Per shard, of this session: ``{"merges", "merge_cpu", "bytes_in", "bytes_out", "damped"}``
        (merge calls, their CPU seconds, bytes in and out, rows damped); each shard's metrics now
        replace its last heartbeat's in ``nodes``."""
        out = {}
        for shard, (name, _uri) in enumerate(links.shards):
            status = protocol.ShardStatus.from_wire(links.call(shard, "status"))
            held = status.session
            if status.node is not None and status.node.session == sid:
                nodes[name] = status.node
            if held is not None and held.id == sid:
                out[name] = {key: getattr(held, key) for key in ("merges", "merge_cpu", "bytes_in", "bytes_out",
                                                                 "damped")}
        return out

    def train(self, corpus_iterable, total_examples, total_words, epochs, compute_loss, callbacks,
              report_delay=1.0, corpus_file=None, resume_from=None):
        """Train ``epochs`` passes over ``corpus_iterable`` (or over ``corpus_file``, which every
        worker reads at the same path) on the cluster.

        With ``checkpoint_dir`` set, a lost dispatcher or shard is waited for (``cluster_timeout``)
        and the run resumed from its last checkpoint; ``resume_from`` (a checkpoint folder) goes on
        with a run whose client died.

        Returns
        -------
        (int, int)
            Effective and raw words trained, as gensim's ``train()`` returns them.
        """
        if resume_from is not None:
            folder = os.path.abspath(os.fspath(resume_from))
            if self.settings.checkpoint_dir not in (None, folder):
                raise ValueError(f"resume_from={folder!r} and checkpoint_dir={self.settings.checkpoint_dir!r} differ: "
                                 f"a resumed run goes on writing its checkpoints where it reads them; give one folder")
            self.settings = self.settings.replace(checkpoint_dir=folder)
        args = (corpus_iterable, total_examples, total_words, epochs, compute_loss, callbacks, report_delay,
                corpus_file)
        self.board = None if self.settings.tensorboard_dir is None else Board(self.settings.tensorboard_dir)
        try:
            trained = self._train(args, resume_from)
            if self.board is not None:
                self.board.projector(self.model.wv, self.settings.tensorboard_words)
            return trained
        finally:
            if self.board is not None:
                self.board.close()

    def _train(self, args, resume_from):
        """:meth:`train`, its sessions (a run resumed after a loss has several)."""
        self._call_start = self._session_start = time.monotonic()
        self._begun = set()  # epochs whose callbacks' on_epoch_begin ran
        resume, below, lost = resume_from is not None, None, 0
        self._resumes = 0
        self._checkpoint_wait = 0.0  # seconds the client waited at epoch ends for checkpoints
        lost_error = None  # resuming after a loss: the error to raise if there is nothing to resume from
        while True:
            try:
                return self._run(*args, resume=resume, below=below)
            except _RestoreFailed as err:
                logger.warning("checkpoint %i could not be restored (%s): resuming from the one before",
                               err.sequence, err)
                below = err.sequence
            except ValueError as err:
                if lost_error is None or not str(err).startswith(("resume: no usable checkpoint", "resume: the run")):
                    raise
                raise lost_error from None  # lost before the run's first checkpoint was written
            except _Lost as err:
                if self.settings.checkpoint_dir is None or lost >= MAX_RESUMES:
                    raise err.error from None
                lost_error = err.error
                lost += 1
                logger.warning("%s; resuming from the last checkpoint in %s once the cluster is back (waiting up to "
                               "%.0f s, attempt %i of %i)", err.what, self.settings.checkpoint_dir,
                               self.settings.cluster_timeout, lost, MAX_RESUMES)
                resume, below = True, None
                self._resumes += 1

    def _connect(self, resume):
        """The dispatcher; resuming, waited for up to ``cluster_timeout`` (it may be restarting)."""
        deadline = time.monotonic() + (self.settings.cluster_timeout if resume else 0.0)
        while True:
            try:
                return find_dispatcher(self.ns_conf, self.hmac_key)
            except transport.ClusterError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def _wait_for_shards(self, dispatcher, count):
        """Resuming: wait up to ``cluster_timeout`` for as many shards as the lost session had
        (the run goes on with those there are after that)."""
        deadline = time.monotonic() + self.settings.cluster_timeout
        while len(protocol.Status.from_wire(dispatcher.status()).shards) < count and time.monotonic() < deadline:
            time.sleep(0.2)

    def _run(self, corpus_iterable, total_examples, total_words, epochs, compute_loss, callbacks, report_delay,
             corpus_file, resume=False, below=None):
        """One session of the run (a run resumed after a loss has several): ``(effective, raw)``."""
        model = self.model
        dispatcher = self._connect(resume)
        sid = links = None
        try:
            n_workers = wait_for_workers(dispatcher, self.ns_conf, self.settings.cluster_timeout)
            if resume:
                self._wait_for_shards(dispatcher, getattr(self, "_shard_count", 1))
            config, arrays = self._config(n_workers, compute_loss, epochs, corpus_file, total_words, total_examples,
                                          resume=resume, below=below)
            sid, links, resumed = self._open(dispatcher, config, arrays)
            self._shard_count = len(links.shards)
            logger.info("training on a cluster of %i workers and %i parameter shards (session %s), merge=%s every %i "
                        "words per worker%s", n_workers, len(links.shards), sid, self.settings.merge,
                        config.settings.sync_words, "" if resumed is None else
                        f", resumed from checkpoint {resumed.checkpoint} at epoch {resumed.epoch}")
            if corpus_file is not None:
                self._check_file(dispatcher, sid, config.corpus_file)
            start = self._session_start = time.monotonic()
            first = 0 if resumed is None else resumed.epoch
            job_id = 0 if resumed is None else resumed.first_job
            for epoch in range(first, epochs):
                if epoch not in self._begun:
                    self._begun.add(epoch)
                    for callback in callbacks:
                        callback.on_epoch_begin(model)
                if corpus_file is not None:
                    dispatcher.open_file_epoch(sid, epoch)
                    self._next_report = time.monotonic() + report_delay
                    self._finish_epoch(dispatcher, sid, epoch, time.monotonic(), total_examples, total_words,
                                       report_delay)
                    model.min_alpha_yet_reached = next_alpha(model.alpha, model.min_alpha, epoch + 1, epochs, 0.0)
                else:
                    skip = resumed if resumed is not None and epoch == resumed.epoch else None
                    job_id = self._train_epoch(dispatcher, sid, corpus_iterable, epoch, epochs, total_examples,
                                               total_words, job_id, report_delay, skip)
                if config.checkpoint is not None:
                    self._checkpoint(dispatcher, sid, last=epoch == epochs - 1)
                quality = self.board is not None and self.settings.tensorboard_quality
                if callbacks or quality:
                    self._download_weights(links, sid)
                if self.board is not None:
                    self._board_epoch(dispatcher, sid, epoch, quality)
                for callback in callbacks:
                    callback.on_epoch_end(model)
            self._download_weights(links, sid)
            final = protocol.Progress.from_wire(dispatcher.progress(sid, self._token, True))
            # every epoch's words, counted once (a resumed session starts with the checkpoint's counts)
            trained = sum(final.epoch(e).effective_words for e in range(epochs))
            raw = sum(final.epoch(e).raw_words for e in range(epochs))
            self._summarise(final, links, sid, config, start, trained, raw)
            return trained, raw
        except _Retry:
            raise
        except transport.CommunicationError as err:
            host, port, _broadcast, _key = transport.ns_settings(self.ns_conf)
            dispatcher._pyroTimeout = 2.0  # it may hang: do not wait long to close the session
            raise _Lost(f"lost the dispatcher during training ({type(err).__name__}: {err})", transport.ClusterError(
                f"lost the dispatcher during training ({type(err).__name__}: {err}); this train() call did not "
                f"finish and the model keeps the weights it had before it (or at the last epoch end, with "
                f"callbacks). Once a dispatcher runs again (python -m gensim_distw2v.dispatcher --ns-host {host} "
                f"--ns-port {port}), the workers rejoin it by themselves: call train() again"
                + ("" if self.settings.checkpoint_dir is None else
                   f" with resume_from={self.settings.checkpoint_dir!r} to go on from its last checkpoint"))) from None
        except transport.ClusterError as err:
            if "lost parameter shard" not in str(err):
                raise
            raise _Lost("lost a parameter shard", err) from None
        finally:
            if links is not None:
                links.close(sid)
            if sid is not None:
                try:
                    dispatcher.close(sid, self._token)
                except transport.PyroError as err:
                    logger.warning("could not close session %s on the dispatcher: %s", sid, err)
            transport.release(dispatcher)

    def _board_epoch(self, dispatcher, sid, epoch, quality):
        """TensorBoard at an epoch end: a point, and with ``quality`` the model's scores (the
        weights were just downloaded)."""
        progress = protocol.Progress.from_wire(dispatcher.progress(sid, self._token, True))
        words = self._board_point(progress, epoch + 1, 0.0)
        if quality:
            scores = evaluate(self.model.wv)
            self.board.quality(words, scores)
            logger.info("EPOCH %i: analogy accuracy %.4f, ws353 Spearman %.4f, simlex999 Spearman %.4f", epoch,
                        scores["analogy"], scores["ws353"], scores["simlex999"])

    def _board_point(self, progress, epoch, done):
        """A TensorBoard point (``done``: the share of ``epoch`` trained); returns the step (effective
        words trained in the run)."""
        model = self.model
        words = sum(counts.effective_words for counts in progress.epochs.values())
        share = min(1.0, (epoch + done) / max(1, model.epochs))
        alpha = model.alpha - (model.alpha - model.min_alpha) * share
        self.board.progress(progress, words, time.monotonic() - self._session_start, alpha,
                            bool(getattr(model, "compute_loss", False)))
        return words

    def _checkpoint(self, dispatcher, sid, last):
        """An epoch ended: ask for a checkpoint and wait until every shard has copied its rows
        (the run's last: until it is on disk), so that it holds exactly the epochs trained."""
        started = time.monotonic()
        sequence = self._awaiting = dispatcher.checkpoint(sid)
        while True:
            progress = protocol.Progress.from_wire(dispatcher.progress(sid, self._token))
            self._check_workers(progress)
            state = progress.checkpoints
            if state.failed >= sequence:
                logger.error("the checkpoint at the end of epoch %i failed (%s); training goes on, the last complete "
                             "one is %i", progress.flushed, state.error, state.committed)
                self._failed_reported = max(self._failed_reported, state.failed)
                break
            if (state.committed if last else state.taken) >= sequence:
                break
            if time.monotonic() - started > self.settings.cluster_timeout:
                logger.error("checkpoint %i at the end of epoch %i: not %s within %.0f s; training goes on (the last "
                             "complete checkpoint is %i)", sequence, progress.flushed,
                             "on disk" if last else "copied by every shard", self.settings.cluster_timeout,
                             state.committed)
                break
            time.sleep(0.01)
        self._awaiting = None  # from now on a failure of it (once copied) is reported as any other
        self._checkpoint_wait += time.monotonic() - started

    def _summarise(self, final, links, sid, config, start, trained, raw):
        """``self.stats`` and the closing log line of a session."""
        final.nodes = final.nodes or {}
        shards = self._shard_stats(links, sid, final.nodes)
        self.model.running_training_loss = float(final.loss)
        elapsed = time.monotonic() - start
        up, down = final.total("bytes_up"), final.total("bytes_down")
        checkpoints = final.checkpoints
        self.stats = {"seconds": elapsed, "merges": final.merges, "bytes_up": up, "bytes_down": down,
                      "damped_rows": sum(s["damped"] for s in shards.values()),
                      "exact_bytes_up": final.total("exact_bytes_up"),
                      "exact_bytes_down": final.total("exact_bytes_down"),
                      "merge_seconds": final.total("merge_seconds"),
                      "merge_cpu": {"workers": final.total("merge_cpu"),
                                    "shards": sum(s["merge_cpu"] for s in shards.values())},
                      "stall_seconds": final.total("stall_seconds"),
                      "shards": shards,
                      "kernel_cpu": final.total("kernel_cpu"),
                      "workers": {name: w.to_wire() for name, w in final.workers.items()},
                      "effective_words": trained, "raw_words": raw,
                      "sync_words": config.settings.sync_words, "damp_rows": config.damp_rows,
                      "hot_rows": config.hot_rows, "tree_hot_rows": config.tree_hot_rows,
                      "cold_every": config.settings.cold_every,
                      "checkpoints": None if checkpoints is None else checkpoints.to_wire(),
                      "call_seconds": time.monotonic() - self._call_start, "resumes": self._resumes,
                      "checkpoint_wait": self._checkpoint_wait,
                      "nodes": {name: dict(node.to_wire(), other_cpu=node.other_cpu)
                                for name, node in (final.nodes or {}).items()}}
        if raw and not trained:
            logger.warning("no word of the corpus is in the vocabulary (%i raw words, none trained): check that "
                           "train() gets the corpus build_vocab() saw, as lists of str tokens", raw)
        logger.info("cluster training: %i merges, %.1f MB up / %.1f MB down (%.1f / %.1f bytes per trained "
                    "word; epoch flushes %.1f / %.1f MB of them); CPU seconds: workers' kernels %.1f, their "
                    "merge rounds %.1f, the %i shards' merge calls %.1f; trainers waited %.1f s for merge rounds; "
                    "per worker, bytes per word it trained up/down: %s", final.merges, up / 1e6, down / 1e6,
                    up / max(1, trained), down / max(1, trained), self.stats["exact_bytes_up"] / 1e6,
                    self.stats["exact_bytes_down"] / 1e6, self.stats["kernel_cpu"],
                    self.stats["merge_cpu"]["workers"], len(shards), self.stats["merge_cpu"]["shards"],
                    self.stats["stall_seconds"],
                    ", ".join(f"{name.rsplit('.', 1)[-1]} {_per_word(w)}"
                              for name, w in sorted(final.workers.items())) or "-")
        for name, node in sorted((final.nodes or {}).items(), key=lambda item: (item[1].role, item[0])):
            logger.info("node %s", _node_line(name, node))
        if checkpoints is not None and checkpoints.count:
            logger.info("checkpoints: %i written, %.1f MB each, %.2f s each from order to commit (training went on "
                        "meanwhile); training waited %.2f s for them at epoch ends, the shards' merges %.2f s for "
                        "their copies", checkpoints.count, checkpoints.bytes / checkpoints.count / 1e6,
                        checkpoints.seconds / checkpoints.count, self._checkpoint_wait, checkpoints.copy_seconds)

    def _train_epoch(self, dispatcher, sid, corpus, epoch, epochs, total_examples, total_words, job_id,
                     report_delay, skip=None):
        """Put one epoch's jobs and wait until they are trained; returns the next job id. ``skip``
        (a :class:`gensim_distw2v.protocol.Resumed`): the jobs a checkpoint trained are not put again,
        and their words must be those it trained (else the corpus is another one)."""
        model = self.model
        jobs = iter_epoch_jobs(
            corpus, model.wv.key_to_index, batch_words=model.batch_words, cur_epoch=epoch, epochs=epochs,
            start_alpha=model.alpha, end_alpha=model.min_alpha, total_examples=total_examples,
            total_words=total_words, max_sentence_length=MAX_WORDS_IN_JOB)
        start = time.monotonic()
        self._next_report = start + report_delay
        batch = []
        skipped = SkippedJobs(skip)
        for job in jobs:
            if skipped.skips(job_id, job):
                job_id += 1
                continue
            batch.append(protocol.Job.of(job_id, epoch, job).to_wire())
            job_id += 1
            model.min_alpha_yet_reached = job.alpha
            if len(batch) >= JOBS_PER_CALL:
                self._put(dispatcher, sid, batch, epoch, start, total_examples, total_words, report_delay)
                batch = []
        skipped.finish()
        if batch:
            self._put(dispatcher, sid, batch, epoch, start, total_examples, total_words, report_delay)
        dispatcher.end_epoch(sid, epoch)
        if job_id == 0 and model.train_count == 0:
            logger.warning("train() called with an empty iterator (if not intended, be sure to provide a corpus "
                           "that offers restartable iteration = an iterable).")
        self._finish_epoch(dispatcher, sid, epoch, start, total_examples, total_words, report_delay)
        return job_id

    def _check_file(self, dispatcher, sid, spec):
        """Wait for every registered worker's verdict on the corpus file; raise if any does not see it."""
        deadline = time.monotonic() + self.settings.cluster_timeout
        while True:
            progress = protocol.Progress.from_wire(dispatcher.progress(sid, self._token))
            checks, quit_ = progress.file_checks, progress.quit
            workers = set(protocol.Status.from_wire(dispatcher.status()).workers)
            problems = {name: problem for name, problem in checks.items() if problem}
            if ((checks or quit_) and workers <= set(checks) | set(quit_)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self._check_workers(progress)  # the session failed on every worker (before its check, say)
        if problems:
            raise ValueError(
                f"corpus_file {spec.path}: {len(problems)} of {len(workers | set(checks))} workers do not see the "
                f"file this client sees ({spec.size} bytes) at that path: "
                + "; ".join(f"worker {name}: {problem}" for name, problem in sorted(problems.items()))
                + ". Every worker must read the same file at the same path (a shared filesystem, or the same "
                  "copy at that path on every node); nothing was trained")
        if not checks:
            raise transport.ClusterError(
                f"no worker checked the corpus file {spec.path} within {self.settings.cluster_timeout:.0f} s: "
                f"are the workers alive? (python -m gensim_distw2v.worker)")
        logger.info("corpus_file %s (%i bytes, %i ranges of %i bytes per epoch) is the same on all %i workers",
                    spec.path, spec.size, -(-spec.size // spec.range_bytes), spec.range_bytes,
                    len(checks))

    def _finish_epoch(self, dispatcher, sid, epoch, start, total_examples, total_words, report_delay):
        """Wait until every job of ``epoch`` is merged and flushed, reporting progress; ``(effective, raw)``."""
        model = self.model
        while True:
            progress = protocol.Progress.from_wire(dispatcher.progress(sid, self._token,
                                                                  time.monotonic() >= self._next_report))
            counts = progress.epoch(epoch)
            # done: every job merged, and every worker flushed what it held back
            if counts.done >= counts.put and progress.flushed is not None and progress.flushed >= epoch:
                break
            self._check_workers(progress)
            self._report(progress, epoch, start, total_examples, total_words, report_delay)
            time.sleep(0.05)
        elapsed = time.monotonic() - start
        raw, effective, examples = counts.raw_words, counts.effective_words, counts.examples
        model.running_training_loss = float(progress.loss)
        logger.info("EPOCH %i: training on %i raw words (%i effective words) took %.1fs, %.0f effective words/s",
                    epoch, raw, effective, elapsed, effective / max(elapsed, 1e-9))
        if total_examples and total_examples != examples:
            logger.warning("EPOCH %i: supplied example count (%i) did not equal expected count (%i)", epoch,
                           examples, total_examples)
        if total_words and total_words != raw:
            logger.warning("EPOCH %i: supplied raw word count (%i) did not equal expected count (%i)", epoch, raw,
                           total_words)
        return effective, raw

    def _put(self, dispatcher, sid, batch, epoch, start, total_examples, total_words, report_delay):
        """Queue ``batch`` (the dispatcher takes a call whole, waiting while its queue is full);
        progress is asked for only when a report is due or the queue stays full (workers gone?)."""
        while batch:
            taken = dispatcher.put_jobs(sid, batch)
            batch = batch[taken:]
            if batch or time.monotonic() >= self._next_report:
                progress = protocol.Progress.from_wire(dispatcher.progress(sid, self._token,
                                                                      time.monotonic() >= self._next_report))
                self._check_workers(progress)
                self._report(progress, epoch, start, total_examples, total_words, report_delay)

    def _check_workers(self, progress):
        state = progress.checkpoints
        if state is not None and state.failed > self._failed_reported and \
                (self._awaiting is None or state.failed < self._awaiting):
            # one the client did not wait for (a timed one, or an epoch end's that failed once copied)
            logger.error("checkpoint %i failed (%s); training goes on, the last complete one is %i", state.failed,
                         state.error, state.committed)
            self._failed_reported = state.failed
        if progress.lost_shards:
            host, port, _broadcast, _key = transport.ns_settings(self.ns_conf)
            raise transport.ClusterError(
                "lost parameter shard " + "; ".join(f"{name} ({reason})" for name, reason in
                                                      sorted(progress.lost_shards.items()))
                + f": it held part of the weights, so this train() call cannot finish; the model keeps the weights "
                  f"it had before it (or at the last epoch end, with callbacks). Restart the shard with: python -m "
                  f"gensim_distw2v.shard --ns-host {host} --ns-port {port}, then call train() again")
        if progress.poisoned:
            raise transport.ClusterError(
                "a worker sent a merge that would poison the model, so this train() call stops: "
                + "; ".join(f"worker {name}: {why}" for name, why in sorted(progress.poisoned.items()))
                + ". The model keeps the weights it had before this call (or at the last epoch end, with "
                  "callbacks). Find out what runs under that worker's name (its log, its host) before training again")
        gone, quit_ = progress.no_workers_for, progress.quit
        if gone is not None and quit_:
            raise RuntimeError(
                "training failed on every worker of the session, so nothing trains it: "
                + "; ".join(f"worker {name}: {reason}" for name, reason in sorted(quit_.items()))
                + ". The workers' logs have the details; they keep serving other sessions")
        if gone is not None and gone > self.settings.cluster_timeout:
            raise RuntimeError(
                f"all workers lost: none has been registered with the dispatcher for {gone:.0f} s; the jobs not "
                f"yet merged were not trained. Start workers with: python -m gensim_distw2v.worker")

    def _report(self, progress, epoch, start, total_examples, total_words, report_delay):
        now = time.monotonic()
        if now < self._next_report:
            return
        self._next_report = now + report_delay
        elapsed = max(now - start, 1e-9)
        counts = progress.epoch(epoch)
        share = counts.examples / total_examples if total_examples else counts.raw_words / max(1, total_words or 0)
        done = "%.2f%% %s" % (100.0 * share, "examples" if total_examples else "words")
        session_elapsed = max(now - self._session_start, 1e-9)  # workers' words count over the session
        per_worker = ", ".join(f"{name.rsplit('.', 1)[-1]} {w.words / session_elapsed:.0f} w/s {_per_word(w)}"
                               for name, w in sorted(progress.workers.items()))
        up, down = progress.total("bytes_up") / 1e6, progress.total("bytes_down") / 1e6
        logger.info("EPOCH %i - PROGRESS: at %s, %.0f words/s, in_qsize %i, out_qsize %i; %i workers (raw words/s, "
                    "bytes per word up/down: %s); %i merges, %.1f MB up, %.1f MB down; nodes (CPU, RSS): %s", epoch,
                    done, counts.effective_words / elapsed, progress.queued, progress.in_flight, len(progress.workers),
                    per_worker or "-", progress.merges, up, down,
                    ", ".join(_node_brief(name, node) for name, node in sorted((progress.nodes or {}).items())) or "-")
        if self.board is not None:
            self._board_point(progress, epoch, share)

