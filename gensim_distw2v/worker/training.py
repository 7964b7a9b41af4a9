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
from gensim_distw2v.worker.merger import LOOK_AGAIN, MergeRounds, SessionLost

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


class _Training(MergeRounds):
    """One session's work on this worker: the replica, the trainer threads, the merges."""

    def __init__(self, worker, sid, proxy):
        self.worker, self.sid, self.proxy = worker, sid, proxy
        self.stop = threading.Event()
        self.jobs = queue.Queue()
        self.lock = threading.Condition()
        self.done = []  # [job id, effective words(, raw words, examples)] trained since the last merge round
        self.done_epoch = -1  # the latest epoch of those jobs
        self.words_since_merge = 0  # raw words trained since the merge round began
        self.claimed = 0  # sync="bsp": raw words claimed by pieces in training (counted once trained)
        self.loss = 0.0
        self.merge_seconds = 0.0
        self.train_cpu = self.merge_cpu = 0.0  # CPU seconds of the trainer threads' kernel calls, of merge rounds
        self.flush_cpu = 0.0  # of merge_cpu, the epoch flushes'
        self.routine_nogil_cpu = self.take_cpu = 0.0  # of merge_cpu: the routine rounds' compiled calls' (no GIL), taking
        self.setup_cpu = 0.0  # process CPU from the session's start here to its training: join, downloads, replica
        self.stalled = 0.0  # seconds trainer threads waited for a merge round (the staleness bound)
        self.trained_words = 0
        self.error = None
        self.drained = None  # the epoch the dispatcher says is fully handed out, once our queue is empty
        self.flushed = -1  # the last epoch this worker flushed (sent everything, exactly)
        self.pending, self.reported = None, time.monotonic()  # merge rounds not reported yet; the last report

    def run(self):
        self.worker.meter.mark(self.sid)
        self._began_cpu = time.process_time()  # (setup_cpu: until the trainers start, in _run)
        joined = self.proxy.call("join", name=self.worker.name, secret=self.worker.secret, session=self.sid)
        config, self.rank, self.shards, self.token = joined.config, joined.rank, joined.shards, joined.token
        self.layout = ShardLayout(len(self.shards))
        # a shard that does not answer raises ShardLost, naming it
        self.links = ShardLinks(self.shards, self.worker.hmac_key, self.worker.ns_conf, self.token,
                                bulk=tables.SHARD.ops(cadence="word", bulk=True))
        try:
            self._run(config)
        finally:
            self.links.close()

    def _run(self, config):
        self.file = config.corpus_file
        if self.file is not None:
            problem = check_files(self.file.parts(), self.worker.corpus_dirs)
            self.proxy.call("file_check", name=self.worker.name, secret=self.worker.secret, session=self.sid, problem=problem)
            if problem:
                raise RuntimeError(f"cannot train from the corpus file of session {self.sid}: {problem}")
        self.params, settings = config.params, config.settings
        self.sync_words, self.compute_loss = settings.sync_words, config.compute_loss
        # sync="local": no rounds within an epoch (jobs are not cut either); "bsp": rounds in turn
        self.sync, self.mode, self.turn = settings.sync, SYNC[settings.sync], [0, 0]
        if not self.mode.within_epoch:
            self.sync_words = LOCAL_INTERVAL
        self.hold_back, self.part_bytes, self.round_pieces = settings.hold_back, settings.part_bytes, settings.round_pieces
        self.rounds_in_flight = settings.rounds_in_flight
        # the interval asked for; sync_words (the interval trained to) shortened from it as the rounds' lag grows:
        # from eight workers on (fewer workers' intervals were chosen through the cluster, their lag included:
        # docs/schedule.rst, "The lag"), not under bsp (no lag) nor local (no rounds)
        self.sync_target, self.lag_limit = self.sync_words, settings.lag_limit
        if config.workers < FEW_WORKERS or not self.mode.overlapped:
            self.lag_limit = None
        self.bulk_bytes = max(1024, self.part_bytes // BULK_PART_DIVISOR)
        self.hot_rows, self.cold_every, self.rounds = config.hot_rows, settings.cold_every, 0
        self.cold_output_every = settings.cold_output_every or default_cold_output_every(self.params.sg)
        # syn1neg's hot rows (CBOW: the negatives' rows too; schedule.output_hot_rows), and which rare ones come down
        self.output_hot_rows = max(self.hot_rows, config.output_hot_rows)
        self.cold_output_down = settings.cold_output_down or default_cold_output_down(self.params.sg)
        # hs: syn1's hot rows (tree nodes, busiest first); 0: not known, syn1 moves every row every round
        self.tree_hot_rows = config.tree_hot_rows if "syn1" in config.arrays and config.tree_hot_rows else -1
        self.merge_dtype = settings.merge_dtype
        vocab, size = self.params.vocab_size, self.params.vector_size
        start = time.monotonic()
        arrays = {name: (self._download_weights if name in protocol.WEIGHTS else self._download)(name, spec)
                  for name, spec in config.arrays.items()}
        # syn0's rows taken where the trainers name them (their jobs' rows; not bsp): core/merge.py, Replica
        self.replica = Replica({n: arrays.pop(n) for n in protocol.WEIGHTS if n in arrays},
                               threads=self.worker.merge_threads,
                               listed={"syn0": max(0, self.hot_rows)} if not self.mode.in_turn else None)
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
        self.want = np.zeros(vocab, dtype=np.int32) if not self.mode.in_turn else None
        self.want_held = wants_held_rows(self.file, self.params)
        self.trainer = JobTrainer(**self.params.kernel(), **self.replica.replica, **arrays)
        # routine rounds move rows in merge_dtype (int8: a byte a value, and a scale): parts of part_bytes on
        # the wire, most often one message to each shard a round, and of at most FALLBACK_BYTES should a part
        # go in float32 (values float16 cannot hold); epoch flushes move float32
        wire, worst = (wire_row_bytes(codec, size) * len(self.replica.replica) for codec in (self.merge_dtype, "float32"))
        self.ranges = row_ranges(vocab, wire, min(self.part_bytes, FALLBACK_BYTES * wire // worst))
        self.flush_ranges = row_ranges(vocab, 4 * size * len(self.replica.replica), self.bulk_bytes)
        self.links.open_channels()  # (joining's cost, not the first round's)
        logger.info("joined session %s as rank %i: %i x %i model fetched from %i shards in %.1f s; training with "
                    "%i threads, merging every %i words (sync=%s)", self.sid, self.rank, vocab, size, len(self.shards),
                    time.monotonic() - start, self.worker.threads, settings.sync_words, self.sync)
        if self.mode.in_turn and self.worker.threads > 1:
            logger.warning("sync='bsp' with %i trainer threads: rounds are taken in turn, but threads share the "
                           "replica as they run, so two runs differ; start workers with --threads 1 for "
                           "bit-identical runs", self.worker.threads)
        threads = [threading.Thread(target=self._train, args=(t, self._rng(config, t)), daemon=True,
                                    name=f"trainer-{t}") for t in range(self.worker.threads)]
        threads.append(threading.Thread(target=self._merge_loop, daemon=True, name="merger"))
        self.setup_cpu = time.process_time() - self._began_cpu  # a cost per session and worker, not per word
        for thread in threads:
            thread.start()
        try:
            self._fetch_loop()
        finally:
            self.stop.set()
            with self.lock:
                self.lock.notify_all()
            for thread in threads:
                thread.join()
            logger.info("left session %s: trained %i words in %.1f s of kernel CPU (%.0f words/s per thread); "
                        "merge rounds took %.1f s of CPU; trainers waited %.1f s for merge rounds", self.sid,
                        self.trained_words, self.train_cpu, self.trained_words / max(self.train_cpu, 1e-9),
                        self.merge_cpu, self.stalled)

    def _rng(self, config, thread):
        """Rank 0's first thread continues the client's random stream (so 1 worker x 1 thread
        reproduces gensim exactly); every other thread gets a stream of its own."""
        rng = np.random.RandomState(config.params.seed)
        if self.rank == 0 and thread == 0:
            rng.set_state(config.rng_state.state())
        else:
            rng.seed([config.params.seed & 0xFFFFFFFF, self.rank, thread, 0x5EED])
        return rng

    def _download(self, name, spec):
        """A static array from the dispatcher, in parts."""
        def fetch(lo, hi):
            self.worker.check_alive(self)
            return self.proxy.call("download", session=self.sid, name=name, lo=lo, hi=hi, token=self.token)
        return fetch_rows(np.zeros(spec["shape"], dtype=spec["dtype"]), self.part_bytes, fetch, f"download of {name}")

    def _download_weights(self, name, spec):
        """A trained matrix, each shard's rows from that shard (all at once); they become this
        worker's view of them for the merges."""
        target = np.zeros(spec["shape"], dtype=np.float32)

        def fetch(shard):
            def part(lo, hi):
                self.worker.check_alive(self)
                return self.links.call(shard, "download", protocol.ShardDownload(
                    session=self.sid, name=name, lo=lo, hi=hi, rank=self.rank, token=self.token))
            fetch_rows(self.layout.rows_of(target, shard), self.bulk_bytes, part, f"download of {name}")
        self.links.each(fetch)
        return target

    def _train(self, thread, rng):
        """A trainer thread: train the jobs and ranges of the queue (CBOW's ranges read here) until stopped."""
        reads = RangeReads(self.file, self.file and self.vocab, self.want is not None, self.worker.corpus_dirs)
        try:
            while not self.stop.is_set():
                if not self._wait_for_round():
                    continue
                try:
                    job, data, rows = self.jobs.get(timeout=0.2)  # counted as held until task_done(), below
                except queue.Empty:
                    continue
                if not self._train_one(thread, rng, reads, job, data, rows):
                    return
        except Exception as err:  # noqa: BLE001 - outside a job (a job's own are _train_one's): the session ends
            logger.exception("trainer thread %i failed", thread)
            self.error = err
            self.stop.set()
        finally:
            reads.close()

    def _train_one(self, thread, rng, reads, job, data, rows):
        """Train one job of the queue; False if it failed (the session ends)."""
        cpu = time.thread_time()
        try:
            data, rows = reads.read(job, data, rows)
            with self.lock:  # the fetch loop tops the queue up once it runs low
                if rows is not None and not self.want_held:
                    self.want[rows] += 1
                self.lock.notify_all()
            if data is not None:
                effective, loss, raw, examples, untrained = train_range(self._train_pieces, job, data, rng)
                entry, epoch = [job.id, effective, raw, examples], job.epoch
                if untrained:  # raw words no chunk counted: a range of empty or unknown-word lines
                    with self.lock:
                        self.words_since_merge += untrained
                        self.lock.notify_all()
            else:
                effective, loss = self._train_pieces(job.indices, job.offsets, job.raw_words, job.alpha, rng)
                raw, entry, epoch = job.raw_words, [job.id, effective], job.epoch
        except Exception as err:  # noqa: BLE001 - reported by the fetch loop, which ends the session
            logger.exception("trainer thread %i failed on a job", thread)
            self.error = err
            self.stop.set()
            return False
        finally:
            cpu = time.thread_time() - cpu
            with self.lock:
                self.train_cpu += cpu
                if rows is not None:
                    self.want[rows] -= 1
                    self.replica.touched("syn0", rows)  # after its writes: the next round takes them
        with self.lock:
            self.done.append(entry)  # its words counted towards the merge interval as trained
            self.done_epoch = max(self.done_epoch, epoch)
            self.trained_words += raw
            self.loss += loss
            self.jobs.task_done()  # (under the lock: a merge round sees the job done, or held)
            self.lock.notify_all()
        return True

    def _held(self, msg, reader):
        """A fetched job as the queue holds it, ``(job, data, rows)`` (:func:`~gensim_distw2v.worker.held.held_job`;
        ``reader``: the fetch loop's, to read a range now): its rows (None without :attr:`want`, or unread) are
        wanted by the rounds from now on (:attr:`want_held`) or once it trains (:meth:`_train_one`)."""
        job, data, indices, cpu = held_job(msg, self.file, self.params.vocab_size, reader)
        rows = None if self.want is None or indices is None else np.unique(indices)
        with self.lock:
            self.train_cpu += cpu  # (reading was the trainers' once: counted alike)
            if rows is not None and self.want_held:
                self.want[rows] += 1
        return job, data, rows

    def _wait_for_round(self):
        """Bounded staleness: once ``sync_words`` words are trained since the last merge round
        began (``bsp``: ended), wait for the next round to begin (to end); otherwise slow merges
        would stretch the real merge interval, and summed deltas blow up beyond it (``asp`` and
        ``local`` never wait). True when training may go on; False after waiting a while (the
        caller checks ``stop`` and calls again)."""
        with self.lock:
            if self._room() > 0 or not self.mode.bounded:
                return True
            waited = time.perf_counter()
            self.lock.wait(0.05)
            self.stalled += time.perf_counter() - waited
            return self._room() > 0

    def _room(self):
        """Raw words left in this interval for a new piece: ``sync_words`` less the words trained since
        the round began and those claimed by pieces in training (the lock held)."""
        return self.sync_words - self.words_since_merge - self.claimed

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
        total, n_sent = len(indices), len(offsets) - 1
        effective, loss, counted, a = 0, 0.0, 0, 0
        slack, on_claim = self.sync_words // 10, not self.mode.in_turn
        while True:
            while not self._wait_for_round():
                if self.stop.is_set():  # the session ends: the rest of the job is not trained here
                    return effective, loss
            with self.lock:
                room = self._room()
                if a == 0 and (raw <= room + slack or total == 0):
                    b = n_sent
                else:  # the first sentence boundary past `room` raw words (in-vocabulary words scaled to raw)
                    room = max(1, room)  # asp and local never wait: pieces of at least a sentence
                    reach = int(offsets[a]) + -(-room * total // raw)
                    b = min(n_sent, max(a + 1, int(np.searchsorted(offsets, reach, side="left"))))
                share = (raw * int(offsets[b]) // total if b < n_sent else raw) - counted
                counted += share
                if on_claim:
                    self.words_since_merge += share
                    self.lock.notify_all()
                else:
                    self.claimed += share
            try:
                if b > a:
                    lo, hi = int(offsets[a]), int(offsets[b])
                    words, piece_loss = self.trainer.train_job(indices[lo:hi], offsets[a:b + 1] - lo, alpha, rng,
                                                               self.compute_loss)
                    effective += words
                    loss += piece_loss
            finally:
                if not on_claim:
                    with self.lock:
                        self.claimed -= share
                        self.words_since_merge += share
                        self.lock.notify_all()
            a = b
            if a >= n_sent:
                return effective, loss

    def _fetch_loop(self):
        """Keep the local queue topped up (the merger thread merges meanwhile), until the session
        ends: once it is down to half of ``prefetch`` jobs, fetch up to ``prefetch`` (fewer calls
        than one per job). With none to be had, the call is a long poll (:data:`FETCH_WAIT`): the
        dispatcher answers once jobs come, or at once with an epoch drained that this worker has not
        been told of (so it flushes without delay), never a call per few milliseconds."""
        prefetch, told = self._prefetch(), -1  # told: the last drained epoch the dispatcher told of
        # skip-gram's ranges are read here, when fetched; CBOW's by their trainers (RangeReads)
        reader = open_ranges(self.file, self.vocab, self.worker.corpus_dirs) if self.file and self.want_held else None
        try:
            self._fetch_jobs(prefetch, told, reader)
        finally:
            if reader is not None:
                reader.close()
        if self.error is not None:
            raise self.error

    def _fetch_jobs(self, prefetch, told, reader):
        """:meth:`_fetch_loop`'s loop (``reader``: the corpus file's, which reads each range as it comes)."""
        while not self.stop.is_set():
            self.worker.check_alive(self)
            if self.error is not None:
                raise self.error
            if self.jobs.qsize() > prefetch // 2:
                with self.lock:
                    self.lock.wait(LOOK_AGAIN)
                continue
            reply = self.proxy.call("get_jobs", name=self.worker.name, secret=self.worker.secret, session=self.sid,
                                    max_jobs=prefetch - self.jobs.qsize(), wait=FETCH_WAIT, drained=told)
            for msg in reply.jobs:
                self.jobs.put(self._held(msg, reader))
            with self.lock:
                self.drained = reply.drained if not reply.jobs else None
                self.lock.notify_all()
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

    def _holds_jobs(self):
        """Whether a job is queued here or being trained (taken from the queue, not yet done)."""
        with self.jobs.mutex:
            return self.jobs.unfinished_tasks > 0

    def _kernel_cpu(self):
        """CPU seconds the trainer threads spent in jobs so far."""
        with self.lock:
            return float(self.train_cpu)

    def metrics(self):
        """This worker's :class:`gensim_distw2v.protocol.NodeMetrics` in the session so far."""
        return self.worker.meter.sample(self.trained_words, self._kernel_cpu(), self.merge_cpu)
