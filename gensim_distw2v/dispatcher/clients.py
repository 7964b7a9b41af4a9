"""The dispatcher's client-facing part: status; a session's set-up (open_session, upload, start),
its jobs and epochs (put_jobs, end_epoch, open_file_epoch), progress, checkpoints, download, close."""
import logging
import math
import secrets
import time
import uuid
import zlib

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.config.choices import MAX_ARRAY_BYTES
from gensim_distw2v.core import book
from gensim_distw2v.core.checkpoints import SessionCheckpoints
from gensim_distw2v.core.session import Session
from gensim_distw2v.dispatcher import overview
from gensim_distw2v.dispatcher.checkpointing import start_point
from gensim_distw2v.dispatcher.state import MAX_QUEUE_BYTES
from gensim_distw2v.io.store import CheckpointStore
from gensim_distw2v.protocol import errors
from gensim_distw2v.protocol.constants import FAILED, LIVE_STATES, RUNNING, UPLOADING
from gensim_distw2v.versions import check_versions, versions

logger = logging.getLogger(__name__)

__all__ = ["ClientCalls", "MAX_JOBS_PER_CALL"]

MAX_JOBS_PER_CALL = 64  # jobs one put_jobs call may carry (the client sends 8): the queue's overshoot beyond its limit


class ClientCalls:
    """The calls of :data:`gensim_distw2v.protocol.tables.DISPATCHER` that clients make.

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    checkpointing : gensim_distw2v.dispatcher.checkpointing.Checkpointing
    """

    def __init__(self, cluster, checkpointing):
        self.cluster, self.checkpointing = cluster, checkpointing

    def _touch(self, sid, states=(RUNNING,)):
        """The session ``sid``, in ``states``, as word from its client (the lock held; its owner
        secret checked: :mod:`~gensim_distw2v.dispatcher.guards`)."""
        session = self.cluster.session_of(sid, states)
        session.client_seen = time.monotonic()
        return session

    # ------------------------------------------------------------------ the cluster
    def status(self, _request):
        """The cluster as the dispatcher sees it: a :class:`~gensim_distw2v.protocol.Status`."""
        cluster, now = self.cluster, time.monotonic()
        with cluster.cond:
            session = cluster.session
            return protocol.Status(
                versions=versions(),
                workers={name: protocol.MemberStatus(
                    threads=m.threads, rank=cluster.rank(name), silent=now - m.last_seen, words=m.counts.words,
                    in_flight=len(session.in_flight.get(name, ())) if session else 0, uri=m.uri)
                    for name, m in cluster.workers.items()},
                shards={name: protocol.ShardMemberStatus(uri=s.uri, silent=now - s.last_seen)
                        for name, s in cluster.shards.items()},
                session=None if session is None else protocol.SessionState(id=session.id, state=session.state))

    # ------------------------------------------------------------------ a session's set-up
    def _refuse_while_busy(self, spec):
        """Under ``cluster.cond``: raise Busy while another session is live, unless it is of this run
        (``spec``'s checkpoint folder), ``spec`` resumes it and the dispatcher allows takeovers (then True:
        the session may be replaced)."""
        cluster = self.cluster
        current = cluster.session
        if current is None or current.state not in LIVE_STATES:
            return False
        same_run = spec is not None and spec.resume and current.config.checkpoint is not None \
            and current.config.checkpoint.dir == spec.dir
        if same_run and cluster.limits.allow_takeover:
            return True
        silent, limit = time.monotonic() - current.client_seen, cluster.limits.client_timeout
        raise errors.Busy(
            f"the dispatcher is busy with session {current.id} of " + (
                f"this run (its client was last heard {silent:.0f} s ago): it ends {limit:.0f} s after "
                f"its client's last call, then the resume can go on (a dispatcher started with "
                f"--allow-takeover lets a resume replace it at once)" if same_run else
                f"another train() call; wait for it to finish (or for it to time out after "
                f"{limit:.0f} s if its client died)"))

    def open_session(self, config):
        """Open a training session (``config``: a :class:`~gensim_distw2v.protocol.SessionConfig`): an
        :class:`~gensim_distw2v.protocol.Opened`, the session and the shards that hold the weights, in
        order (shard ``p`` of ``P`` holds rows ``p, p + P, ...``: :mod:`gensim_distw2v.core.layout`).

        Raises
        ------
        VersionMismatch, Full, NoShard
            Another version, arrays beyond the dispatcher's limit, no shard registered.
        NoCheckpoint, OtherRun, CheckpointUnreadable
            A resume with nothing to resume from, from another run, or from an unreadable checkpoint.
        Busy
            Another session is running (of this run too, unless the dispatcher allows takeovers: a
            member holding the key must not take over a live client's run).
        """
        cluster = self.cluster
        try:
            check_versions(config.versions, "the client")
        except ValueError as err:
            raise errors.VersionMismatch(str(err)) from None
        held = sum(math.prod(int(n) for n in a["shape"]) * np.dtype(a["dtype"]).itemsize  # (Python ints: no overflow)
                   for name, a in config.arrays.items() if name not in protocol.WEIGHTS)
        limit = cluster.limits.max_model_bytes
        if held > limit:
            raise errors.Full(f"open_session: the session's arrays need {held / 2 ** 20:.0f} MiB on the dispatcher, "
                              f"more than its limit of {limit / 2 ** 20:.0f} MiB; start the dispatcher with "
                              f"--max-model-bytes N to raise it (default: half the machine's memory)")
        spec = config.checkpoint
        if spec is not None and spec.resume:  # a live session of this run may be writing its first checkpoint:
            with cluster.cond:  # wait for it (a resume found none, and the fresh start after it an unfinished
                self._refuse_while_busy(spec)  # run's checkpoint); a fresh start reads the folder first, as before
        # the checkpoint folder is read before the lock is taken (a slow or hostile folder holds up this call only)
        run, point = (None, None) if spec is None else start_point(spec, cluster.key)
        store = None if spec is None else CheckpointStore(spec.dir, "dispatcher", keep=2, key=cluster.key)
        with cluster.cond:
            sid = uuid.uuid4().hex
            run = run or sid
            if self._refuse_while_busy(spec):
                logger.warning("session %s replaced: a client resumes its run from %s (--allow-takeover)",
                               cluster.session.id, spec.dir)
            if not cluster.shards:
                raise errors.NoShard("no parameter shard is registered with the dispatcher: start one (on each "
                                     "worker node) with: python -m gensim_distw2v.shard")
            if point is not None and config.corpus_file is not None and point.range_bytes:
                # the ranges are cut as before the resume (their length follows the workers' number):
                # the indices of the trained ones mean the same bytes
                config.corpus_file.range_bytes = point.range_bytes
            cluster.end_session()
            session = cluster.session = Session(sid, config, [[name, cluster.shards[name].uri]
                                                              for name in sorted(cluster.shards)])
            cluster.meter.mark(sid)
            cluster.history = book.History()
            session.token = secrets.token_urlsafe(24)  # the workers have it too
            session.owner = secrets.token_urlsafe(24)  # the client's alone
            session.client_seen = now = time.monotonic()
            if spec is not None:
                session.run = run
                session.checkpoints = SessionCheckpoints(spec, run, len(session.shards), now, store,
                                                         committed=point.checkpoint if point else 0,
                                                         mark=session.trained_mark())
            if point is not None:
                session.restore(point)
                session.checkpoints.last_mark = session.trained_mark()
                logger.info("session %s resumes run %s from checkpoint %i in %s: epoch %i, %i jobs of it trained, "
                            "%i raw words in all", sid, run, point.checkpoint, spec.dir, point.epoch,
                            point.done_below - point.first_job + len(point.done_jobs),
                            sum(counts.raw_words for counts in point.epochs.values()))
            logger.info("session %s opened on %i shards: %i words x %i dimensions, sg=%i hs=%i negative=%i, merge=%s "
                        "(damp: %i syn0 / %i syn1neg / %i syn1 rows), sync_words=%i (rows after %i every %i rounds)",
                        sid, len(session.shards), session.vocab_size, session.vector_size, config.params.sg,
                        config.params.hs, config.params.negative, config.settings.merge, config.damp_rows["syn0"],
                        config.damp_rows["syn1neg"], config.damp_rows.get("syn1", 0), config.settings.sync_words,
                        config.hot_rows, config.settings.cold_every)
            cluster.beats.notify_all()  # the shards hear at once who may open the session on them
            return protocol.Opened(session=sid, shards=session.shards, token=session.token, resumed=point,
                                   owner=session.owner)

    def upload(self, request):
        """Rows ``[lo, lo + len)`` of a static array (in order, in chunks), with the session's token."""
        with self.cluster.cond:
            session = self._touch(request.session, (UPLOADING,))
            target = session.arrays.get(request.name)
            if target is None:
                raise errors.BadRequest(f"upload: session has no array {request.name!r}" + (
                    " here: the weights go to the session's shards" if request.name in protocol.WEIGHTS else ""))
            session.receive(request.name, request.lo, protocol.unpack_array(
                request.array, f"upload of {request.name}", target.dtype.name, ndim=target.ndim,
                shape=(None,) + target.shape[1:]))

    def start(self, request):
        """All arrays are uploaded: check them and start handing out jobs. Returns the workers
        registered now (they join within a heartbeat)."""
        from gensim_distw2v import build

        build.check()
        from gensim_distw2v._inner import JobTrainer  # the kernel validates the arrays once, here too

        cluster = self.cluster
        with cluster.cond:
            session = cluster.session_of(request.session, (UPLOADING,))
            arrays = {name: a for name, a in session.arrays.items() if name not in ("vocab_bytes", "vocab_offsets")}
            if not session.config.params.sample:
                arrays.pop("sample_int", None)
            # the weights' shapes checked against the static arrays (np.zeros maps lazily: no memory)
            arrays.update({name: np.zeros(spec["shape"], np.float32) for name, spec in session.config.arrays.items()
                           if name in protocol.WEIGHTS})
            JobTrainer(**session.config.params.kernel(), **arrays)
            session.start()
            session.client_seen = session.started_at = time.monotonic()
            cluster.wake()
            return len(cluster.workers)

    # ------------------------------------------------------------------ jobs, epochs, progress
    def put_jobs(self, request):
        """Queue jobs; waits up to a second while the queue is full, then takes the whole call or
        nothing: how many were queued (0: the client sends them again).

        The queue holds at most its limit (``max_queue_jobs`` per live trainer thread) plus one
        call's jobs (at most :data:`MAX_JOBS_PER_CALL`): no job crosses the wire twice.
        """
        cluster, sid, jobs = self.cluster, request.session, request.jobs
        if len(jobs) > MAX_JOBS_PER_CALL:
            raise errors.BadRequest(f"put_jobs: {len(jobs)} jobs in one call, at most {MAX_JOBS_PER_CALL}")
        with cluster.cond:
            session = cluster.session_of(sid)
            session.put_jobs([])  # refused here already if the session trains from a file
        try:
            checked = [protocol.Job.from_wire(msg, vocab_size=session.vocab_size) for msg in jobs]
        except ValueError as err:
            raise errors.BadRequest(str(err)) from None
        # with checkpoints, the jobs' CRC-32 (a resume checks its corpus by them), outside the lock
        crcs = [zlib.crc32(job.indices) for job in checked] if session.config.checkpoint is not None else None
        with cluster.cond:
            deadline = time.monotonic() + 1.0
            limit = max(8, cluster.limits.max_queue_jobs * cluster.live_threads())

            def full():
                return session.queued() >= limit or session.queued_bytes() >= MAX_QUEUE_BYTES
            while full() and time.monotonic() < deadline and session is cluster.session:
                cluster.cond.wait(deadline - time.monotonic())
            session = self._touch(sid)
            if full():
                return 0
            session.put_jobs(checked, crcs)
            cluster.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake
            return len(checked)

    def end_epoch(self, request):
        """The client has put every job of the epoch: workers flush once they run out of jobs."""
        with self.cluster.cond:
            self._touch(request.session).end_epoch(request.epoch)
            self.cluster.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake

    def open_file_epoch(self, request):
        """Train an epoch over the session's corpus file: its byte ranges are handed out from now on.
        Returns the number of ranges of the epoch."""
        with self.cluster.cond:
            ranges = self._touch(request.session).open_file_epoch(request.epoch)
            self.cluster.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake
            return ranges

    def progress(self, request):
        """A session's progress, state and failure: a :class:`~gensim_distw2v.protocol.Progress`. With
        the session's token (its client's call) it counts as word from the client (a stranger's
        polling keeps no dead session alive); with ``nodes``, every node's metrics too; with ``epoch``
        and ``wait``, once that epoch is done, the session no longer runs, or the wait is over."""
        cluster = self.cluster
        deadline = time.monotonic() + request.wait
        with cluster.cond:
            session = cluster.session_of(request.session, (RUNNING, FAILED))
            while request.wait and session.state == RUNNING and request.epoch in session.counts \
                    and not session.epoch_done(request.epoch):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                cluster.cond.wait(left)  # (round reports, flushes and failures wake it)
                session = cluster.session_of(request.session, (RUNNING, FAILED))
            now = time.monotonic()
            if request.token is not None:  # (checked: the table's "watcher")
                session.client_seen = now
            checkpoints = None if session.checkpoints is None else session.checkpoints.status(session.trained_mark())
            return protocol.Progress(
                state=session.state, failure=session.failure,
                epochs=session.epochs(), queued=session.queued(), in_flight=session.in_flight_count(),
                loss=session.loss, merges=session.merges,
                workers={name: m.counts for name, m in cluster.workers.items() if name in session.ranks},
                flushed=session.all_flushed(), file_checks=dict(session.file_checks),
                file_waiting=session.file_waiting(cluster.workers), checkpoints=checkpoints,
                nodes=overview.nodes(cluster, session, now) if request.nodes else None)

    def checkpoint(self, request):
        """The client asks for a checkpoint now (with its owner secret): its number."""
        return self.checkpointing.ask(request.session)

    # ------------------------------------------------------------------ the end
    def download(self, request):
        """Rows ``[lo, hi)`` of a session's static array, as an array message (the weights are on the shards)."""
        name, lo, hi = request.name, request.lo, request.hi
        with self.cluster.cond:
            session = self.cluster.session_of(request.session, (UPLOADING, RUNNING))
            array = session.arrays.get(name)
            if array is None:
                raise errors.BadRequest(f"download: session has no array {name!r}" + (
                    " here: the weights are on the session's shards" if name in protocol.WEIGHTS else ""))
            if not 0 <= lo <= hi <= len(array):
                raise errors.BadRequest(f"download: rows [{lo}, {hi}) outside [0, {len(array)})")
            if array.nbytes // max(1, len(array)) * (hi - lo) > MAX_ARRAY_BYTES:
                raise errors.BadRequest("download: too many rows in one chunk")
            return protocol.pack_array(array[lo:hi].copy())

    def close(self, request):
        """End a session (the client has its weights, or gave up); workers drop their replicas. Only
        with the session's token; a session not here is no error."""
        cluster = self.cluster
        with cluster.cond:
            if cluster.session is not None and cluster.session.id == request.session:
                logger.info("session %s closed (%s)", request.session, cluster.session.state)
                cluster.end_session()
