"""The dispatcher's one cluster state: members (workers and shards), the session, the lock and its
conditions, the nodes' metrics and the session's history.

Every part of the dispatcher (:mod:`~gensim_distw2v.dispatcher.clients`,
:mod:`~gensim_distw2v.dispatcher.workers`, :mod:`~gensim_distw2v.dispatcher.shards`, the monitor,
the status overview) reads and changes this object under its lock, and nothing else.
"""
import dataclasses
import secrets
import threading
import time

from gensim_distw2v import protocol
from gensim_distw2v.core import book
from gensim_distw2v.io import meter
from gensim_distw2v.io.meter import model_bytes_limit
from gensim_distw2v.protocol import errors
from gensim_distw2v.protocol.constants import RUNNING

__all__ = ["Cluster", "Limits", "KnownMember", "MAX_MEMBERS", "MAX_QUEUE_BYTES", "JOB_DEADLINE_ROUNDS"]

MAX_MEMBERS = 1024  # workers (and, apart, shards) registered at once
MAX_QUEUE_BYTES = 256 * 1024 * 1024  # jobs' bytes waiting in the queue, whatever the threads workers claim
JOB_DEADLINE_ROUNDS = 10  # a worker holding jobs without merging for this many rounds (typical length) is dropped


@dataclasses.dataclass(frozen=True)
class Limits:
    """The dispatcher's timeouts and limits.

    Parameters
    ----------
    worker_timeout : float
        Seconds without a heartbeat after which a worker (or a shard) is dropped.
    client_timeout : float
        Seconds without a call from the client after which its session is aborted.
    max_queue_jobs : int
        Jobs held in the queue at most, per live trainer thread (at least 8 in all, and at most
        :data:`MAX_QUEUE_BYTES` of them): beyond that ``put_jobs`` makes the client wait.
    job_deadline : float
        A worker that holds jobs without merging for longer than this, and than
        :data:`JOB_DEADLINE_ROUNDS` typical rounds, is dropped and its jobs re-queued.
    max_model_bytes : int
        The largest session's arrays the dispatcher holds.
    allow_takeover : bool
        Whether a client resuming a run may replace its running session at once.
    """

    worker_timeout: float = 30.0
    client_timeout: float = 120.0
    max_queue_jobs: int = 4
    job_deadline: float = 120.0
    max_model_bytes: int = 0
    allow_takeover: bool = False


class KnownMember:
    """What the dispatcher knows of one worker or shard: its name, URI, a worker's trainer threads,
    when it was last heard, the connection its heartbeats come in on, and (a worker's) its counters
    in the session it is in."""

    def __init__(self, name, uri, threads=None):
        self.name, self.uri, self.threads = name, uri, threads
        self.last_seen = time.monotonic()
        self.connection = None  # the connection its hello and heartbeats come in on
        self.secret = secrets.token_urlsafe(16)  # given in the hello's reply: its later calls carry it
        self.session_id = None  # the session its counters below are of
        self.count_session(None)

    def check_secret(self, given, what):
        """Refuse a call naming this member that does not carry its secret
        (:class:`~gensim_distw2v.protocol.errors.Forbidden`)."""
        if not (isinstance(given, str) and secrets.compare_digest(given.encode("utf8"), self.secret.encode("utf8"))):
            raise errors.Forbidden(f"{what} names {self.name} without its secret: a member may call for its own "
                                   f"name only (the secret its hello's reply gave it)")

    def count_session(self, sid):
        """Start this worker's traffic and work counters afresh for session ``sid``."""
        self.session_id = sid
        self.counts = protocol.WorkerCounts()


class Cluster:
    """The dispatcher's state (see the module's docstring).

    Parameters
    ----------
    limits : Limits
    """

    def __init__(self, limits):
        self.limits = dataclasses.replace(limits, max_model_bytes=model_bytes_limit(limits.max_model_bytes or None))
        # one lock, two conditions: ``cond`` for jobs, rounds and the client's waits; ``beats`` for the
        # heartbeats' long polls (K workers and P shards), which only a change of members or session
        # ends: a merge round's report wakes the former only (waking every heartbeat with every round
        # cost the dispatcher CPU per round in proportion to K)
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        self.beats = threading.Condition(lock)
        self.members = {"worker": {}, "shard": {}}  # role -> name -> KnownMember
        self.workers, self.shards = self.members["worker"], self.members["shard"]
        self.session = None
        self.count = None  # the vocabulary count the shards may hold (a counts.CountLease), if any
        self.meter = meter.Meter("dispatcher", calls=True)  # its own CPU (call by call), memory, traffic
        self.book = book.NodeBook()  # the workers' and shards' latest metrics (on their heartbeats)
        self.history = None  # the session's words, rate and loss over time (a book.History)
        self.uri = None  # once served (the status page shows it)
        self.key = None  # the key checkpoint manifests are signed with (the cluster's), if any

    # ------------------------------------------------------------------ look-ups (the lock held)
    def session_of(self, sid, states=(RUNNING,)):
        """The session ``sid`` if it is the current one and in one of ``states``.

        Raises
        ------
        SessionClosed
            No such session here.
        ClusterFault
            The session failed (its cause), or is in another state (a ValueError).
        """
        if self.session is None or self.session.id != sid:
            raise errors.SessionClosed(f"unknown or closed session {sid!r} (it may have been aborted or replaced)")
        self.session.expect(*states)
        return self.session

    def worker(self, name, sid=None):
        """The registered worker ``name`` (it counts as heard from); with ``sid``, a member of that
        session (the caller's secret, the one its hello's reply gave it, is checked before:
        :mod:`~gensim_distw2v.dispatcher.guards`).

        Raises
        ------
        UnknownMember, NotInSession
        """
        member = self.workers.get(name)
        if member is None:
            raise errors.UnknownMember(f"unknown worker {name!r}: say hello first (it may have been dropped after a "
                                       f"timeout)")
        member.last_seen = time.monotonic()
        if sid is not None and (self.session is None or name not in self.session.ranks):
            raise errors.NotInSession(f"worker {name} is not a member of session {sid}: join it first")
        return member

    def rank(self, name):
        """A worker's rank in the current session, or None."""
        return None if self.session is None else self.session.ranks.get(name)

    def live_threads(self):
        """Trainer threads of the workers in the session (at least 1)."""
        return sum(m.threads for name, m in self.workers.items() if self.rank(name) is not None) or 1

    @staticmethod
    def shard_index(session, name):
        """A shard's place in the session (-1: not one of its shards)."""
        return next((index for index, (held, _uri) in enumerate(session.shards) if held == name), -1)

    # ------------------------------------------------------------------ changes (the lock held)
    def wake(self):
        """Wake every waiter: those of jobs and rounds, and the heartbeats' long polls."""
        self.cond.notify_all()
        self.beats.notify_all()

    def end_session(self):
        """No session any more."""
        if self.session is not None:
            self.session.close()
        self.session = None
        self.wake()

    def workers_changed(self, now=None):
        """Tell the session which workers are registered now (it fails when none is left to train it);
        wakes everyone if that failed it."""
        session = self.session
        if session is not None and session.workers_seen(self.workers, time.monotonic() if now is None else now):
            self.wake()
