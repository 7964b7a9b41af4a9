"""A worker: holds a replica of the model and trains jobs with T threads (the GIL released).

Start one per node (or more), after the name server; the dispatcher may come before or after::

    python -m gensim_distw2v.worker --ns-host 127.0.0.1 --ns-port 9090 --threads 4

How it works:

1. It registers as ``gensim_distw2v.worker.<id>`` in the name server, then looks for the
   dispatcher there until it finds it, and says hello (again whenever the dispatcher restarts
   or forgets it).
2. A heartbeat thread tells the dispatcher it is alive and learns of training sessions.
3. For a session it fetches the config and the static arrays from the dispatcher and the weights
   from the session's parameter shards (:mod:`gensim_distw2v.shard`), in chunks, builds its
   replica, and runs T trainer threads on jobs pulled from the dispatcher with a small prefetch. Training from a
   shared corpus file, it first checks that it sees the client's file, and its jobs are byte
   ranges of the file that it reads and encodes itself (:mod:`gensim_distw2v.io.corpusfile`).
4. Every ``sync_words`` words (and whenever it runs out of jobs) it merges: it sends the rows it
   changed, each straight to the shard that owns it, to every shard at once, and takes in the rows
   other workers changed (:mod:`gensim_distw2v.core.merge`), while its trainer threads go on (they wait
   only once the next interval is used up before the round is done: the wait is counted and
   reported); then it tells the dispatcher which jobs the round carried.
5. When the session closes it drops the replica and waits for the next one.
"""
import collections
import concurrent.futures
import logging
import os
import queue
import threading
import time
import uuid

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.io import meter, transport
from gensim_distw2v._inner import JobTrainer
from gensim_distw2v.io.corpusfile import RangeReader, check_file, vocab_lookup
from gensim_distw2v.versions import versions
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.core.merge import Replica
from gensim_distw2v.core.schedule import row_limits, row_ranges

logger = logging.getLogger(__name__)

__all__ = ["Worker", "SessionLost", "ShardLost"]

# bulk transfers (the weights downloaded at a join, epoch flushes) move in parts of part_bytes / 8
# (2 MB by default): every worker makes them at about the same moment, so a shard holds K parts (and
# their serialised copies) at once; they are rare, so the extra calls cost nothing per word
BULK_PART_DIVISOR = 8
# sync="local": the interval of a worker that merges only at epoch ends (no job is ever cut)
LOCAL_INTERVAL = 2 ** 62


class SessionLost(Exception):
    """The session ended, was replaced, or the dispatcher went away."""


class ShardLost(RuntimeError):
    """A shard of the session does not answer: the session cannot go on on this worker."""


class _Training:
    """One session's work on this worker: the replica, the trainer threads, the merges."""

    def __init__(self, worker, sid, proxy):
        self.worker, self.sid, self.proxy = worker, sid, proxy
        self.stop = threading.Event()
        self.jobs = queue.Queue()
        self.lock = threading.Condition()
        self.done = []  # [job id, effective words(, raw words, examples)] trained since the last merge round
        self.done_epoch = -1  # the latest epoch of those jobs
        self.words_since_merge = 0
        self.words_merged = 0  # of those, the words carried by rounds made for want of jobs
        self.loss = 0.0
        self.merge_seconds = 0.0
        self.train_cpu = self.merge_cpu = 0.0  # CPU seconds of the trainer threads' kernel calls, of merge rounds
        self.stalled = 0.0  # seconds trainer threads waited for a merge round (the staleness bound)
        self.trained_words = 0
        self.error = None
        self.drained = None  # the epoch the dispatcher says is fully handed out, once our queue is empty
        self.flushed = -1  # the last epoch this worker flushed (sent everything, exactly)

    def run(self):
        self.worker.meter.mark(self.sid)
        joined = protocol.Joined.from_wire(self.proxy.join(self.worker.name, self.sid))
        config, self.rank, self.shards, self.token = joined.config, joined.rank, joined.shards, joined.token
        self.layout = ShardLayout(len(self.shards))
        self.shard_proxies = [transport.connect(uri, self.worker.hmac_key, timeout=60.0) for _name, uri in self.shards]
        self.pool = concurrent.futures.ThreadPoolExecutor(len(self.shards), thread_name_prefix="shard-link") \
            if len(self.shards) > 1 else None
        try:
            self._run(config)
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=False, cancel_futures=True)
            for proxy in self.shard_proxies:
                transport.release(proxy)

    def _on_shards(self, call):
        """``[call(0), call(1), ...]``, one per shard, in parallel when there are several."""
        if self.pool is None:
            return [call(0)]
        return list(self.pool.map(call, range(len(self.shards))))

    def _shard_call(self, shard, method, *args):
        """A remote call to a shard; a shard that does not answer raises :class:`ShardLost`, naming it."""
        try:
            return getattr(self.shard_proxies[shard], method)(*args)
        except transport.PyroError as err:
            name, uri = self.shards[shard]
            host, port, _broadcast, _key = transport.ns_settings(self.worker.ns_conf)
            raise ShardLost(f"lost shard {name} at {uri} ({type(err).__name__}: {err}); restart it with: python -m "
                            f"gensim_distw2v.shard --ns-host {host} --ns-port {port}") from None

    def _run(self, config):
        self.file = config.corpus_file
        if self.file is not None:
            problem = check_file(self.file.path, self.file.fingerprint())
            self.proxy.file_check(self.worker.name, self.sid, problem)
            if problem:
                raise RuntimeError(f"cannot train from the corpus file of session {self.sid}: {problem}")
        self.params, settings = config.params, config.settings
        self.sync_words, self.compute_loss = settings.sync_words, config.compute_loss
        # sync="local": no rounds within an epoch (jobs are not cut either); "bsp": rounds in turn
        self.sync, self.turn = settings.sync, [0, 0]
        if self.sync == "local":
            self.sync_words = LOCAL_INTERVAL
        self.hold_back, self.part_bytes = settings.hold_back, settings.part_bytes
        self.bulk_bytes = max(1024, self.part_bytes // BULK_PART_DIVISOR)
        self.hot_rows, self.cold_every, self.rounds = config.hot_rows, settings.cold_every, 0
        # hs: syn1's hot rows (tree nodes, busiest first); 0: not known, syn1 moves every row every round
        self.tree_hot_rows = config.tree_hot_rows if "syn1" in config.arrays and config.tree_hot_rows else -1
        self.merge_dtype = settings.merge_dtype
        vocab, size = self.params.vocab_size, self.params.vector_size
        start = time.monotonic()
        arrays = {name: (self._download_weights if name in protocol.WEIGHTS else self._download)(name, spec)
                  for name, spec in config.arrays.items()}
        self.replica = Replica({n: arrays.pop(n) for n in protocol.WEIGHTS if n in arrays})
        if not self.params.sample:
            arrays.pop("sample_int", None)
        if self.file is not None:
            self.vocab = vocab_lookup(arrays.pop("vocab_bytes"), arrays.pop("vocab_offsets"))
            if len(self.vocab) != vocab:
                raise ValueError(f"the session's vocabulary has {len(self.vocab)} distinct words, not {vocab}")
        # per row, how many of the jobs this worker holds (queued or in training) use it: a routine merge
        # round asks the shards for the values of these rows only (corpus-file ranges: every row; bsp:
        # every row, as how many jobs a worker holds is a matter of timing)
        self.want = np.zeros(vocab, dtype=np.int32) if self.file is None and self.sync != "bsp" else None
        self.trainer = JobTrainer(**self.params.kernel(), **self.replica.replica, **arrays)
        self.ranges = row_ranges(vocab, 4 * size * len(self.replica.replica), self.part_bytes)
        self.flush_ranges = row_ranges(vocab, 4 * size * len(self.replica.replica), self.bulk_bytes)
        logger.info("joined session %s as rank %i: %i x %i model fetched from %i shards in %.1f s; training with "
                    "%i threads, merging every %i words (sync=%s)", self.sid, self.rank, vocab, size, len(self.shards),
                    time.monotonic() - start, self.worker.threads, settings.sync_words, self.sync)
        if self.sync == "bsp" and self.worker.threads > 1:
            logger.warning("sync='bsp' with %i trainer threads: rounds are taken in turn, but threads share the "
                           "replica as they run, so two runs differ; start workers with --threads 1 for "
                           "bit-identical runs", self.worker.threads)
        threads = [threading.Thread(target=self._train, args=(t, self._rng(config, t)), daemon=True,
                                    name=f"trainer-{t}") for t in range(self.worker.threads)]
        threads.append(threading.Thread(target=self._merge_loop, daemon=True, name="merger"))
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
        target = np.zeros(spec["shape"], dtype=spec["dtype"])
        row_bytes = max(1, target.nbytes // max(1, len(target)))
        for lo, hi in row_ranges(len(target), row_bytes, self.part_bytes):
            self.worker.check_alive(self)
            chunk = protocol.unpack_array(self.proxy.download(self.sid, name, lo, hi),
                                      f"download of {name}", target.dtype.name, shape=(hi - lo,) + target.shape[1:])
            target[lo:hi] = chunk
        return target

    def _download_weights(self, name, spec):
        """A trained matrix, each shard's rows from that shard (all at once); they become this
        worker's view of them for the merges."""
        target = np.zeros(spec["shape"], dtype=np.float32)

        def fetch(shard):
            view = self.layout.rows_of(target, shard)
            for lo, hi in row_ranges(len(view), 4 * target.shape[1], self.bulk_bytes):
                self.worker.check_alive(self)
                view[lo:hi] = protocol.unpack_array(self._shard_call(shard, "download", self.sid, name, lo, hi, self.rank,
                                                                 self.token),
                                                f"download of {name}", "float32", shape=(hi - lo, target.shape[1]))
        self._on_shards(fetch)
        return target

    def _train(self, thread, rng):
        try:
            reader = RangeReader(self.file.path, self.vocab) if self.file is not None else None
        except OSError as err:  # checked at join, gone since
            self.error = RuntimeError(f"cannot open the corpus file {self.file.path}: {err}")
            self.stop.set()
            return
        try:
            while not self.stop.is_set():
                if not self._wait_for_round():
                    continue
                try:
                    msg = self.jobs.get(timeout=0.2)  # counted as held until task_done(), below
                except queue.Empty:
                    continue
                cpu = time.thread_time()
                try:
                    if reader is not None:
                        job_id, effective, loss, raw, examples, epoch = self._train_range(msg, reader, rng)
                        entry = [job_id, effective, raw, examples]
                    else:
                        job, _rows = msg
                        effective, loss = self._train_pieces(job.indices, job.offsets, job.raw_words, job.alpha, rng)
                        raw, entry, epoch = job.raw_words, [job.id, effective], job.epoch
                except Exception as err:  # noqa: BLE001 - reported by the fetch loop, which ends the session
                    logger.exception("trainer thread %i failed on a job", thread)
                    self.error = err
                    self.stop.set()
                    return
                finally:
                    cpu = time.thread_time() - cpu
                    with self.lock:
                        self.train_cpu += cpu
                        if reader is None and msg[1] is not None:
                            self.want[msg[1]] -= 1
                with self.lock:
                    self.done.append(entry)  # its words counted towards the merge interval as trained
                    self.done_epoch = max(self.done_epoch, epoch)
                    self.trained_words += raw
                    self.loss += loss
                    self.jobs.task_done()  # (under the lock: a merge round sees the job done, or held)
                    self.lock.notify_all()
        finally:
            if reader is not None:
                reader.close()

    def _train_range(self, msg, reader, rng):
        """Read, encode and train a byte range of the corpus file; ``(id, effective, loss, raw, examples,
        epoch)``."""
        job = protocol.RangeJob.from_wire(msg, size=self.file.size)
        job_id, alpha, lo, hi = job.id, job.alpha, job.lo, job.hi
        indices, offsets, starts, raw, examples = reader.read(lo, hi)
        effective, loss, counted, total = 0, 0.0, 0, len(indices)
        for a, b in zip(starts[:-1].tolist(), starts[1:].tolist()):
            # each chunk (at most the kernel's 10,000 words) counts its share of the range's raw words
            share = (raw * int(offsets[b]) // total if total else raw) - counted
            counted += share
            words, job_loss = self._train_pieces(indices[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a],
                                                 share, alpha, rng)
            effective += words
            loss += job_loss
        if counted < raw:  # no chunk (a range of empty or unknown-word lines)
            with self.lock:
                self.words_since_merge += raw - counted
                self.lock.notify_all()
        return job_id, effective, loss, raw, examples, job.epoch

    def _wait_for_round(self):
        """Bounded staleness: once ``sync_words`` words are trained since the last merge round
        began (``bsp``: ended), wait for the next round to begin (to end); otherwise slow merges
        would stretch the real merge interval, and summed deltas blow up beyond it (``asp`` and
        ``local`` never wait). True when training may go on; False after waiting a while (the
        caller checks ``stop`` and calls again)."""
        with self.lock:
            if self.words_since_merge < self.sync_words or self.sync in ("asp", "local"):
                return True
            waited = time.perf_counter()
            self.lock.wait(0.05)
            self.stalled += time.perf_counter() - waited
            return self.words_since_merge < self.sync_words

    def _train_pieces(self, indices, offsets, raw, alpha, rng):
        """Train a job, in pieces of whole sentences cut where the merge interval runs out.

        A job (about ``batch_words`` words) may be longer than ``sync_words`` (2.2 k words at K=8):
        trained in one go, it would stretch the interval to the job's length. Each piece waits for a
        merge round while the interval is used up, then counts its share of the job's ``raw`` words
        towards the interval as soon as it is trained. A job that fits the interval left, or
        overruns it by at most a tenth of the interval, is trained in one call, as gensim would:
        cutting a job changes the order of its random draws (gensim draws the job's down-sampling
        before its windows), so one worker at its default interval (1 M words) reproduces gensim's
        exact numbers on a corpus of any length. Returns ``(effective words, loss)``; a piece's
        words are partly in the next round.
        """
        total, n_sent = len(indices), len(offsets) - 1
        effective, loss, counted, a = 0, 0.0, 0, 0
        while True:
            while not self._wait_for_round():
                if self.stop.is_set():  # the session ends: the rest of the job is not trained here
                    return effective, loss
            with self.lock:
                room = max(1, self.sync_words - self.words_since_merge)  # raw words left in this interval
            if a == 0 and (raw <= room + self.sync_words // 10 or total == 0):
                b = n_sent
            else:  # the first sentence boundary past `room` raw words (in-vocabulary words scaled to raw)
                reach = int(offsets[a]) + -(-room * total // raw)
                b = min(n_sent, max(a + 1, int(np.searchsorted(offsets, reach, side="left"))))
            if b > a:
                lo, hi = int(offsets[a]), int(offsets[b])
                words, piece_loss = self.trainer.train_job(indices[lo:hi], offsets[a:b + 1] - lo, alpha, rng,
                                                           self.compute_loss)
                effective += words
                loss += piece_loss
            share = (raw * int(offsets[b]) // total if b < n_sent else raw) - counted
            counted += share
            with self.lock:
                self.words_since_merge += share
                self.lock.notify_all()
            a = b
            if a >= n_sent:
                return effective, loss

    def _fetch_loop(self):
        """Keep the local queue topped up (the merger thread merges meanwhile), until the session
        ends: once it is down to half of ``prefetch`` jobs, fetch up to ``prefetch`` (fewer calls
        than one per job)."""
        prefetch = 4 * self.worker.threads
        while not self.stop.is_set():
            self.worker.check_alive(self)
            if self.error is not None:
                raise self.error
            if self.jobs.qsize() > prefetch // 2:
                with self.lock:
                    self.lock.wait(0.05)
                continue
            with self.lock:
                working = self._holds_jobs()
            reply = self.proxy.get_jobs(self.worker.name, self.sid, prefetch - self.jobs.qsize(),
                                        0.02 if working else 0.2)
            reply = protocol.JobBatch.from_wire(reply)
            for msg in reply.jobs:
                if self.file is None:  # a job's words are rows this worker wants current values of
                    job, rows = protocol.Job.from_wire(msg, vocab_size=self.params.vocab_size), None
                    if self.want is not None:
                        rows = np.unique(job.indices)
                        with self.lock:
                            self.want[rows] += 1
                    msg = (job, rows)
                self.jobs.put(msg)
            with self.lock:
                self.drained = reply.drained if not reply.jobs else None
                self.lock.notify_all()
        if self.error is not None:
            raise self.error

    def _merge_loop(self):
        """Merge when ``sync_words`` words are trained, when idle with unmerged jobs, and flush
        everything exactly once an epoch is drained. ``bsp``: no round for want of jobs (its timing
        would decide what a round carries), and an interval's round before a flush; ``local``:
        flushes only."""
        proxy = transport.connect(self.worker.dispatcher_uri, self.worker.hmac_key, timeout=60.0)
        try:
            while not self.stop.is_set():
                with self.lock:
                    idle = not self._holds_jobs()
                    # a flush once the epoch is drained, and again for jobs of it trained after that (given
                    # back by a lost worker): an epoch's jobs are always reported by an exact round (jobs of
                    # the next epoch, while the client has not put all of them, are not: drained is stale)
                    flush = idle and self.drained is not None and (
                        self.drained > self.flushed or (bool(self.done) and self.done_epoch <= self.drained))
                    interval = self.words_since_merge >= self.sync_words
                    if self.sync == "bsp" and interval:
                        flush = False
                    spare = idle and self.done and self.sync in ("ssp", "asp")
                    if not (flush or interval or spare):
                        self.lock.wait(0.05)
                        continue
                    epoch = self.drained
                if flush:
                    self._merge_round(proxy, "float32", 0.0, flush_epoch=epoch)
                    self.flushed = epoch
                else:
                    self._merge_round(proxy, self.merge_dtype, self.hold_back, restart_clock=interval)
        except SessionLost:
            pass
        except Exception as err:  # noqa: BLE001 - handed to the fetch loop, which ends the session
            self.error = err
            self.stop.set()
        finally:
            transport.release(proxy)

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

    def _merge_round(self, proxy, dtype, hold_back, flush_epoch=None, restart_clock=True):
        """Send this worker's changes (values as ``dtype``: :data:`gensim_distw2v.protocol.DELTA_DTYPES`) to
        the shards and take in the other workers', range by range, every shard at once; then tell
        the dispatcher the round's jobs are merged.

        With ``flush_epoch`` the round sends everything (no hold-back, float32) and tells the
        dispatcher this worker has nothing left of that epoch. A round made because the worker ran
        out of jobs (``restart_clock=False``) leaves the interval's word count as it is: where the
        intervals end depends only on the words trained, not on when jobs arrived (so one worker
        cuts no job, and reproduces gensim, however its jobs are delayed).
        """
        turn = list(self.turn)
        if self.sync == "bsp":
            while not proxy.begin_round(self.worker.name, self.sid, turn, 0.5):
                self.worker.check_alive(self)
        began, cpu = time.perf_counter(), time.thread_time()
        with self.lock:
            jobs, self.done, self.done_epoch = self.done, [], -1
            loss, self.loss = self.loss, 0.0
            if self.sync == "bsp":  # trainers go on once the round is taken in (below)
                self.words_merged = self.words_since_merge
            elif restart_clock or flush_epoch is not None:
                self.words_since_merge = self.words_merged = 0
            else:
                self.words_merged = self.words_since_merge
            self.lock.notify_all()  # trainers waiting for this round may go on
        # every cold_every-th round and every flush merges every row; the others only the hot rows
        # of syn0 and syn1neg (merge.hot_rows) and of hs's syn1 (merge.tree_hot_rows; every syn1 row
        # if those are not known): parts beyond them are skipped
        self.rounds += 1
        every_row = flush_epoch is not None or self.rounds % self.cold_every == 0
        hot = -1 if every_row else self.hot_rows
        tree = -1 if every_row else self.tree_hot_rows
        top = self.params.vocab_size if "syn1" in self.replica.replica and tree < 0 else max(hot, tree)
        parts = self.flush_ranges if flush_epoch is not None else self.ranges if every_row \
            else [(lo, hi) for lo, hi in self.ranges if lo < top] or self.ranges[:1]
        limits = row_limits(hot, tree)
        size = self.params.vector_size
        traffic, pool_cpu = [0, 0], 0.0  # bytes up, down; CPU of the shard links' threads
        wanted = None
        if flush_epoch is None and self.want is not None:
            with self.lock:
                wanted = np.flatnonzero(self.want).astype(np.uint32)
        for lo, hi in parts:
            deltas = self.replica.take_delta(lo, hi, dtype, hold_back, limits)
            traffic[0] += sum(_nbytes(d) for d in deltas.values())
            split = {name: self.layout.split(*d) for name, d in deltas.items() if len(d[0])}
            wanted_split = None if wanted is None else self.layout.split(
                wanted[np.searchsorted(wanted, max(lo, self.hot_rows)):np.searchsorted(wanted, hi)])
            self.worker.check_alive(self)

            def merge_with(shard, lo=lo, hi=hi, split=split, wanted_split=wanted_split):
                thread_cpu = time.thread_time()
                local_lo, local_hi = self.layout.local_range(lo, hi, shard)
                part = protocol.MergePart(
                    session=self.sid, rank=self.rank, lo=local_lo, hi=local_hi, hold_back=float(hold_back),
                    token=self.token,
                    matrices={name: protocol.pack_deltas(*d[shard]) for name, d in split.items() if len(d[shard][0])},
                    hot_rows=-1 if hot < 0 else self.layout.count(hot, shard), exact=flush_epoch is not None,
                    tree_hot_rows=-1 if hot < 0 or tree < 0 else self.layout.count(tree, shard),
                    wanted=None if wanted_split is None else protocol.pack_wanted(wanted_split[shard][0], local_lo,
                                                                              local_hi))
                asked = 0 if part.wanted is None else len(part.wanted["data"])
                reply = protocol.MergeReply.from_wire(self._shard_call(shard, "merge", part.to_wire()))
                got = []
                for key in ("matrices", "values"):
                    got.append({})
                    for name, msg in getattr(reply, key).items():
                        if name not in self.replica.replica:
                            raise ValueError(f"merge reply: unknown matrix {name!r}")
                        rows, values, scales = protocol.unpack_deltas(msg, name, size, local_lo, local_hi,
                                                                  f"merge reply's {key}")
                        got[-1][name] = (self.layout.to_global(rows, shard), values, scales)
                return got + [asked, time.thread_time() - thread_cpu]
            for missed, values, asked, link_cpu in self._on_shards(merge_with):
                pool_cpu += link_cpu if self.pool is not None else 0.0  # the shard links' threads' CPU
                traffic[0] += asked
                traffic[1] += sum(_nbytes(d) for way in (missed, values) for d in way.values())
                self.replica.take_in(missed, values)
        with self.lock:
            stalled = self.stalled
            if self.sync == "bsp":
                self.words_since_merge = self.words_merged = 0
                self.lock.notify_all()
        self.turn = [flush_epoch + 1, 0] if flush_epoch is not None else [turn[0], turn[1] + 1]
        self.merge_seconds += time.perf_counter() - began
        self.merge_cpu += time.thread_time() - cpu + pool_cpu
        report = protocol.RoundReport(
            jobs=jobs, loss=float(loss), flush=-1 if flush_epoch is None else flush_epoch,
            exact=flush_epoch is not None, merge_seconds=self.merge_seconds, merge_cpu=self.merge_cpu,
            kernel_cpu=self._kernel_cpu(), stall_seconds=stalled, bytes_up=traffic[0], bytes_down=traffic[1],
            turn=turn, node=None if flush_epoch is None else self.metrics())  # routine rounds: heartbeats carry them
        proxy.round_done(self.worker.name, self.sid, report.to_wire())


def _nbytes(deltas):
    """Bytes of one matrix's ``(rows, values, scales or None)`` on the wire (their arrays)."""
    rows, values, scales = deltas
    return rows.nbytes + values.nbytes + (0 if scales is None else scales.nbytes)


class Worker:
    """A worker process's remote face and its loops.

    Parameters
    ----------
    ns_conf : dict
        Where the name server is.
    threads : int
        Trainer threads (default: the node's cores).
    hmac_key : bytes, optional
        The cluster's HMAC key.
    heartbeat : float
        Seconds between heartbeats (each is a long poll: a new session is seen at once).
    """

    def __init__(self, ns_conf, threads=None, hmac_key=None, heartbeat=1.0):
        self.ns_conf, self.hmac_key = dict(ns_conf), hmac_key
        if hmac_key:
            self.ns_conf["hmac_key"] = hmac_key
        self.threads = threads or os.cpu_count() or 1
        self.heartbeat_every = heartbeat
        self.meter = meter.Meter("worker", self.threads)
        self.name = transport.WORKER_PREFIX + uuid.uuid4().hex[:12]
        self.uri = None
        self.stopped = threading.Event()
        self.session_wanted = None  # session id the dispatcher says we should be in
        self.dispatcher_uri = None
        self.training = None
        self.trained_sessions = collections.deque(maxlen=10)

    @transport.expose
    def status(self):
        """What this worker is doing.

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.WorkerStatus`.
        """
        training = self.training
        return protocol.WorkerStatus(name=self.name, threads=self.threads, dispatcher=self.dispatcher_uri,
                                 session=training.sid if training is not None else None).to_wire()

    def check_alive(self, training):
        """Raise SessionLost if ``training`` should stop (session ended, dispatcher gone, shutting down)."""
        if self.stopped.is_set() or self.session_wanted != training.sid or training.stop.is_set():
            raise SessionLost(training.sid)

    def _connect(self):
        """Find the dispatcher and say hello; retry until it works or we are stopped."""
        waited = 0.0
        while not self.stopped.is_set():
            try:
                uri = transport.lookup(self.ns_conf, transport.DISPATCHER_NAME)
                if uri:
                    proxy = transport.connect(uri, self.hmac_key, timeout=30.0)
                    proxy.hello(self.name, self.uri, protocol.Hello(versions=versions(), threads=self.threads).to_wire())
                    self.dispatcher_uri = uri
                    self.trained_sessions.clear()  # after a new hello the dispatcher treats us as new
                    logger.info("found the dispatcher at %s", uri)
                    return proxy
            except ValueError as err:  # refused (version mismatch): say so, keep trying
                logger.error("the dispatcher refused this worker: %s", err)
            except (transport.ClusterError, transport.PyroError) as err:
                if waited == 0.0 or int(waited) % 30 == 0:
                    logger.info("waiting for the dispatcher (%s)", err)
            if waited == 0.0:
                logger.info("waiting for a dispatcher to register as %s", transport.DISPATCHER_NAME)
            self.stopped.wait(1.0)
            waited += 1.0
        return None

    def heartbeat_loop(self):
        """Keep in touch with the dispatcher; start and stop session work as it says."""
        proxy = None
        while not self.stopped.is_set():
            if proxy is None:
                proxy = self._connect()
                if proxy is None:
                    return
            try:
                beat = protocol.Beat.from_wire(proxy.heartbeat(self.name, self.session_wanted, self.heartbeat_every,
                                                           self._metrics().to_wire()))
            except (transport.PyroError, ValueError) as err:
                logger.warning("lost the dispatcher (%s); looking for it again", err)
                transport.release(proxy)
                proxy, self.session_wanted, self.dispatcher_uri = None, None, None
                continue
            if beat.hello:
                transport.release(proxy)
                proxy, self.session_wanted = None, None
                continue
            self.session_wanted = beat.session
            old = self.training
            if old is not None and old.sid != self.session_wanted:
                # its session is over for the dispatcher; it may still be blocked in a call on a dead
                # connection (after a network cut): stop it and do not wait for it
                old.stop.set()
                old = None
            if self.session_wanted and old is None and self.session_wanted not in self.trained_sessions:
                self.training = _Training(self, self.session_wanted, None)
                threading.Thread(target=self._run_session, args=(self.training,), daemon=True,
                                 name="session").start()
        if proxy is not None:
            try:
                proxy.leave(self.name)
            except transport.PyroError:
                pass
            transport.release(proxy)

    def _metrics(self):
        """This worker's :class:`gensim_distw2v.protocol.NodeMetrics`: of its session, or since the last one."""
        training = self.training
        if training is not None and self.meter.session == training.sid:
            return training.metrics()
        return self.meter.sample()

    def _run_session(self, training):
        training.proxy = transport.connect(self.dispatcher_uri, self.hmac_key, timeout=60.0)
        try:
            training.run()
        except SessionLost:
            logger.info("session %s ended", training.sid)
        except transport.PyroError as err:  # the dispatcher is gone, or drops this worker as its link closed
            logger.warning("session %s stopped on this worker: %s", training.sid, err)
        except (ValueError, RuntimeError) as err:
            logger.warning("session %s stopped on this worker: %s", training.sid, err)
            self._quit(training, f"{err}")
        except Exception as err:  # noqa: BLE001 - a worker keeps serving whatever one session did
            logger.exception("session %s failed on this worker", training.sid)
            self._quit(training, f"{type(err).__name__}: {err}")
        finally:
            training.stop.set()
            transport.release(training.proxy)
            self.trained_sessions.append(training.sid)
            self.meter.mark(None)
            if self.training is training:  # a newer session may have started meanwhile
                self.training = None

    def _quit(self, training, reason):
        """Tell the dispatcher the session failed here, so that its jobs go to other workers and
        the client stops waiting for this one."""
        try:
            training.proxy.quit_session(self.name, training.sid, reason)
        except (transport.PyroError, ValueError) as err:  # the session or the dispatcher is gone already
            logger.info("could not tell the dispatcher that session %s failed here: %s", training.sid, err)
