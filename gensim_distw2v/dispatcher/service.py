"""The dispatcher: coordination only: membership, sessions, the job queue, epochs, progress.

Start it once per cluster, after the name server::

    python -m Pyro4.naming -n 127.0.0.1 -p 9090
    python -m gensim_distw2v.dispatcher --ns-host 127.0.0.1 --ns-port 9090

How it works:

1. It registers as ``gensim_distw2v.dispatcher`` in the name server and waits. Workers and
   parameter shards (:mod:`gensim_distw2v.shard`) find it there (they retry until it exists) and
   say :meth:`Dispatcher.hello` / :meth:`Dispatcher.shard_hello`.
2. A client opens a session (:meth:`Dispatcher.open_session`, which names the shards that will
   hold the weights), uploads the static arrays here and the weights to the shards, and starts
   it. Every live worker joins: it fetches the config and the static arrays here, the weights
   from the shards.
3. The client streams jobs in (:meth:`Dispatcher.put_jobs`, which pushes back when the queue
   is full), or, training from a shared corpus file, opens each epoch (:meth:`Dispatcher.open_file_epoch`)
   and the dispatcher cuts the file into byte ranges as workers ask for work, once each worker
   has shown it sees the client's file (:meth:`Dispatcher.file_check`); workers pull jobs
   (:meth:`Dispatcher.get_jobs`), merge their updates with every shard every ``sync_words``
   words, and report each round here (:meth:`Dispatcher.round_done`): a job counts as trained
   only once its updates are merged. No weights pass through the dispatcher.
4. A worker that misses heartbeats for ``worker_timeout`` seconds is dropped; its jobs go back
   to the queue. A worker that starts during a session joins it. A shard of the session that
   is lost fails the session (the client's error names it and how to restart it).
5. The client polls :meth:`Dispatcher.progress`, downloads the final weights and closes the
   session; the dispatcher keeps serving the next one. A client silent for ``client_timeout``
   seconds loses its session.
6. With ``checkpoint_dir`` (the session config's :class:`gensim_distw2v.protocol.CheckpointSpec`), the
   session is checkpointed every ``checkpoint_every`` seconds and at every epoch end the client
   asks for (:meth:`Dispatcher.checkpoint`): the dispatcher notes where the session would go on,
   the shards copy and write their rows (ordered in their heartbeat replies, reported by
   :meth:`Dispatcher.shard_checkpoint`), and the dispatcher's record, written last, commits it
   (:class:`gensim_distw2v.io.store.SessionCheckpoints`). A session opened to resume (after this
   process, a shard or the client died) starts from the newest committed checkpoint.
"""
import logging
import math
import re
import secrets
import threading
import time
import uuid
import zlib

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.io import meter, transport
from gensim_distw2v.io.meter import model_bytes_limit
from gensim_distw2v.versions import check_versions, versions
from gensim_distw2v.core import book
from gensim_distw2v.io.store import CheckpointError, CheckpointStore, identity_differences
from gensim_distw2v.core.checkpoints import SessionCheckpoints
from gensim_distw2v.core.session import Session

logger = logging.getLogger(__name__)

__all__ = ["Dispatcher", "JOB_DEADLINE_ROUNDS", "MAX_JOBS_PER_CALL", "MAX_MEMBERS", "MAX_QUEUE_BYTES", "check_member"]

# jobs one put_jobs call may carry (the client sends 8): the queue's overshoot beyond its limit
MAX_JOBS_PER_CALL = 64


MAX_MEMBERS = 1024  # workers registered at once
MAX_QUEUE_BYTES = 256 * 1024 * 1024  # jobs' bytes waiting in the queue, whatever the threads workers claim
JOB_DEADLINE_ROUNDS = 10  # a worker holding jobs without merging for this many rounds (typical length) is dropped
MEMBER_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # what follows a worker's or shard's prefix
MAX_URI = 512
NAME_HELD_FOR = 6.0  # seconds: a live worker's name is not given to another connection (long-polls last <= 5 s)


def check_member(name, uri, prefix, what):
    """Refuse a worker's or shard's name (``prefix`` and 1 to 64 of ``[A-Za-z0-9_.-]``) or URI that is
    not one, or is absurdly long."""
    if not isinstance(name, str) or not name.startswith(prefix) or not MEMBER_ID.fullmatch(name[len(prefix):]):
        raise ValueError(f"{what}: name must be {prefix} and 1 to 64 letters, digits, '_', '.' or '-'")
    if not isinstance(uri, str) or not uri.startswith("PYRO:") or len(uri) > MAX_URI:
        raise ValueError(f"{what}: uri must be a Pyro URI (PYRO:...) of at most {MAX_URI} characters")


def _node_metrics(msg, role, what):
    """A heartbeat's metrics (a :class:`gensim_distw2v.protocol.NodeMetrics`, or None), checked to be of ``role``."""
    if msg is None:
        return None
    report = protocol.NodeMetrics.from_wire(msg)
    if report.role != role:
        raise ValueError(f"{what}: metrics must be a {role}'s, got role {report.role!r}")
    return report


class _Member:
    """What the dispatcher knows of one worker."""

    def __init__(self, name, uri, threads):
        self.name, self.uri, self.threads = name, uri, threads
        self.last_seen = time.monotonic()
        self.connection = None  # the connection its hello and heartbeats come in on
        self.session_id = None  # the session its counters below are of
        self.count_session(None)

    def count_session(self, sid):
        """Start this worker's traffic and work counters afresh for session ``sid``."""
        self.session_id = sid
        self.counts = protocol.WorkerCounts()


class _ShardMember:
    """What the dispatcher knows of one parameter shard."""

    def __init__(self, name, uri):
        self.name, self.uri = name, uri
        self.last_seen = time.monotonic()
        self.connection = None  # the connection its heartbeats come in on


class Dispatcher:
    """Coordinates a cluster: worker and shard membership, the session, its job queue (or byte
    ranges), epochs and progress. The weights are on the shards.

    Parameters
    ----------
    worker_timeout : float
        Seconds without a heartbeat after which a worker is dropped and its jobs re-queued.
    client_timeout : float
        Seconds without a call from the client after which its session is aborted.
    max_queue_jobs : int
        Jobs held in the queue at most (per worker thread, at least 8 in all, and at most
        :data:`MAX_QUEUE_BYTES` of them): beyond that :meth:`put_jobs` makes the client wait.
    job_deadline : float
        A worker that holds jobs without merging for longer than this, and than
        :data:`JOB_DEADLINE_ROUNDS` typical rounds, is dropped and its jobs re-queued.
    max_model_bytes : int, optional
        The largest session's arrays this dispatcher holds (default: half this machine's memory).
    """

    def __init__(self, worker_timeout=30.0, client_timeout=120.0, max_queue_jobs=4, job_deadline=120.0,
                 max_model_bytes=None):
        self.worker_timeout, self.client_timeout = worker_timeout, client_timeout
        self.max_queue_jobs, self.job_deadline = max_queue_jobs, job_deadline
        self.max_model_bytes = model_bytes_limit(max_model_bytes)
        # one lock, two conditions: ``cond`` for jobs, rounds and the client's waits; ``beats`` for the
        # heartbeats' long polls (K workers and P shards), which only a change of members or session
        # ends: a merge round's report wakes the former only (waking every heartbeat with every round
        # cost the dispatcher CPU per round in proportion to K)
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        self.beats = threading.Condition(lock)
        self.members = {}
        self.shards = {}  # name -> _ShardMember
        self.session = None
        self.meter = meter.Meter("dispatcher")  # this process's own CPU, memory and traffic
        self.book = book.NodeBook()  # the workers' and shards' latest metrics (on their heartbeats)
        self.history = None  # the session's words, rate and loss over time (a book.History)
        self.uri = None  # once served (the status page shows it)
        self.stopped = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="dispatcher-monitor", daemon=True)
        self._monitor.start()

    # ------------------------------------------------------------------ helpers (not remote)
    def _session(self, sid, states=("running",)):
        if self.session is None or self.session.id != sid:
            raise ValueError(f"unknown or closed session {sid!r} (it may have been aborted or replaced)")
        self.session.expect(*states)
        return self.session

    def _member(self, name, sid=None):
        member = self.members.get(name)
        if member is None:
            raise ValueError(f"unknown worker {name!r}: say hello first (it may have been dropped after a timeout)")
        member.last_seen = time.monotonic()
        if sid is not None and (self.session is None or name not in self.session.ranks):
            raise ValueError(f"worker {name} is not a member of session {sid}: join it first")
        return member

    def _rank(self, name):
        """A worker's rank in the current session, or None."""
        return None if self.session is None else self.session.ranks.get(name)

    def _live_threads(self):
        return sum(m.threads for name, m in self.members.items() if self._rank(name) is not None) or 1

    def _drop(self, name, reason):
        """Remove a worker; its unmerged jobs go back to the front of the queue (caller holds the lock)."""
        member = self.members.pop(name, None)
        if member is None:
            return
        self.book.forget(name)
        ordered = self.session is not None and self.session.ordered and name in self.session.ranks
        requeued = self.session.release(name) if self.session is not None else 0
        logger.warning("worker %s lost (%s); %i unmerged jobs go back to the queue; %i workers left",
                       name, reason, requeued, len(self.members))
        if ordered:
            logger.warning("session %s: sync='bsp' without worker %s: its rounds are no longer taken in turn, the "
                           "run goes on as with sync='ssp' (it will not be reproducible)", self.session.id, name)
        self._wake()

    def _available(self, session):
        """Whether any registered worker has not quit ``session`` (caller holds the lock)."""
        return any(name not in session.quit for name in self.members)

    def _end_session(self):
        """No session any more (caller holds the lock)."""
        if self.session is not None:
            self.session.close()
        self.session = None
        self._wake()

    def _drop_shard(self, name, reason):
        """Remove a shard; a session it holds rows of cannot go on (caller holds the lock)."""
        shard = self.shards.pop(name, None)
        if shard is None:
            return
        self.book.forget(name)
        session = self.session
        if session is not None and session.lose_shard(name, reason):
            logger.error("shard %s of session %s lost (%s): the session cannot go on; restart the shard with: "
                         "python -m gensim_distw2v.shard", name, session.id, reason)
            if session.checkpoints is not None and session.checkpoints.current is not None:
                session.checkpoints.fail(f"shard {name} was lost", time.monotonic())
        else:
            logger.warning("shard %s lost (%s); %i shards left", name, reason, len(self.shards))
        self._wake()

    def connection_closed(self, connection):
        """A client connection closed: if it carried a worker's or a shard's heartbeats, that
        process is gone (it died, or it is reconnecting and will say hello again as a new one)."""
        with self.cond:
            for name, member in list(self.members.items()):
                if member.connection is connection:
                    self._drop(name, "its heartbeat connection closed")
            for name, shard in list(self.shards.items()):
                if shard.connection is connection:
                    self._drop_shard(name, "its heartbeat connection closed")

    def _watch(self):
        """Drop silent workers; abort sessions of silent clients."""
        while not self.stopped.wait(0.5):
            now = time.monotonic()
            with self.cond:
                for name, member in list(self.members.items()):
                    if now - member.last_seen > self.worker_timeout:
                        self._drop(name, f"no heartbeat for {now - member.last_seen:.1f} s")
                for name, shard in list(self.shards.items()):
                    if now - shard.last_seen > self.worker_timeout:
                        self._drop_shard(name, f"no heartbeat for {now - shard.last_seen:.1f} s")
                session = self.session
                if session is not None and session.state in ("uploading", "running"):
                    if now - session.client_seen > self.client_timeout:
                        logger.warning("session %s aborted: no word from its client for %.0f s",
                                       session.id, now - session.client_seen)
                        self._end_session()
                    elif session.state == "running":
                        self._sample_history(session, now)
                        session.no_workers_since = None if self._available(session) else \
                            (session.no_workers_since or now)
                        self._check_order(session, now)
                        self._check_deadlines(session, now)
                        checkpoints = session.checkpoints
                        if checkpoints is not None and checkpoints.expired(now):
                            checkpoints.fail(f"checkpoint {checkpoints.sequence} was not complete within "
                                             f"{checkpoints.deadline():.0f} s", now)
                            logger.error("session %s: %s; training goes on, the last complete checkpoint is %i",
                                         session.id, checkpoints.state.error, checkpoints.state.committed)
                            self.cond.notify_all()
                        if checkpoints is not None and not session.lost_shards and checkpoints.due(now, session.trained_mark()):
                            self._begin_checkpoint(session, now)

    def _sample_history(self, session, now):
        """A point of the session's history (caller holds the lock)."""
        if self.history is not None and session.started_at is not None:
            words = sum(counts.effective_words for counts in session.counts.values())
            self.history.add(now - session.started_at, words, session.loss if session.config.compute_loss else None)

    def _check_deadlines(self, session, now):
        """Drop a worker that holds jobs without merging them for longer than the deadline: the
        larger of ``job_deadline`` and :data:`JOB_DEADLINE_ROUNDS` typical rounds (with
        ``sync='local'``, whose rounds are epochs, none until a round has been seen; caller holds
        the lock)."""
        if session.round_gap is None and session.config.settings.sync == "local":
            return
        limit = max(self.job_deadline, JOB_DEADLINE_ROUNDS * (session.round_gap or 0.0))
        for name, jobs in list(session.in_flight.items()):
            held = now - session.last_round.get(name, now)
            if jobs and held > limit:
                self._drop(name, f"it held {len(jobs)} jobs for {held:.0f} s without merging them (the deadline: "
                                 f"{limit:.0f} s, the larger of --job-deadline and {JOB_DEADLINE_ROUNDS} rounds)")

    def _check_order(self, session, now):
        """``bsp``: a rank no worker claimed within ``cluster_timeout`` of the start ends the order
        of rounds (its jobs would wait for ever; caller holds the lock)."""
        unclaimed = session.unclaimed()
        if unclaimed and now - session.started_at > session.config.settings.cluster_timeout:
            session.end_order()
            logger.warning("session %s: sync='bsp' for %i workers, but no worker joined as rank %s within %.0f s: "
                           "rounds are no longer taken in turn, the run goes on as with sync='ssp' (it will not be "
                           "reproducible)", session.id, session.config.workers, unclaimed,
                           session.config.settings.cluster_timeout)
            self.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake

    # ------------------------------------------------------------------ cluster
    @transport.expose
    def status(self):
        """The cluster as the dispatcher sees it.

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.Status`.
        """
        now = time.monotonic()
        with self.cond:
            session = self.session
            return protocol.Status(
                versions=versions(),
                workers={name: protocol.MemberStatus(
                    threads=m.threads, rank=self._rank(name), silent=now - m.last_seen, words=m.counts.words,
                    in_flight=len(session.in_flight.get(name, ())) if session else 0)
                    for name, m in self.members.items()},
                shards={name: protocol.ShardMemberStatus(uri=s.uri, silent=now - s.last_seen)
                        for name, s in self.shards.items()},
                session=None if session is None else protocol.SessionState(id=session.id, state=session.state),
            ).to_wire()

    @transport.expose
    def hello(self, name, uri, info):
        """A worker announces itself (at start, and again after losing the dispatcher).

        Parameters
        ----------
        name : str
            Its registration name (``gensim_distw2v.worker.<id>``).
        uri : str
            Its Pyro URI.
        info : dict
            A :class:`gensim_distw2v.protocol.Hello`.

        Raises
        ------
        ValueError
            Versions differ from the dispatcher's, or the message is malformed.
        """
        check_member(name, uri, transport.WORKER_PREFIX, "malformed hello")
        info = protocol.Hello.from_wire(info)
        check_versions(info.versions, f"worker {name}")
        threads = info.threads
        with self.cond:
            member = self.members.get(name)
            if member is not None and member.connection is not transport.caller() \
                    and time.monotonic() - member.last_seen < NAME_HELD_FOR:
                raise ValueError(f"hello: worker {name} is registered and alive on another connection (heard from "
                                 f"{time.monotonic() - member.last_seen:.1f} s ago): a name is its first holder's "
                                 f"until that one is silent for {NAME_HELD_FOR:g} s or its connection closes")
            if member is not None:
                self._drop(name, "it said hello again (restarted, or back after a network cut)")
            elif len(self.members) >= MAX_MEMBERS:
                raise ValueError(f"hello: the dispatcher has {MAX_MEMBERS} workers, the most it takes")
            self.members[name] = _Member(name, uri, threads)
            self.members[name].connection = transport.caller()
            logger.info("worker %s registered at %s with %i threads (%i workers)", name, uri, threads,
                        len(self.members))
            self._wake()
        return {"ok": True}

    @transport.expose
    def heartbeat(self, name, known=None, wait=0.0, metrics=None):
        """A worker is alive; returns the session it should be in.

        Parameters
        ----------
        name : str
            The worker.
        known : str, optional
            The session the worker is in (or None).
        wait : float, optional
            Wait up to this many seconds (at most 5) for the session to differ from ``known``.
        metrics : dict, optional
            The worker's :class:`gensim_distw2v.protocol.NodeMetrics` (role ``worker``).

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.Beat`: the session to be in; ``hello`` if the dispatcher does not know the
            worker (it restarted, or dropped the worker).
        """
        if not isinstance(name, str) or not name.startswith(transport.WORKER_PREFIX):
            raise ValueError(f"heartbeat: name must be a str starting with {transport.WORKER_PREFIX!r}")
        if known is not None and not isinstance(known, str):
            raise ValueError("heartbeat: known must be a session id (str) or None")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 5:
            raise ValueError("heartbeat: wait must be a number of seconds in [0, 5]")
        report = _node_metrics(metrics, "worker", "heartbeat")
        deadline = time.monotonic() + wait
        with self.cond:
            if report is not None and name in self.members:
                self.book.update(name, report)
            while True:
                member = self.members.get(name)
                if member is None:
                    return protocol.Beat(session=None, hello=True).to_wire()
                member.last_seen = time.monotonic()
                member.connection = transport.caller()
                session = self.session
                current = session.id if session is not None and session.state == "running" else None
                remaining = deadline - time.monotonic()
                if current != known or remaining <= 0:
                    return protocol.Beat(session=current, hello=False).to_wire()
                self.beats.wait(remaining)

    @transport.expose
    def leave(self, name):
        """A worker shuts down cleanly."""
        with self.cond:
            if name in self.members:
                self._drop(name, "it shut down")

    @transport.expose
    def quit_session(self, name, sid, reason):
        """The session failed on a worker (it logged why): it leaves the session for good, its
        unmerged jobs go back to the queue, and the client learns why (:meth:`progress`, ``quit``).
        The worker stays registered for later sessions.

        Parameters
        ----------
        name, sid : str
            The worker and the session.
        reason : str
            What went wrong, for the client's error message.
        """
        if not isinstance(reason, str):
            raise ValueError("quit_session: reason must be a str")
        with self.cond:
            session = self._session(sid)
            self._member(name)
            requeued = session.quit_worker(name, reason[:1000])
            logger.warning("worker %s quit session %s (%s); %i unmerged jobs go back to the queue", name, sid,
                           reason[:1000], requeued)
            self._wake()

    # ------------------------------------------------------------------ shards
    @transport.expose
    def shard_hello(self, name, uri, info):
        """A parameter shard announces itself (at start, and again after losing the dispatcher).

        Parameters
        ----------
        name : str
            Its registration name (``gensim_distw2v.shard.<id>``).
        uri : str
            Its Pyro URI.
        info : dict
            A :class:`gensim_distw2v.protocol.ShardHello`.
        """
        check_member(name, uri, transport.SHARD_PREFIX, "malformed shard hello")
        check_versions(protocol.ShardHello.from_wire(info).versions, f"shard {name}")
        with self.cond:
            if name not in self.shards and len(self.shards) >= MAX_MEMBERS:
                raise ValueError(f"shard hello: the dispatcher has {MAX_MEMBERS} shards, the most it takes")
            if name in self.shards:
                self._drop_shard(name, "it said hello again (restarted, or back after a network cut)")
            self.shards[name] = _ShardMember(name, uri)
            self.shards[name].connection = transport.caller()
            logger.info("shard %s registered at %s (%i shards)", name, uri, len(self.shards))
            self._wake()
        return {"ok": True}

    @transport.expose
    def shard_beat(self, name, known=None, wait=0.0, poisoned=None, metrics=None):
        """A shard is alive; returns the session it should hold and that session's workers.

        Parameters
        ----------
        name : str
            The shard.
        known : str, optional
            The session the shard holds (or None).
        wait : float, optional
            Wait up to this many seconds (at most 5) for the session to differ from ``known``.
        poisoned : dict, optional
            ``{rank (str): why}``: workers of session ``known`` whose merges the shard refused as
            beyond the session's bound; the session fails, naming them.
        metrics : dict, optional
            The shard's :class:`gensim_distw2v.protocol.NodeMetrics` (role ``shard``).

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.ShardBeat`.
        """
        if poisoned is not None and not (isinstance(poisoned, dict) and len(poisoned) <= 4096 and all(
                isinstance(k, str) and k.isdigit() and len(k) < 12 and isinstance(v, str) and len(v) <= 4096
                for k, v in poisoned.items())):
            raise ValueError("shard_beat: poisoned must be a dict of at most 4096 {rank (decimal str): why (str)}")
        if not isinstance(name, str) or not name.startswith(transport.SHARD_PREFIX):
            raise ValueError(f"shard_beat: name must be a str starting with {transport.SHARD_PREFIX!r}")
        if known is not None and not isinstance(known, str):
            raise ValueError("shard_beat: known must be a session id (str) or None")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 5:
            raise ValueError("shard_beat: wait must be a number of seconds in [0, 5]")
        report = _node_metrics(metrics, "shard", "shard_beat")
        deadline = time.monotonic() + wait
        with self.cond:
            if report is not None and name in self.shards:
                self.book.update(name, report)
            if poisoned and self.session is not None and self.session.id == known and name in self.shards:
                self._poisoned(self.session, name, poisoned)
            while True:
                shard = self.shards.get(name)
                if shard is None:
                    return protocol.ShardBeat(session=None, ranks=[], next_rank=0, hello=True).to_wire()
                shard.last_seen = time.monotonic()
                shard.connection = transport.caller()
                session = self.session
                remaining = deadline - time.monotonic()
                order = None
                index = -1 if session is None else self._shard_index(session, name)
                if index >= 0 and session.checkpoints is not None and session.state == "running":
                    order = session.checkpoints.order(index)
                if (session.id if session else None) != known or remaining <= 0 or order is not None:
                    break
                self.beats.wait(remaining)
            if session is None:
                return protocol.ShardBeat(session=None, ranks=[], next_rank=0, hello=False).to_wire()
            return protocol.ShardBeat(session=session.id, next_rank=session.next_rank, hello=False,
                                  ranks=sorted(session.ranks.values()), checkpoint=order).to_wire()

    def _poisoned(self, session, shard, poisoned):
        """A shard refused merges of these ranks as poison: the session fails, naming the workers (caller
        holds the lock); they leave it, their jobs go back to the queue."""
        for rank, why in poisoned.items():
            worker = session.rank_names.get(int(rank), f"rank {rank}")
            if worker in session.poisoned:
                continue
            session.poisoned[worker] = f"shard {shard} refused its merge: {why}"
            logger.error("session %s: worker %s sent a merge beyond the session's bound (%s); the session fails",
                         session.id, worker, why)
            if worker in session.ranks:
                session.quit_worker(worker, session.poisoned[worker])
        self._wake()

    @transport.expose
    def shard_leave(self, name):
        """A shard shuts down cleanly."""
        with self.cond:
            if name in self.shards:
                self._drop_shard(name, "it shut down")

    # ------------------------------------------------------------------ client: session set-up
    @transport.expose
    def open_session(self, config):
        """Open a training session.

        Parameters
        ----------
        config : dict
            A :class:`gensim_distw2v.protocol.SessionConfig`.

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.Opened`: the session and the shards that hold the weights, in
            order (shard ``p`` of ``P`` holds rows ``p, p + P, ...``: :mod:`gensim_distw2v.core.layout`).

        Raises
        ------
        ValueError
            Malformed config or version mismatch.
        RuntimeError
            Another client's session is running, or no shard is registered.
        """
        config = protocol.SessionConfig.from_wire(config)
        check_versions(config.versions, "the client")
        held = sum(math.prod(int(n) for n in a["shape"]) * np.dtype(a["dtype"]).itemsize  # (Python ints: no overflow)
                   for name, a in config.arrays.items() if name not in protocol.WEIGHTS)
        if held > self.max_model_bytes:
            raise ValueError(f"open_session: the session's arrays need {held / 2 ** 20:.0f} MiB on the dispatcher, more "
                             f"than its limit of {self.max_model_bytes / 2 ** 20:.0f} MiB; start the dispatcher with "
                             f"--max-model-bytes N to raise it (default: half the machine's memory)")
        spec = config.checkpoint
        with self.cond:
            sid = uuid.uuid4().hex
            run, point = (sid, None) if spec is None else self._checkpoint_start(spec)
            current = self.session
            if current is not None and current.state in ("uploading", "running"):
                if spec is not None and spec.resume and current.config.checkpoint is not None \
                        and current.config.checkpoint.dir == spec.dir:
                    logger.warning("session %s replaced: a client resumes its run from %s (its own client is gone)",
                                   current.id, spec.dir)
                else:
                    raise RuntimeError(
                        f"the dispatcher is busy with session {current.id} of another train() call; wait for it "
                        f"to finish (or for it to time out after {self.client_timeout:.0f} s if its client died)")
            if not self.shards:
                raise RuntimeError("no parameter shard is registered with the dispatcher: start one (on each worker "
                                   "node) with: python -m gensim_distw2v.shard")
            if point is not None and config.corpus_file is not None and point.range_bytes:
                # the ranges are cut as before the resume (their length follows the workers' number):
                # the indices of the trained ones mean the same bytes
                config.corpus_file.range_bytes = point.range_bytes
            self._end_session()
            self.session = Session(sid, config, [[name, self.shards[name].uri] for name in sorted(self.shards)])
            self.meter.mark(sid)
            self.history = book.History()
            self.session.token = secrets.token_urlsafe(24)
            self.session.client_seen = now = time.monotonic()
            if spec is not None:
                self.session.run = run
                self.session.checkpoints = SessionCheckpoints(spec, run, len(self.session.shards), now,
                                                              committed=point.checkpoint if point else 0,
                                                              mark=self.session.trained_mark())
            if point is not None:
                self.session.restore(point)
                self.session.checkpoints.last_mark = self.session.trained_mark()
                logger.info("session %s resumes run %s from checkpoint %i in %s: epoch %i, %i jobs of it trained, "
                            "%i raw words in all", sid, run, point.checkpoint, spec.dir, point.epoch,
                            point.done_below - point.first_job + len(point.done_jobs),
                            sum(counts.raw_words for counts in point.epochs.values()))
            logger.info("session %s opened on %i shards: %i words x %i dimensions, sg=%i hs=%i negative=%i, merge=%s "
                        "(damp: %i syn0 / %i syn1neg / %i syn1 rows), sync_words=%i (rows after %i every %i rounds)",
                        self.session.id, len(self.session.shards), self.session.vocab_size,
                        self.session.vector_size, config.params.sg, config.params.hs, config.params.negative,
                        config.settings.merge, config.damp_rows["syn0"], config.damp_rows["syn1neg"],
                        config.damp_rows.get("syn1", 0),
                        config.settings.sync_words, config.hot_rows, config.settings.cold_every)
            return protocol.Opened(session=self.session.id, shards=self.session.shards, token=self.session.token,
                               resumed=point).to_wire()

    @staticmethod
    def _checkpoint_start(spec):
        """A session with checkpoints: ``(run id, resume point or None)``. Resuming, the newest
        committed checkpoint in the folder (numbered below ``spec.below``), checked to be of the
        same run; starting afresh, a folder without an unfinished run.

        Raises
        ------
        ValueError
            Nothing to resume, a run with another identity (naming what differs), a finished
            run, or (afresh) an unfinished run in the folder.
        """
        try:
            found = CheckpointStore(spec.dir, "dispatcher").latest(below=spec.below)
        except OSError as err:
            raise ValueError(f"checkpoint_dir {spec.dir}: cannot use it ({err})") from None
        if not spec.resume:
            if found is not None and not found[1].get("finished"):
                raise ValueError(
                    f"checkpoint_dir {spec.dir} holds checkpoint {found[0]} of an unfinished run: to go on with it, "
                    f"pass resume_from={spec.dir!r} to train() (--resume on the command line); to start afresh, "
                    f"give an empty folder (or delete that one)")
            return uuid.uuid4().hex, None
        if found is None:
            raise ValueError(f"resume: no usable checkpoint in {spec.dir}" + (
                f" numbered below {spec.below}" if spec.below else "") + " (none written yet, or every one damaged: "
                "the dispatcher's log names what is wrong with each)")
        sequence, meta, _arrays = found
        if not isinstance(meta, dict) or not isinstance(meta.get("identity"), dict):
            raise ValueError(f"resume: checkpoint {sequence} in {spec.dir} has no run identity")
        differ = identity_differences(meta["identity"], spec.identity)
        if differ:
            raise ValueError(
                f"resume: checkpoint {sequence} in {spec.dir} is of another run: " + "; ".join(differ)
                + ". Resume with the same corpus, vocabulary and hyper-parameters, or give another checkpoint_dir")
        if meta.get("finished"):
            raise ValueError(f"resume: the run in {spec.dir} finished (checkpoint {sequence}): nothing to resume; "
                             f"the trained model is the one its train() returned")
        try:
            point = protocol.Resumed.from_wire(meta["point"])
        except (KeyError, ValueError) as err:
            raise CheckpointError(f"resume: checkpoint {sequence} in {spec.dir}: {err}") from None
        run = str(meta.get("run") or "")[:64]
        shards = meta.get("shards")
        if not run or isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= 4096:
            raise CheckpointError(f"resume: checkpoint {sequence} in {spec.dir} names no run or no shards")
        point.checkpoint, point.shards, point.run = sequence, shards, run
        return run, point

    @transport.expose
    def upload(self, sid, name, lo, array, token):
        """Receive rows ``[lo, lo + len)`` of array ``name`` (in order, in chunks); ``token``: the
        session's (:class:`gensim_distw2v.protocol.Opened`)."""
        with self.cond:
            session = self._session(sid, ("uploading",))
            protocol.check_token(token, session.token, "upload")
            if not isinstance(array, dict) or not array.get("data"):
                raise ValueError("upload: an empty chunk (it would only keep the session alive)")
            session.client_seen = time.monotonic()
            target = session.arrays.get(name)
            if target is None:
                raise ValueError(f"upload: session has no array {name!r}" + (
                    " here: the weights go to the session's shards" if name in protocol.WEIGHTS else ""))
            session.receive(name, lo, protocol.unpack_array(array, f"upload of {name}", target.dtype.name,
                                                        ndim=target.ndim, shape=(None,) + target.shape[1:]))

    @transport.expose
    def start(self, sid):
        """All arrays are uploaded: check them and start handing out jobs.

        Returns
        -------
        int
            Workers registered now (they join within a heartbeat).
        """
        from gensim_distw2v._inner import JobTrainer  # the kernel validates the arrays once, here too

        with self.cond:
            session = self._session(sid, ("uploading",))
            arrays = {name: a for name, a in session.arrays.items() if name not in ("vocab_bytes", "vocab_offsets")}
            if not session.config.params.sample:
                arrays.pop("sample_int", None)
            # the weights' shapes checked against the static arrays (np.zeros maps lazily: no memory)
            arrays.update({name: np.zeros(spec["shape"], np.float32) for name, spec in session.config.arrays.items()
                           if name in protocol.WEIGHTS})
            JobTrainer(**session.config.params.kernel(), **arrays)
            session.start()
            session.client_seen = session.started_at = time.monotonic()
            self._wake()
            return len(self.members)

    # ------------------------------------------------------------------ client: jobs and progress
    @transport.expose
    def put_jobs(self, sid, jobs):
        """Queue jobs; waits up to a second while the queue is full, then takes the whole call.

        The queue holds at most its limit (``max_queue_jobs`` per live trainer thread) plus one
        call's jobs (at most :data:`MAX_JOBS_PER_CALL`): a call is taken whole or not at all, so
        no job crosses the wire twice.

        Returns
        -------
        int
            How many of ``jobs`` were queued: all of them, or 0 when the queue stayed full (the
            client sends them again).
        """
        if not isinstance(jobs, (list, tuple)):
            raise ValueError("put_jobs: jobs must be a list of job messages")
        if len(jobs) > MAX_JOBS_PER_CALL:
            raise ValueError(f"put_jobs: {len(jobs)} jobs in one call, at most {MAX_JOBS_PER_CALL}")
        with self.cond:
            session = self._session(sid)
            session.put_jobs([])  # refused here already if the session trains from a file
        checked = [protocol.Job.from_wire(msg, vocab_size=session.vocab_size) for msg in jobs]
        # with checkpoints, the jobs' CRC-32 (a resume checks its corpus by them), outside the lock
        crcs = [zlib.crc32(job.indices) for job in checked] if session.config.checkpoint is not None else None
        with self.cond:
            deadline = time.monotonic() + 1.0
            limit = max(8, self.max_queue_jobs * self._live_threads())

            def full():
                return session.queued() >= limit or session.queued_bytes() >= MAX_QUEUE_BYTES
            while full() and time.monotonic() < deadline and session is self.session:
                self.cond.wait(deadline - time.monotonic())
            session = self._session(sid)
            session.client_seen = time.monotonic()
            if full():
                return 0
            session.put_jobs(checked, crcs)
            self.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake
            return len(checked)

    @transport.expose
    def progress(self, sid, token=None, nodes=False):
        """Training progress of a session; with the session's ``token`` (its client's call) it also
        counts as word from the client (a stranger's polling keeps no dead session alive); with
        ``nodes``, every node's metrics too (the client asks for them when it reports).

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.Progress`.
        """
        with self.cond:
            session = self._session(sid)
            now = time.monotonic()
            if token is not None:
                protocol.check_token(token, session.token, "progress")
                session.client_seen = now
            checkpoints = None if session.checkpoints is None else session.checkpoints.status(session.trained_mark())
            return protocol.Progress(
                epochs=session.epochs(), queued=session.queued(), in_flight=session.in_flight_count(),
                loss=session.loss, merges=session.merges, lost_shards=dict(session.lost_shards),
                workers={name: m.counts for name, m in self.members.items() if name in session.ranks},
                flushed=session.all_flushed(),
                no_workers_for=None if self._available(session) else now - (session.no_workers_since or now),
                file_checks=dict(session.file_checks), quit=dict(session.quit),
                checkpoints=checkpoints, poisoned=dict(session.poisoned) or None,
                nodes=self._nodes(session, now) if nodes is True else None).to_wire()

    def _nodes(self, session, now):
        """``{name: NodeMetrics}`` of the session's workers and shards (as last reported) and of this
        dispatcher (caller holds the lock)."""
        names = [name for name in self.members if name in session.ranks] + list(self.shards)
        nodes = self.book.of_session(session.id, names, now)
        nodes[transport.DISPATCHER_NAME] = self.meter.sample()
        return nodes

    def overview(self):
        """The cluster and its session as the status page shows them (plain data, read-only; see
        :mod:`gensim_distw2v.io.statuspage` for the fields)."""
        now = time.monotonic()
        with self.cond:
            session = self.session
            nodes = {}
            if session is not None:
                nodes = self._nodes(session, now)
            for name in list(self.members) + list(self.shards):  # those outside the session: as last heard
                if name not in nodes and name in self.book.latest:
                    nodes[name] = self.book.view(name, now)
            return {"time": time.time(),
                    "dispatcher": {"uri": self.uri, "versions": versions()},
                    "session": None if session is None else self._session_overview(session, now),
                    "nodes": [_node_overview(name, m) for name, m in sorted(nodes.items())],
                    "history": [] if self.history is None or session is None else list(self.history.points)}

    def _session_overview(self, session, now):
        """The status page's ``session`` (caller holds the lock)."""
        counts = session.counts.values()
        raw = sum(c.raw_words for c in counts)
        config = session.config
        total = config.total_words * config.epochs
        elapsed = 0.0 if session.started_at is None else now - session.started_at
        progress = min(1.0, raw / total) if total else None
        eta = elapsed * (1 - progress) / progress if progress and session.state == "running" else None
        points = self.history.points if self.history is not None else []
        return {"id": session.id, "state": session.state, "workers": len(session.ranks),
                "shards": len(session.shards), "epochs": config.epochs,
                "epoch": max((int(e) for e in session.epochs()), default=0),
                "progress": progress, "eta_seconds": eta, "elapsed": elapsed,
                "words": sum(c.effective_words for c in counts),
                "words_per_second": points[-1]["words_per_second"] if points else 0.0,
                "loss": float(session.loss) if config.compute_loss else None, "merges": session.merges}

    @transport.expose
    def end_epoch(self, sid, epoch):
        """The client has put every job of ``epoch``: workers flush once they run out of jobs."""
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError("end_epoch: epoch must be an int >= 0")
        with self.cond:
            session = self._session(sid)
            session.client_seen = time.monotonic()
            session.end_epoch(epoch)
            self.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake

    @transport.expose
    def open_file_epoch(self, sid, epoch):
        """Train ``epoch`` over the session's corpus file: its byte ranges are handed out from now on.

        Returns
        -------
        int
            The number of ranges of the epoch.
        """
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ValueError("open_file_epoch: epoch must be an int >= 0")
        with self.cond:
            session = self._session(sid)
            session.client_seen = time.monotonic()
            ranges = session.open_file_epoch(epoch)
            self.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake
            return ranges

    @transport.expose
    def file_check(self, name, sid, problem):
        """A worker's verdict on the session's corpus file: None if it sees the client's file.

        A worker that does not leaves the session (it gets no ranges); the client refuses to
        train while any worker reports a problem (:meth:`progress` lists them).

        Parameters
        ----------
        name, sid : str
            The worker and the session.
        problem : str or None
            What is wrong with the file on the worker (see :func:`gensim_distw2v.io.corpusfile.check_file`).
        """
        if problem is not None and not isinstance(problem, str):
            raise ValueError("file_check: problem must be a str or None")
        with self.cond:
            session = self._session(sid)
            self._member(name, sid)
            session.check_file(name, problem[:1000] if problem else None)
            if problem:
                logger.warning("worker %s cannot train session %s: %s", name, sid, problem)
            self._wake()

    @transport.expose
    def download(self, sid, name, lo, hi):
        """Rows ``[lo, hi)`` of a session's static array (the weights are on the shards)."""
        with self.cond:
            session = self._session(sid, ("uploading", "running"))
            array = session.arrays.get(name)
            if array is None:
                raise ValueError(f"download: session has no array {name!r}" + (
                    " here: the weights are on the session's shards" if name in protocol.WEIGHTS else ""))
            if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= len(array)):
                raise ValueError(f"download: rows [{lo}, {hi}) outside [0, {len(array)})")
            if array.nbytes // max(1, len(array)) * (hi - lo) > protocol.MAX_ARRAY_BYTES:
                raise ValueError("download: too many rows in one chunk")
            return protocol.pack_array(array[lo:hi].copy())

    @transport.expose
    def close(self, sid, token):
        """End a session (the client has its weights, or gave up); workers drop their replicas. Only
        with the session's ``token``; a session not running here is no error."""
        with self.cond:
            if self.session is not None and self.session.id == sid:
                protocol.check_token(token, self.session.token, "close")
                logger.info("session %s closed (%s)", sid, self.session.state)
                self._end_session()

    # ------------------------------------------------------------------ workers: session work
    @transport.expose
    def join(self, name, sid):
        """A worker joins the running session.

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.Joined`: the session config, the worker's rank (rank 0
            continues the client's random stream) and the session's shards (``[[name, uri], ...]``).
        """
        with self.cond:
            session = self._session(sid)
            member = self._member(name)
            requeued = session.release(name)  # joining again: what it had not merged goes back to the queue
            if requeued:
                logger.info("worker %s joins session %s again; its %i unmerged jobs go back to the queue", name, sid,
                            requeued)
            if member.session_id != sid:  # its counters are per session (a re-join keeps them)
                member.count_session(sid)
            rank = session.join(name)
            session.last_round[name] = time.monotonic()  # its jobs' deadline runs from here
            logger.info("worker %s joined session %s as rank %i", name, sid, rank)
            return protocol.Joined(config=session.config, rank=rank, shards=session.shards,
                               token=session.token).to_wire()

    @transport.expose
    def get_jobs(self, name, sid, max_jobs, wait=0.2):
        """Up to ``max_jobs`` jobs for a worker; waits up to ``wait`` seconds (at most 1) while the queue is empty.

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.JobBatch`: job messages, and ``drained``, the last epoch
            the client closed (:meth:`end_epoch`) when the queue is empty: time to flush.
        """
        if not isinstance(max_jobs, int) or not 1 <= max_jobs <= 1024:
            raise ValueError("get_jobs: max_jobs must be an int in [1, 1024]")
        if not isinstance(wait, (int, float)) or not 0 <= wait <= 1:
            raise ValueError("get_jobs: wait must be a number of seconds in [0, 1]")
        with self.cond:
            session = self._session(sid)
            self._member(name, sid)
            if not session.has_work(name) and wait:
                self.cond.wait(wait)
                session = self._session(sid)
                self._member(name, sid)
            out, drained = session.hand_out(name, max_jobs)
            if out:
                self.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake
            return protocol.JobBatch(jobs=out, drained=drained).to_wire()

    @transport.expose
    def begin_round(self, name, sid, turn, wait=0.5):
        """Whether a worker may merge its round ``turn`` (``[epoch, round]``) now; waits up to
        ``wait`` seconds (at most 1) for its turn. Always true unless the session takes rounds in
        turn (``sync="bsp"``)."""
        turn = protocol.check_turn(turn, "begin_round")
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= 1:
            raise ValueError("begin_round: wait must be a number of seconds in [0, 1]")
        deadline = time.monotonic() + wait
        with self.cond:
            while True:
                session = self._session(sid)
                self._member(name, sid)
                if session.may_merge(name, turn):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)

    @transport.expose
    def round_done(self, name, sid, report):
        """A worker's merge round is folded into every shard: the jobs it carried count as trained.

        Parameters
        ----------
        name, sid : str
            The worker and the session.
        report : dict
            A :class:`gensim_distw2v.protocol.RoundReport`.
        """
        report = protocol.RoundReport.from_wire(report)
        with self.cond:
            session = self._session(sid)
            member = self._member(name, sid)
            member.counts.add(report, session.round_done(name, report))
            now = time.monotonic()
            if report.node is not None and report.node.session == sid:
                self.book.update(name, report.node, now)
            if name in session.last_round:
                gap = now - session.last_round[name]
                session.round_gap = gap if session.round_gap is None else 0.9 * session.round_gap + 0.1 * gap
            session.last_round[name] = now
            self.cond.notify_all()

    # ------------------------------------------------------------------ checkpoints
    @staticmethod
    def _shard_index(session, name):
        """A shard's place in the session (-1: not one of its shards)."""
        return next((index for index, (held, _uri) in enumerate(session.shards) if held == name), -1)

    def _begin_checkpoint(self, session, now):
        """Order a checkpoint of the running session (caller holds the lock)."""
        point = session.resume_point(0)
        finished = point.epoch >= session.config.epochs
        sequence = session.checkpoints.begin(point, finished, now, session.trained_mark())
        logger.info("checkpoint %i of session %s ordered: epoch %i, %i jobs of it trained%s", sequence, session.id,
                    point.epoch, point.done_below - point.first_job + len(point.done_jobs),
                    " (the run's last)" if finished else "")
        self.beats.notify_all()  # the shards' long polls carry the order

    @transport.expose
    def checkpoint(self, sid):
        """The client asks for a checkpoint now (at an epoch end, before it goes on).

        Returns
        -------
        int
            The checkpoint's number: :meth:`progress`'s ``checkpoints.taken`` reaches it once
            every shard has copied its rows (training may go on), ``committed`` once it is on disk.
        """
        with self.cond:
            session = self._session(sid)
            session.client_seen = now = time.monotonic()
            if session.checkpoints is None:
                raise ValueError(f"checkpoint: session {sid} has no checkpoint_dir")
            sequence = session.checkpoints.ask(session.advance())
            if session.checkpoints.due(now, session.trained_mark()) and not session.lost_shards:
                self._begin_checkpoint(session, now)
            return sequence

    @transport.expose
    def shard_checkpoint(self, name, sid, report):
        """A shard's report on a checkpoint order.

        Parameters
        ----------
        name, sid : str
            The shard and the session.
        report : dict
            A :class:`gensim_distw2v.protocol.ShardCheckpoint`.
        """
        report = protocol.ShardCheckpoint.from_wire(report)
        with self.cond:
            session = self._session(sid)
            checkpoints = session.checkpoints
            if checkpoints is None:
                raise ValueError(f"shard_checkpoint: session {sid} has no checkpoint_dir")
            now = time.monotonic()
            outcome = checkpoints.report(self._shard_index(session, name), report, now)
            if outcome == "failed":
                logger.error("checkpoint %i of session %s failed: %s; training goes on, the last complete "
                             "checkpoint is %i", report.sequence, sid, checkpoints.state.error,
                             checkpoints.state.committed)
            if outcome != "commit":
                self.cond.notify_all()
                return
            sequence, meta = checkpoints.record(session.config.checkpoint.identity)
        try:  # the record, written last, commits it (outside the lock: the session goes on)
            nbytes = checkpoints.store.size(checkpoints.store.write(meta, {}, sequence=sequence))
            error = None
        except (OSError, ValueError) as err:
            error = f"the dispatcher could not write its record of checkpoint {sequence}: {err}"
        with self.cond:
            now = time.monotonic()
            if error:
                checkpoints.fail(error, now)
                logger.error("%s; training goes on, the last complete checkpoint is %i", error,
                             checkpoints.state.committed)
            else:
                checkpoints.committed(sequence, nbytes, now)
                logger.info("checkpoint %i of session %s committed in %.2f s (%.1f MB)", sequence, sid,
                            checkpoints.last_seconds, checkpoints.last_bytes / 1e6)
                if self.session is session and session.state == "running" and checkpoints.due(now, session.trained_mark()) \
                        and checkpoints.wanted is not None:
                    self._begin_checkpoint(session, now)
            self.cond.notify_all()

    def _wake(self):
        """Wake every waiter: those of jobs and rounds, and the heartbeats' long polls (the lock held)."""
        self.cond.notify_all()
        self.beats.notify_all()

    def shutdown(self):
        """Stop the monitor thread."""
        self.stopped.set()


def _node_overview(name, node):
    """One row of the status page's node table."""
    return {"name": name, "role": node.role, "words": node.words, "words_per_second": node.words_per_second,
            "cpu": {"kernel": node.kernel_cpu, "merge": node.merge_cpu, "other": node.other_cpu},
            "rss": node.rss, "peak_rss": node.peak_rss, "bytes_sent": node.bytes_sent,
            "bytes_received": node.bytes_received, "last_heard": node.silent,
            "threads": node.threads}
