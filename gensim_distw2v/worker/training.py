"""A session's work on a worker: the replica, the trainer threads, the job fetching, the merge thread.

:class:`_Training` joins a session (config and static arrays from the dispatcher, the weights from
the session's shards), runs T trainer threads on jobs pulled from the dispatcher with a small
prefetch (or on byte ranges of a shared corpus file, read and encoded here:
:mod:`gensim_distw2v.io.corpusfile`), and a merger thread that decides when a merge round is due
(the rounds themselves: :mod:`gensim_distw2v.worker.merger`).
"""
import logging
import queue
import threading
import time

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.config.choices import SYNC
from gensim_distw2v.core.kernel import MAX_WORDS_IN_JOB, JobTrainer
from gensim_distw2v.io.corpusfile import check_files, vocab_lookup
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.core.merge import wire_row_bytes
from gensim_distw2v.core.replica import Replica
from gensim_distw2v.core.schedule import FEW_WORKERS, default_cold_output_down, default_cold_output_every
from gensim_distw2v.io.links import ShardLinks
from gensim_distw2v.protocol import tables
from gensim_distw2v.protocol.transfers import fetch_rows, row_ranges
from gensim_distw2v.worker.held import RangeReads, held_job, open_ranges, train_range, wants_held_rows
from gensim_distw2v.worker.merger import LOOK_AGAIN, MergeRounds, RoundSpec, SessionLost
from gensim_distw2v.worker.state import WorkState

logger = logging.getLogger(__name__)

__all__ = ["SessionLost"]

FALLBACK_BYTES = 64 * 1024 * 1024  # the most a routine part may take in float32 (half a message's limit)
# bulk transfers (the weights downloaded at a join, epoch flushes) move in parts of part_bytes / 8
# (2 MB by default): every worker makes them at about the same moment, so a shard holds K parts (and
# their serialised copies) at once; they are rare, so the extra calls cost nothing per word
BULK_PART_DIVISOR = 8
# seconds a call for jobs waits at the dispatcher while there are none (jobs put wake it)
FETCH_WAIT = 0.5
# sync="local": the interval of a worker that merges only at epoch ends (no job is ever cut)
LOCAL_INTERVAL = 2 ** 62


class _Training:
    """One session's work on this worker: the replica, the trainer threads and the fetch loop; its
    merge rounds are its :class:`~gensim_distw2v.worker.merger.MergeRounds`, and what they share
    with the trainers its :class:`~gensim_distw2v.worker.state.WorkState`.

    Parameters
    ----------
    worker : gensim_distw2v.worker.service.Worker
        The worker.
    sid : str
        The session.
    proxy : gensim_distw2v.io.transport.Proxy or None
        The dispatcher (the worker sets it before :meth:`run`).
    """

    def __init__(self, worker, sid, proxy):
        self.worker, self.sid, self.proxy = worker, sid, proxy
        self.state = WorkState(sid)
        self.stop = self.state.stop  # (the worker's check_alive and its session's end read it)
        self.merger = None  # once joined
        self.heard = time.monotonic()  # when this worker heard of the session (the rounds' reports count from it)
        self.file = None  # corpus_file training: the session's file (protocol.CorpusFileSpec)
        self.compute_loss = False

    def run(self):
        """Join the session, train it until it ends here (ended, failed, replaced), leave it."""
        self.worker.meter.mark(self.sid)
        self._began_cpu = time.process_time()  # (setup_cpu: until the trainers start, in _run)
        state = self.state
        joined = self.proxy.call("join", name=self.worker.name, secret=self.worker.secret, session=self.sid)
        config, state.rank, self.shards, state.token = joined.config, joined.rank, joined.shards, joined.token
        self.layout = ShardLayout(len(self.shards))
        # a shard that does not answer raises ShardLost, naming it
        self.links = ShardLinks(self.shards, self.worker.hmac_key, self.worker.ns_conf, state.token,
                                bulk=tables.SHARD.ops(cadence="word", bulk=True))
        try:
            self._run(config)
        finally:
            self.links.close()

    def _run(self, config):
        state = self.state
        self.file = config.corpus_file
        if self.file is not None:
            problem = check_files(self.file.parts(), self.worker.corpus_dirs)
            self.proxy.call("file_check", name=self.worker.name, secret=self.worker.secret, session=self.sid,
                            problem=problem)
            if problem:
                raise RuntimeError(f"cannot train from the corpus file of session {self.sid}: {problem}")
        self.params, settings = config.params, config.settings
        self.compute_loss = config.compute_loss
        # sync="local": no rounds within an epoch (jobs are not cut either); "bsp": rounds in turn
        state.mode = SYNC[settings.sync]
        state.sync_words = settings.sync_words if state.mode.within_epoch else LOCAL_INTERVAL
        self.part_bytes = settings.part_bytes
        self.bulk_bytes = max(1024, self.part_bytes // BULK_PART_DIVISOR)
        hot_rows = config.hot_rows
        vocab, size = self.params.vocab_size, self.params.vector_size
        start = time.monotonic()
        arrays = {name: (self._download_weights if name in protocol.WEIGHTS else self._download)(name, spec)
                  for name, spec in config.arrays.items()}
        # syn0's rows taken where the trainers name them (their jobs' rows; not bsp): core/merge.py, Replica
        self.replica = Replica({n: arrays.pop(n) for n in protocol.WEIGHTS if n in arrays},
                               threads=self.worker.merge_threads,
                               listed={"syn0": max(0, hot_rows)} if not state.mode.in_turn else None)
        if not self.params.sample:
            arrays.pop("sample_int", None)
        if self.file is not None:
            self.vocab = vocab_lookup(arrays.pop("vocab_bytes"), arrays.pop("vocab_offsets"))
            if len(self.vocab) != vocab:
                raise ValueError(f"the session's vocabulary has {len(self.vocab)} distinct words, not {vocab}")
        # per row, how many of the jobs this worker holds (queued or in training) use it: a routine merge
        # round asks the shards for the values of these rows only (bsp: every row, as how many jobs a worker
        # holds is a matter of timing). Skip-gram's ranges are read when fetched and their rows wanted from
        # then on, as a streamed job's (taking in every row it lacked instead cost it 2 analogy points at K=8
        # and 2.9 times the bytes down; its range's rows only once it trained, 12); CBOW's are read by their
        # trainers and wanted while they train (from the fetch on: +2.4-3.6 analogy points but -0.03 to -0.05
        # on the truth list at K=8; while it trains: +6.4 and +0.005; docs/schedule.rst, "Skip-gram at half
        # the share")
        state.want = np.zeros(vocab, dtype=np.int32) if not state.mode.in_turn else None
        state.want_held = wants_held_rows(self.file, self.params)
        self.trainer = JobTrainer(**self.params.kernel(), **self.replica.replica, **arrays)
        spec = self._round_spec(config)
        self.links.open_channels()  # (joining's cost, not the first round's)
        logger.info("joined session %s as rank %i: %i x %i model fetched from %i shards in %.1f s; training with "
                    "%i threads, merging every %i words (sync=%s)", self.sid, state.rank, vocab, size,
                    len(self.shards), time.monotonic() - start, self.worker.threads, settings.sync_words,
                    settings.sync)
        if state.mode.in_turn and self.worker.threads > 1:
            logger.warning("sync='bsp' with %i trainer threads: rounds are taken in turn, but threads share the "
                           "replica as they run, so two runs differ; start workers with --threads 1 for "
                           "bit-identical runs", self.worker.threads)
        threads = [threading.Thread(target=self._train, args=(t, self._rng(config, t)), daemon=True,
                                    name=f"trainer-{t}") for t in range(self.worker.threads)]
        # a cost per session and worker, not per word
        self.merger = MergeRounds(state, self.worker, self.links, self.replica, spec,
                                  setup_cpu=time.process_time() - self._began_cpu, reported=self.heard)
        threads.append(threading.Thread(target=self.merger.loop, daemon=True, name="merger"))
        for thread in threads:
            thread.start()
        try:
            self._fetch_loop()
        finally:
            self.stop.set()
            with state.lock:
                state.lock.notify_all()
            for thread in threads:
                thread.join()
            logger.info("left session %s: trained %i words in %.1f s of kernel CPU (%.0f words/s per thread); "
                        "merge rounds took %.1f s of CPU; trainers waited %.1f s for merge rounds", self.sid,
                        state.trained_words, state.train_cpu, state.trained_words / max(state.train_cpu, 1e-9),
                        self.merger.merge_cpu, state.stalled)

    def _round_spec(self, config):
        """What this session's merge rounds are made of (:class:`~gensim_distw2v.worker.merger.RoundSpec`)."""
        settings, params, mode = config.settings, self.params, self.state.mode
        vocab, size, width = params.vocab_size, params.vector_size, len(self.replica.replica)
        # the interval asked for; sync_words (the interval trained to) shortened from it as the rounds' lag grows:
        # from eight workers on (fewer workers' intervals were chosen through the cluster, their lag included:
        # docs/schedule.rst, "The lag"), not under bsp (no lag) nor local (no rounds)
        lag_limit = None if config.workers < FEW_WORKERS or not mode.overlapped else settings.lag_limit
        # routine rounds move rows in merge_dtype (int8: a byte a value, and a scale): parts of part_bytes on
        # the wire, most often one message to each shard a round, and of at most FALLBACK_BYTES should a part
        # go in float32 (values float16 cannot hold); epoch flushes move float32
        wire, worst = (wire_row_bytes(codec, size) * width for codec in (settings.merge_dtype, "float32"))
        return RoundSpec(
            layout=self.layout, vector_size=size, vocab_size=vocab,
            ranges=row_ranges(vocab, wire, min(self.part_bytes, FALLBACK_BYTES * wire // worst)),
            flush_ranges=row_ranges(vocab, 4 * size * width, self.bulk_bytes),
            sync_target=self.state.sync_words, lag_limit=lag_limit, hold_back=settings.hold_back,
            merge_dtype=settings.merge_dtype, round_pieces=settings.round_pieces,
            rounds_in_flight=settings.rounds_in_flight, cold_every=settings.cold_every,
            cold_output_every=settings.cold_output_every or default_cold_output_every(params.sg),
            # syn1neg's hot rows (CBOW: the negatives' rows too; schedule.output_hot_rows), which rare ones come down
            cold_output_down=settings.cold_output_down or default_cold_output_down(params.sg),
            hot_rows=config.hot_rows, output_hot_rows=max(config.hot_rows, config.output_hot_rows),
            # hs: syn1's hot rows (tree nodes, busiest first); 0: not known, syn1 moves every row every round
            tree_hot_rows=config.tree_hot_rows if "syn1" in config.arrays and config.tree_hot_rows else -1)

    def _rng(self, config, thread):
        """Rank 0's first thread continues the client's random stream (so 1 worker x 1 thread
        reproduces gensim exactly); every other thread gets a stream of its own."""
        rng = np.random.RandomState(config.params.seed)
        if self.state.rank == 0 and thread == 0:
            rng.set_state(config.rng_state.state())
        else:
            rng.seed([config.params.seed & 0xFFFFFFFF, self.state.rank, thread, 0x5EED])
        return rng

    def _download(self, name, spec):
        """A static array from the dispatcher, in parts."""
        def fetch(lo, hi):
            self.worker.check_alive(self.state)
            return self.proxy.call("download", session=self.sid, name=name, lo=lo, hi=hi, token=self.state.token)
        return fetch_rows(np.zeros(spec["shape"], dtype=spec["dtype"]), self.part_bytes, fetch, f"download of {name}")

    def _download_weights(self, name, spec):
        """A trained matrix, each shard's rows from that shard (all at once); they become this
        worker's view of them for the merges."""
        target = np.zeros(spec["shape"], dtype=np.float32)

        def fetch(shard):
            def part(lo, hi):
                self.worker.check_alive(self.state)
                return self.links.call(shard, "download", protocol.ShardDownload(
                    session=self.sid, name=name, lo=lo, hi=hi, rank=self.state.rank, token=self.state.token))
            fetch_rows(self.layout.rows_of(target, shard), self.bulk_bytes, part, f"download of {name}")
        self.links.each(fetch)
        return target

    def _train(self, thread, rng):
        """A trainer thread: train the jobs and ranges of the queue (CBOW's ranges read here) until stopped."""
        state = self.state
        reads = RangeReads(self.file, self.file and self.vocab, state.want is not None, self.worker.corpus_dirs)
        try:
            while not state.stop.is_set():
                if not state.wait_for_round():
                    continue
                try:
                    job, data, rows = state.jobs.get(timeout=0.2)  # counted as held until task_done(), below
                except queue.Empty:
                    continue
                if not self._train_one(thread, rng, reads, job, data, rows):
                    return
        except Exception as err:  # noqa: BLE001 - outside a job (a job's own are _train_one's): the session ends
            logger.exception("trainer thread %i failed", thread)
            state.fail(err)
        finally:
            reads.close()

    def _train_one(self, thread, rng, reads, job, data, rows):
        """Train one job of the queue; False if it failed (the session ends)."""
        state = self.state
        cpu = time.thread_time()
        try:
            data, rows = reads.read(job, data, rows)
            with state.lock:  # the fetch loop tops the queue up once it runs low
                if rows is not None and not state.want_held:
                    state.want[rows] += 1
                state.lock.notify_all()
            if data is not None:
                effective, loss, raw, examples, untrained = train_range(self._train_pieces, job, data, rng)
                entry, epoch = [job.id, effective, raw, examples], job.epoch
                if untrained:  # raw words no chunk counted: a range of empty or unknown-word lines
                    with state.lock:
                        state.words_since_merge += untrained
                        state.lock.notify_all()
            else:
                effective, loss = self._train_pieces(job.indices, job.offsets, job.raw_words, job.alpha, rng)
                raw, entry, epoch = job.raw_words, [job.id, effective], job.epoch
        except Exception as err:  # noqa: BLE001 - reported by the fetch loop, which ends the session
            logger.exception("trainer thread %i failed on a job", thread)
            state.fail(err)
            return False
        finally:
            cpu = time.thread_time() - cpu
            with state.lock:
                state.train_cpu += cpu
                if rows is not None:
                    state.want[rows] -= 1
                    self.replica.touched("syn0", rows)  # after its writes: the next round takes them
        with state.lock:
            state.done.append(entry)  # its words counted towards the merge interval as trained
            state.done_epoch = max(state.done_epoch, epoch)
            state.trained_words += raw
            state.loss += loss
            state.jobs.task_done()  # (under the lock: a merge round sees the job done, or held)
            state.lock.notify_all()
        return True

    def _held(self, msg, reader):
        """A fetched job as the queue holds it, ``(job, data, rows)`` (:func:`~gensim_distw2v.worker.held.held_job`;
        ``reader``: the fetch loop's, to read a range now): its rows (None without
        :attr:`WorkState.want <gensim_distw2v.worker.state.WorkState>`, or unread) are wanted by the rounds from now
        on (``want_held``) or once it trains (:meth:`_train_one`)."""
        state = self.state
        job, data, indices, cpu = held_job(msg, self.file, self.params.vocab_size, reader)
        rows = None if state.want is None or indices is None else np.unique(indices)
        with state.lock:
            state.train_cpu += cpu  # (reading was the trainers' once: counted alike)
            if rows is not None and state.want_held:
                state.want[rows] += 1
        return job, data, rows

    def _train_pieces(self, indices, offsets, raw, alpha, rng):
        """Train a job, in pieces of whole sentences cut where the merge interval runs out.

        A job (about ``batch_words`` words) may be longer than ``sync_words`` (2.2 k words at K=8):
        trained in one go, it would stretch the interval to the job's length. Each piece waits for a
        merge round while the interval is used up, then *claims* its share of the job's ``raw``
        words of the interval before it is trained, so that T trainer threads share one interval: a
        round carries ``sync_words`` words (within a tenth, and a sentence per thread) whatever T.
        The claim counts towards the interval at once (``sync="bsp"``: once trained, as a round
        there must carry what was trained). A job that fits the room left, or overruns it by at most
        a tenth of the interval, is trained in one call, as gensim would: cutting a job changes the
        order of its random draws (gensim draws the job's down-sampling before its windows), so one
        worker at its default interval (1 M words) reproduces gensim's exact numbers on a corpus of
        any length. Returns ``(effective words, loss)``; a piece's updates are partly in the next
        round.
        """
        state = self.state
        total, n_sent = len(indices), len(offsets) - 1
        effective, loss, counted, a = 0, 0.0, 0, 0
        slack, on_claim = state.sync_words // 10, not state.mode.in_turn
        while True:
            while not state.wait_for_round():
                if state.stop.is_set():  # the session ends: the rest of the job is not trained here
                    return effective, loss
            with state.lock:
                room = state.room()
                if a == 0 and (raw <= room + slack or total == 0):
                    b = n_sent
                else:  # the first sentence boundary past `room` raw words (in-vocabulary words scaled to raw)
                    room = max(1, room)  # asp and local never wait: pieces of at least a sentence
                    reach = int(offsets[a]) + -(-room * total // raw)
                    b = min(n_sent, max(a + 1, int(np.searchsorted(offsets, reach, side="left"))))
                share = (raw * int(offsets[b]) // total if b < n_sent else raw) - counted
                counted += share
                if on_claim:
                    state.words_since_merge += share
                    state.lock.notify_all()
                else:
                    state.claimed += share
            try:
                if b > a:
                    lo, hi = int(offsets[a]), int(offsets[b])
                    words, piece_loss = self.trainer.train_job(indices[lo:hi], offsets[a:b + 1] - lo, alpha, rng,
                                                               self.compute_loss)
                    effective += words
                    loss += piece_loss
            finally:
                if not on_claim:
                    with state.lock:
                        state.claimed -= share
                        state.words_since_merge += share
                        state.lock.notify_all()
            a = b
            if a >= n_sent:
                return effective, loss

    def _fetch_loop(self):
        """Keep the local queue topped up (the merger thread merges meanwhile), until the session
        ends: once it is down to half of ``prefetch`` jobs, fetch up to ``prefetch`` (fewer calls
        than one per job). With none to be had, the call is a long poll (:data:`FETCH_WAIT`): the
        dispatcher answers once jobs come, or at once with an epoch drained that this worker has not
        been told of (so it flushes without delay), never a call per few milliseconds."""
        state = self.state
        prefetch, told = self._prefetch(), -1  # told: the last drained epoch the dispatcher told of
        # skip-gram's ranges are read here, when fetched; CBOW's by their trainers (RangeReads)
        reader = open_ranges(self.file, self.vocab, self.worker.corpus_dirs) if self.file and state.want_held else None
        try:
            self._fetch_jobs(prefetch, told, reader)
        finally:
            if reader is not None:
                reader.close()
        if state.error is not None:
            raise state.error

    def _fetch_jobs(self, prefetch, told, reader):
        """:meth:`_fetch_loop`'s loop (``reader``: the corpus file's, which reads each range as it comes)."""
        state = self.state
        while not state.stop.is_set():
            self.worker.check_alive(self.state)
            if state.error is not None:
                raise state.error
            if state.jobs.qsize() > prefetch // 2:
                with state.lock:
                    state.lock.wait(LOOK_AGAIN)
                continue
            reply = self.proxy.call("get_jobs", name=self.worker.name, secret=self.worker.secret, session=self.sid,
                                    max_jobs=prefetch - state.jobs.qsize(), wait=FETCH_WAIT, drained=told)
            for msg in reply.jobs:
                state.jobs.put(self._held(msg, reader))
            with state.lock:
                state.drained = reply.drained if not reply.jobs else None
                state.lock.notify_all()
            if reply.drained is not None and not reply.jobs:
                # told only with no job: the epoch's last jobs come with its drained mark, and a worker that
                # took it as told would then wait out FETCH_WAIT for the next epoch (which waits for its
                # flush) before it learned, with no job left, that it must flush: 0.5 s an epoch
                told = max(told, reply.drained)

    def _prefetch(self):
        """Jobs to keep queued: four per trainer thread (jobs of ``batch_words``), but of a corpus
        file's ranges longer than that (a long merge interval's ranges) one per thread and one more,
        so that the ranges are shared among the workers as they go, not dealt out at the start."""
        threads = self.worker.threads
        if self.file is not None and self.file.size:
            range_words = self.file.range_bytes * self.file.total_words / self.file.size
            if range_words > 2 * MAX_WORDS_IN_JOB:
                return threads + 1
        return 4 * threads

    def metrics(self):
        """This worker's :class:`gensim_distw2v.protocol.NodeMetrics` in the session so far."""
        if self.merger is not None:
            return self.merger.metrics()
        return self.worker.meter.sample(self.state.trained_words, self.state.kernel_cpu(), 0.0)
