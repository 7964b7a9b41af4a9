"""A training session's logic as a state machine: no sockets, no locks, no clock.

The dispatcher (:mod:`gensim_distw2v.dispatcher`) holds one :class:`Session` per ``train()`` call,
calls its methods under its lock as messages arrive, and answers with what they return; tests
drive the same methods in-process. States::

    uploading --start()--> running ----close()----> closed
        |                     |                        ^
        +------events---------+--> failed --close()----+
        \\____________________close()___________________/

A session changes state only through its events. ``failed`` carries its cause
(:attr:`failure`, a :class:`gensim_distw2v.protocol.Failure`: a code of
:class:`gensim_distw2v.protocol.errors.Code` and a message), reached by: a shard holding rows of it
lost (:meth:`Session.lose_shard`, ``shard_lost``), a merge beyond the session's bound
(:meth:`Session.poison`, ``poisoned``), no worker left to train it: every one quit, none
registered for ``cluster_timeout`` (``no_workers``), or none sees the corpus file
(``corpus_file``; :meth:`Session.workers_seen`). A failed session answers every call but
``progress`` and ``close`` with its failure's fault; the client learns the cause from
``progress`` and raises it.

Events while running: the client puts jobs (:meth:`Session.put_jobs`) and closes epochs
(:meth:`Session.end_epoch`), or, training from a corpus file, opens epochs whose byte ranges are
cut as workers ask (:meth:`Session.open_file_epoch`); workers join (:meth:`Session.join`), take
jobs (:meth:`Session.hand_out`), report merge rounds (:meth:`Session.round_done`: a job counts as
trained only then) and leave, or are lost (:meth:`Session.release`: their unmerged jobs go back to
the front of the queue). An epoch is done when every job put is counted and every worker in the
session has flushed it (:meth:`Session.epoch_done`).

Under ``sync="bsp"`` the jobs are dealt, as they are put, to the ranks of the workers the session
was opened for (job ``i`` to rank ``i mod K``), and merge rounds are taken in turn
(:meth:`Session.may_merge`), once every rank holds its replica: by epoch, then round within the
epoch, then rank. Each worker's rounds
then see the same rounds of the others whatever the timing: a run depends only on its seed and K.
A worker lost (or a rank never claimed) ends that order: the jobs go back to one queue, and the run
goes on as ``ssp`` (:meth:`Session.end_order`).

Checkpoints (:meth:`Session.resume_point`, :meth:`Session.restore`): the session knows which jobs
(or byte ranges) of the current epoch are trained, and the CRC-32 of the trained jobs' words; a
session resumed from a checkpoint starts with those counts and never hands out a range already
trained (the client skips the jobs already trained).
"""
import collections
import zlib

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.config.choices import SYNC
from gensim_distw2v.core.failures import SessionFailures
from gensim_distw2v.core.jobs import next_alpha
from gensim_distw2v.core.resume import Resumable
from gensim_distw2v.protocol.constants import CLOSED, RUNNING, SESSION_EVENTS, UPLOADING

__all__ = ["Session"]

HEAD_JOBS = 8  # checkpoints keep the CRC-32 of this many of an epoch's first jobs (a resume checks its corpus)


def stream_bounds(spec):
    """``[b_0 = 0, b_1, ..., b_S]``: stretch ``s`` of a corpus file (a :class:`~gensim_distw2v.protocol.CorpusFileSpec`)
    is its ranges ``b_s`` to ``b_(s+1)`` (at most one stretch a range)."""
    n = -(-spec.size // spec.range_bytes)
    streams = max(1, min(spec.streams, n))
    return [s * n // streams for s in range(streams + 1)]


class Session(SessionFailures, Resumable):
    """One training session (one ``train()`` call of a client). Its failure events are those of
    :class:`~gensim_distw2v.core.failures.SessionFailures`, its resume points those of
    :class:`~gensim_distw2v.core.resume.Resumable`.

    Parameters
    ----------
    session_id : str
        Its id.
    config : gensim_distw2v.protocol.SessionConfig
        The session config (checked).
    shards : list of [str, str]
        ``[name, uri]`` of the shards holding its weights, in order.
    """

    def __init__(self, session_id, config, shards):
        self.id, self.config, self.shards = session_id, config, shards
        self.state = UPLOADING
        self.failure = None  # a failed session's protocol.Failure: its cause
        self._causes = []  # the failure's causes, as the message names them (one per shard lost, say)
        self.token = ""  # the session's secret, its workers' too (the dispatcher sets it): merges, downloads
        self.owner = ""  # its client's own secret (the dispatcher sets it): uploads, start, progress, close
        self.vocab_size, self.vector_size = config.params.vocab_size, config.params.vector_size
        # the static arrays (the weights are on the shards)
        self.arrays = {name: np.zeros(spec["shape"], dtype=spec["dtype"]) for name, spec in config.arrays.items()
                       if name not in protocol.WEIGHTS}
        self.received = {name: 0 for name in self.arrays}  # rows (or elements) uploaded
        self.queue = collections.deque()  # protocol.Job records (ranges are cut when handed out)
        self.counts = collections.defaultdict(protocol.EpochCounts)  # epoch -> jobs put and done, and what they trained
        self.loss = 0.0
        self.merges = 0  # merge rounds reported
        self.next_rank = 0
        self.ranks = {}  # worker -> its rank, while in the session
        self.rank_names = {}  # rank -> the worker that had it (ranks are never reused)
        self.last_round = {}  # worker -> when it joined or last reported a round (monotonic; the dispatcher's)
        self.round_gap = None  # typical seconds between a worker's rounds (a moving average), once seen
        self.in_flight = {}  # worker -> {job id: queued job}, handed out, not yet merged
        self.flushed = {}  # worker -> last epoch it flushed (sent all it had)
        self.quit = {}  # worker -> why the session failed on it (it does not come back)
        self.quit_codes = {}  # worker -> the error code of its quit (None: none given; failures.SessionFailures)
        self.poisoned = set()  # workers a shard refused a merge of as poison
        self.closed_epoch = -1  # the client has put every job of epochs up to this one
        self.file = config.corpus_file  # corpus_file training: ranges cut here, lazily
        self.file_checks = {}  # worker -> None (sees the client's file) or what is wrong
        # a corpus file's ranges are handed out from ``streams`` evenly spaced stretches of it in turn (as
        # gensim's corpus_file mode gives each of its threads one stretch): range index b[s] to b[s + 1] is
        # stretch s; per epoch, the next range index of each stretch, and the stretch whose turn it is
        self.bounds = stream_bounds(self.file) if self.file is not None else [0, 0]
        self.cursor = {}  # epoch -> [next range index of each stretch]
        self.turn = {}  # epoch -> the stretch the next range is cut from (if it has one left)
        self.ranges_out = collections.Counter()  # epoch -> bytes of ranges handed out
        self.ranges_done = collections.Counter()  # epoch -> bytes of ranges merged
        self.next_job = 0
        # what checkpoints record: the epochs done, the jobs (ids; ranges: their index in the file)
        # trained in each epoch and the sum of their words' CRC-32 (a corpus iterable's jobs)
        self.completed = -1  # every epoch up to this one is trained and flushed
        self.done_ids = collections.defaultdict(list)
        self.crc = collections.Counter()
        self.job_crc = {}  # job id -> CRC-32 of its words, from put to trained
        self.first_job = {}  # epoch -> id of its first job (iterable)
        self.next_id = 0  # one more than the largest job id put (iterable)
        self.skip = {}  # epoch -> indices of ranges trained before a resume (never handed out again)
        self.head, self.head_epoch = [], 0  # CRC-32 of the first jobs of an epoch (each gives the same jobs)
        # sync="bsp": the ranks jobs are dealt to, each rank's jobs, and the round each rank merges next
        self.ordered = SYNC[config.settings.sync].in_turn
        self.dealt = {rank: collections.deque() for rank in range(config.workers)} if self.ordered else {}
        self.turns = {rank: (0, 0) for rank in self.dealt}
        self.started = set()  # bsp: ranks that asked for jobs, so hold their replica (may_merge waits for all)
        # the holder's bookkeeping (its clock): last call from the client, since when no worker is left
        self.client_seen = self.no_workers_since = self.unjoined_since = self.started_at = None
        # the run this session trains (a resumed session keeps its run's id), and its checkpoints
        # (gensim_distw2v.io.store.SessionCheckpoints, with checkpoint_dir)
        self.run = session_id
        self.checkpoints = None

    # ------------------------------------------------------------------ states
    def expect(self, *states):
        """Raise unless the session is in one of ``states``: a failed session's fault (its cause), or a
        :class:`ValueError`."""
        if self.state not in states:
            if self.failure is not None:
                raise self.failure.fault()
            raise ValueError(f"session {self.id} is {self.state}, expected {' or '.join(states)}")

    def _move(self, event):
        """Event ``event`` (``start``, ``fail``, ``close``) moves the session to the state SESSION_EVENTS names."""
        state = SESSION_EVENTS.get((self.state, event))
        if state is None:
            raise ValueError(f"session {self.id} is {self.state}: it cannot {event}")
        self.state = state

    def receive(self, name, lo, chunk):
        """Rows ``[lo, lo + len(chunk))`` of static array ``name`` (in order, in chunks)."""
        self.expect(UPLOADING)
        target = self.arrays.get(name)
        if target is None:
            raise ValueError(f"upload: session has no array {name!r}" + (
                " here: the weights go to the session's shards" if name in protocol.WEIGHTS else ""))
        if lo != self.received[name]:
            raise ValueError(f"upload: {name} chunk starts at {lo}, expected {self.received[name]}")
        if lo + len(chunk) > len(target):
            raise ValueError(f"upload: {name} chunk [{lo}, {lo + len(chunk)}) overflows {len(target)} rows")
        target[lo:lo + len(chunk)] = chunk
        self.received[name] += len(chunk)

    def start(self):
        """Every static array is uploaded: start handing out jobs."""
        self.expect(UPLOADING)
        missing = [n for n, a in self.arrays.items() if self.received[n] != len(a)]
        if missing:
            raise ValueError(f"start: arrays not fully uploaded: {missing}")
        self._move("start")

    def close(self):
        """The session ends (closed by its client, aborted, or replaced)."""
        if self.state != CLOSED:
            self._move("close")

    # ------------------------------------------------------------------ workers
    def join(self, worker):
        """A worker joins (again: what it had not merged goes back to the queue first); its rank."""
        self.expect(RUNNING)
        self.release(worker)
        self.ranks[worker] = rank = self.next_rank
        self.rank_names[rank] = worker
        self.next_rank += 1
        self.in_flight[worker] = collections.OrderedDict()
        self.flushed[worker] = -1
        return rank

    def release(self, worker):
        """A worker leaves (lost, quit, or joining again): its unmerged jobs go back to the front of
        the queue; returns how many. Under ``bsp`` the order of rounds ends (:meth:`end_order`)."""
        was_member = worker in self.ranks
        jobs = self.in_flight.pop(worker, {})
        self.ranks.pop(worker, None)
        self.flushed.pop(worker, None)
        if was_member and self.ordered:
            self.end_order()
        if self.state == RUNNING:
            self.queue.extendleft(reversed(list(jobs.values())))
        return len(jobs)

    # ------------------------------------------------------------------ bsp: dealt jobs, rounds in turn
    def end_order(self):
        """``bsp`` without a fixed set of workers: the dealt jobs go back to one queue (in the order
        they were put), rounds are no longer taken in turn; the run goes on as ``ssp``. Returns
        whether there was an order to end."""
        if not self.ordered:
            return False
        self.ordered = False
        pending = sorted((job for jobs in self.dealt.values() for job in jobs), key=lambda job: job.id)
        self.queue.extendleft(reversed(pending))
        self.dealt, self.turns = {}, {}
        return True

    def unclaimed(self):
        """Under ``bsp``, the ranks jobs are dealt to that no worker has joined as yet."""
        return sorted(rank for rank in self.dealt if rank >= self.next_rank) if self.ordered else []

    def _deal(self, job):
        self.dealt[job.id % len(self.dealt)].append(job)

    def may_merge(self, worker, turn):
        """Whether the worker may merge its round ``turn`` (``[epoch, round]``) now: always, unless
        rounds are in turn (``bsp``); then once every rank has started (asked for jobs: its weights
        are downloaded) and every other rank's rounds before it, by (epoch, round, rank), are merged.

        Raises
        ------
        ValueError
            A worker not in the session, or a round other than the one its rank merges next.
        """
        self.expect(RUNNING)
        self._flight(worker)
        if not self.ordered:
            return True
        rank, turn = self.ranks[worker], tuple(turn)
        if rank not in self.turns:
            return True  # joined beyond the ranks dealt to (it gets no jobs)
        if turn != self.turns[rank]:
            raise ValueError(f"bsp: worker {worker} (rank {rank}) asks to merge round {list(turn)}, but its next "
                             f"round is {list(self.turns[rank])}")
        if len(self.started) < len(self.turns):  # a late joiner would start from weights holding a round
            return False
        return all((theirs, other) > (turn, rank) for other, theirs in self.turns.items() if other != rank)

    def quit_worker(self, worker, reason, code=None):
        """The session failed on a worker: it leaves for good (:meth:`workers_seen` fails the session
        once none is left, naming why each quit); its jobs are requeued, how many returned."""
        self.quit[worker], self.quit_codes[worker] = reason, code
        return self.release(worker)

    def check_file(self, worker, problem):
        """A worker's verdict on the corpus file (None: it sees the client's); a worker that does
        not see it leaves the session."""
        self.expect(RUNNING)
        if self.file is None:
            raise ValueError("file_check: this session does not train from a corpus file")
        self.file_checks[worker] = problem
        if problem:
            self.release(worker)

    # ------------------------------------------------------------------ jobs
    def put_jobs(self, jobs, crcs=None):
        """Queue checked jobs (:class:`gensim_distw2v.protocol.Job`). With checkpoints, the CRC-32 of
        each job's words (``crcs``, worked out by the caller outside its lock, or here) is kept
        until the job is trained; without, nothing is."""
        self.expect(RUNNING)
        if self.file is not None:
            raise ValueError("put_jobs: this session trains from a corpus file; open its epochs with open_file_epoch")
        late = [job.epoch for job in jobs if job.epoch >= self.config.epochs]
        if late:
            raise ValueError(f"put_jobs: a job of epoch {late[0]}, but this session trains epochs 0 to "
                             f"{self.config.epochs - 1}")
        checked = self.config.checkpoint is not None
        if checked and crcs is None:
            crcs = [zlib.crc32(job.indices) for job in jobs]
        for index, job in enumerate(jobs):
            if self.ordered:
                self._deal(job)
            else:
                self.queue.append(job)
            self.counts[job.epoch].put += 1
            first = self.first_job.setdefault(job.epoch, job.id)
            self.next_id = max(self.next_id, job.id + 1)
            if checked:
                self.job_crc[job.id] = crcs[index]
                if job.id - first == len(self.head) < HEAD_JOBS and job.epoch == self.head_epoch:
                    self.head.append(crcs[index])

    def end_epoch(self, epoch):
        """The client has put every job of ``epoch``: workers flush once they run out of jobs."""
        self.expect(RUNNING)
        self.closed_epoch = max(self.closed_epoch, epoch)

    def open_file_epoch(self, epoch):
        """Train ``epoch`` over the corpus file: its byte ranges are cut as workers ask. Returns
        the number of ranges."""
        self.expect(RUNNING)
        if self.file is None:
            raise ValueError("open_file_epoch: this session trains on jobs the client puts, not a corpus file")
        if epoch >= self.config.epochs or epoch in self.cursor or epoch <= self.closed_epoch:
            raise ValueError(f"open_file_epoch: epoch {epoch} was opened before, or is not one of the "
                             f"session's {self.config.epochs}")
        self.cursor[epoch], self.turn[epoch] = list(self.bounds[:-1]), 0
        self.counts[epoch].put = -(-self.file.size // self.file.range_bytes)  # (io.corpusfile.ranges)
        self.closed_epoch = epoch  # every range of it is there to be cut
        self._skip_trained(epoch)
        if self.ordered:  # cut and dealt now, each with the learning rate of its place in the file
            while self.file_work_left():
                self._deal(self._cut_range(by_position=True))
        return self.counts[epoch].put

    def file_work_left(self):
        """Bytes of the open file epoch not yet cut into ranges."""
        cursor = self.cursor.get(self.closed_epoch) if self.file is not None else None
        if cursor is None:
            return 0
        size, step = self.file.size, self.file.range_bytes
        return sum(max(0, min(size, self.bounds[s + 1] * step) - min(size, at * step)) for s, at in enumerate(cursor))

    def has_work(self, worker=None):
        """Whether a job (queued, or a range still to cut) is waiting (for ``worker``, if given)."""
        if self.ordered:
            rank = self.ranks.get(worker)
            return any(self.dealt.values()) if worker is None else bool(self.dealt.get(rank))
        return bool(self.queue) or self.file_work_left() > 0

    def queued_bytes(self):
        """Bytes of the jobs waiting (queued and dealt; ranges of a file count nothing)."""
        return sum(job.indices.nbytes + job.offsets.nbytes
                   for jobs in (self.queue, *self.dealt.values()) for job in jobs if isinstance(job, protocol.Job))

    def queued(self):
        """Jobs waiting: queued ones (dealt ones too), and ranges of the open file epoch not yet cut."""
        left = self.file_work_left()
        return len(self.queue) + sum(map(len, self.dealt.values())) + (-(-left // self.file.range_bytes) if left else 0)

    def _cut_range(self, by_position=False):
        """The next byte range of the open epoch as a queued job, with the learning rate of the
        words trained so far in the epoch (merged words, plus those of ranges out, estimated), or
        ``by_position``, of the words before the range (in proportion to its bytes)."""
        spec, epoch, bounds = self.file, self.closed_epoch, self.bounds
        cursor, streams = self.cursor[epoch], len(self.bounds) - 1
        stream = self.turn[epoch]
        while cursor[stream] >= bounds[stream + 1]:  # (the callers know one has a range left)
            stream = (stream + 1) % streams
        index = cursor[stream]
        cursor[stream] += 1
        self.turn[epoch] = (stream + 1) % streams
        lo = index * spec.range_bytes
        hi = min(spec.size, lo + spec.range_bytes)
        # its place in the order the stretches are cut in turn (one stretch: its place in the file)
        position = ((index - bounds[stream]) * streams + stream) * spec.range_bytes
        pending = self.ranges_out[epoch] - self.ranges_done[epoch]
        words = position * spec.total_words / max(1, spec.size) if by_position else \
            self.counts[epoch].raw_words + pending * spec.total_words / max(1, spec.size)
        alpha = next_alpha(spec.start_alpha, spec.end_alpha, epoch, self.config.epochs,
                           min(1.0, words / spec.total_words) / spec.rate_threads)
        self.ranges_out[epoch] += hi - lo
        job = protocol.RangeJob(id=self.next_job, epoch=epoch, alpha=alpha, lo=lo, hi=hi)
        self.next_job += 1
        self._skip_trained(epoch)
        return job

    def _skip_trained(self, epoch):
        """Move the epoch's stretches past ranges trained before a resume."""
        skip = self.skip.get(epoch)
        if skip:
            cursor = self.cursor[epoch]
            for stream, at in enumerate(cursor):
                while at < self.bounds[stream + 1] and at in skip:
                    at += 1
                cursor[stream] = at

    def hand_out(self, worker, max_jobs):
        """Up to ``max_jobs`` jobs for a worker of the session, in flight on it from now on.

        Returns
        -------
        (list, int or None)
            The job messages (:class:`gensim_distw2v.protocol.Job` or :class:`gensim_distw2v.protocol.RangeJob`,
            as plain data), and the epoch the client closed when nothing is left to hand out
            (time to flush), else None.
        """
        self.expect(RUNNING)
        flight = self._flight(worker)
        if self.file is not None and worker not in self.file_checks:
            raise ValueError(f"worker {worker} has not checked the corpus file of session {self.id}: call file_check")
        if self.ordered:
            self.started.add(self.ranks[worker])
        out = []
        while len(out) < max_jobs and self.has_work(worker):
            job = self.dealt[self.ranks[worker]].popleft() if self.ordered else \
                self.queue.popleft() if self.queue else self._cut_range()
            flight[job.id] = job
            out.append(job.to_wire())
        drained = self.closed_epoch if not self.has_work(worker) and self.closed_epoch >= 0 else None
        return out, drained

    def _flight(self, worker):
        flight = self.in_flight.get(worker)
        if flight is None:
            raise ValueError(f"worker {worker} is not a member of session {self.id}: join it first")
        return flight

    def round_done(self, worker, report):
        """A worker's merge round (:class:`gensim_distw2v.protocol.RoundReport`) is in every shard:
        its jobs count as trained. Returns the raw words they carried."""
        self.expect(RUNNING)
        flight = self._flight(worker)
        self.merges += report.rounds
        if report.flush >= 0:
            self.flushed[worker] = max(self.flushed[worker], report.flush)
        rank = self.ranks[worker]
        if self.ordered and rank in self.turns:  # its next round
            self.turns[rank] = (report.flush + 1, 0) if report.flush >= 0 else (report.turn[0], report.turn[1] + 1)
        if report.flush >= 0:
            self.advance()
        self.loss += report.loss
        words = 0
        for job_id, effective, *counts in report.jobs:
            job = flight.pop(job_id, None)
            if job is None:
                continue  # not (or no longer) this worker's: already re-queued elsewhere
            if isinstance(job, protocol.RangeJob):  # its worker counted its words
                raw, examples = counts if counts else (0, 0)
                self.ranges_done[job.epoch] += job.hi - job.lo
                self.done_ids[job.epoch].append(job.lo // self.file.range_bytes)
            else:
                raw, examples = job.raw_words, job.examples
                self.done_ids[job.epoch].append(job_id)
                self.crc[job.epoch] = (self.crc[job.epoch] + self.job_crc.pop(job_id, 0)) % 2 ** 64
            done = self.counts[job.epoch]
            done.done += 1
            done.raw_words += raw
            done.effective_words += effective
            done.examples += examples
            words += raw
        return words

    # ------------------------------------------------------------------ progress
    def in_flight_count(self):
        """Jobs handed out and not yet merged."""
        return sum(len(flight) for flight in self.in_flight.values())

    def all_flushed(self):
        """The last epoch every worker in the session has flushed (None: no worker in it)."""
        return min(self.flushed.values(), default=None)

    def epoch_done(self, epoch):
        """Every job of ``epoch`` merged, and every worker in the session flushed it."""
        flushed = self.all_flushed()
        counts = self.counts[epoch]
        return counts.done >= counts.put and flushed is not None and flushed >= epoch

    def epochs(self):
        """``{epoch: EpochCounts}`` (str keys, as on the wire)."""
        return {str(e): counts for e, counts in self.counts.items()}
