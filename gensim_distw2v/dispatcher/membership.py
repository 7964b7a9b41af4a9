"""Membership, one implementation for both roles: workers and shards say hello, send heartbeats
(long polls that the dispatcher answers once the session they should be in changes), leave, and
are dropped when silent or when their heartbeat connection closes.

:class:`Membership` is parameterised by a :class:`Role`; the worker-facing part
(:mod:`~gensim_distw2v.dispatcher.workers`) and the shard-facing part
(:mod:`~gensim_distw2v.dispatcher.shards`) subclass it with what differs: what a heartbeat answers
(:meth:`Membership.answer`) and what a member's loss means for the session
(:meth:`Membership.dropped`).
"""
import dataclasses
import logging
import time

from gensim_distw2v import protocol
from gensim_distw2v.dispatcher.state import MAX_MEMBERS, KnownMember
from gensim_distw2v.io import transport
from gensim_distw2v.protocol import errors
from gensim_distw2v.versions import check_versions

logger = logging.getLogger(__name__)

__all__ = ["Membership", "Role", "NAME_HELD_FOR"]

NAME_HELD_FOR = protocol.LONG_POLL + 1.0  # seconds a live member's name is not given to another connection


@dataclasses.dataclass(frozen=True)
class Role:
    """What differs between the roles' membership, as data.

    Parameters
    ----------
    name : str
        ``worker`` or ``shard`` (the role of its :class:`~gensim_distw2v.protocol.NodeMetrics`).
    prefix : str
        Its registration names' prefix.
    ops : tuple of str
        Its hello, heartbeat and leave operations' names (for messages).
    threads : bool
        Whether its hello says how many trainer threads it has.
    """

    name: str
    prefix: str
    ops: tuple
    threads: bool

    @property
    def what(self):
        """``worker`` / ``shard`` hello, as messages name it."""
        return self.ops[0].replace("_", " ")


WORKER_ROLE = Role("worker", protocol.WORKER_PREFIX, ("hello", "heartbeat", "leave"), threads=True)
SHARD_ROLE = Role("shard", protocol.SHARD_PREFIX, ("shard_hello", "shard_beat", "shard_leave"), threads=False)


class Membership:
    """One role's members (see the module's docstring).

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    role : Role
    """

    def __init__(self, cluster, role):
        self.cluster, self.role = cluster, role
        self.members = cluster.members[role.name]

    # ------------------------------------------------------------------ what differs (subclasses)
    def answer(self, name, request, final):
        """A heartbeat's reply once there is news for ``name`` (or ``final``: its wait is over), else
        None (the lock held)."""
        raise NotImplementedError

    def unknown(self):
        """The heartbeat reply to a member the dispatcher does not know: say hello."""
        raise NotImplementedError

    def dropped(self, member, reason):
        """What a member's loss means for the session (the lock held; it is no longer registered)."""

    def before_wait(self, name, request):
        """Act on what a heartbeat carries beyond the metrics (the lock held)."""

    # ------------------------------------------------------------------ remote calls
    def hello(self, request):
        """A member announces itself (at start, and again after losing the dispatcher).

        Raises
        ------
        BadRequest
            A malformed name or URI, or threads where none (or none where some) belong.
        VersionMismatch
            It runs other versions than the dispatcher.
        MemberConflict
            A live member holds that name on another connection.
        Full
            :data:`~gensim_distw2v.dispatcher.state.MAX_MEMBERS` are registered.
        """
        role, cluster = self.role, self.cluster
        name = request.name
        protocol.check_member(name, request.uri, role.prefix, f"malformed {role.what}")
        if (request.threads is None) == role.threads:
            raise errors.BadRequest(f"{role.what}: threads must be " + ("given (a worker's trainer threads)"
                                                                        if role.threads else "left out (a shard's)"))
        try:
            check_versions(request.versions, f"{role.name} {name}")
        except ValueError as err:
            raise errors.VersionMismatch(str(err)) from None
        with cluster.cond:
            member = self.members.get(name)
            if member is not None and member.connection is not transport.caller() \
                    and time.monotonic() - member.last_seen < NAME_HELD_FOR:
                raise errors.MemberConflict(
                    f"{role.what}: {role.name} {name} is registered and alive on another connection (heard from "
                    f"{time.monotonic() - member.last_seen:.1f} s ago): a name is its first holder's until that "
                    f"one is silent for {NAME_HELD_FOR:g} s or its connection closes")
            if member is not None:
                self.drop(name, "it said hello again (restarted, or back after a network cut)")
            elif len(self.members) >= MAX_MEMBERS:
                raise errors.Full(f"{role.what}: the dispatcher has {MAX_MEMBERS} {role.name}s, the most it takes")
            member = self.members[name] = KnownMember(name, request.uri, request.threads)
            member.connection = transport.caller()
            logger.info("%s %s registered at %s%s (%i %ss)", role.name, name, request.uri,
                        f" with {request.threads} threads" if role.threads else "", len(self.members), role.name)
            cluster.workers_changed()
            cluster.wake()
            return member.secret

    def heartbeat(self, request):
        """A member is alive: the reply (:meth:`answer`) once its news differs from what it knows,
        or after ``request.wait`` seconds (the long poll).

        Raises
        ------
        BadRequest
            Not a name of this role, or metrics of another role.
        """
        role, cluster, name = self.role, self.cluster, request.name
        if not name.startswith(role.prefix):
            raise errors.BadRequest(f"{role.ops[1]}: name must be a str starting with {role.prefix!r}")
        report = request.metrics
        if report is not None and report.role != role.name:
            raise errors.BadRequest(f"{role.ops[1]}: metrics must be a {role.name}'s, got role {report.role!r}")
        deadline = time.monotonic() + request.wait
        with cluster.cond:
            first = self.members.get(name)
            if first is not None:  # (its secret checked: no beats, metrics or news for another's name)
                if report is not None:
                    cluster.book.update(name, report)
                self.before_wait(name, request)
            while True:
                member = self.members.get(name)
                if member is None or member is not first:  # (unknown, or registered anew meanwhile)
                    return self.unknown()
                member.last_seen = time.monotonic()
                member.connection = transport.caller()
                remaining = deadline - time.monotonic()
                reply = self.answer(name, request, remaining <= 0)
                if reply is not None:
                    return reply
                cluster.beats.wait(remaining)

    def leave(self, request):
        """A member shuts down cleanly (given its secret: no member drops another)."""
        with self.cluster.cond:
            member = self.members.get(request.name)
            if member is not None:
                self.drop(request.name, "it shut down")

    # ------------------------------------------------------------------ drops (the lock held)
    def drop(self, name, reason):
        """Remove a member (see :meth:`dropped`)."""
        member = self.members.pop(name, None)
        if member is None:
            return
        self.cluster.book.forget(name)
        self.dropped(member, reason)
        self.cluster.workers_changed()
        self.cluster.wake()

    def excuse(self, seconds):
        """The dispatcher did not run for ``seconds``: no member's silence counts them (the lock held)."""
        for member in self.members.values():
            member.last_seen += seconds

    def expire(self, now):
        """Drop the members silent for longer than the worker timeout."""
        timeout = self.cluster.limits.worker_timeout
        for name, member in list(self.members.items()):
            if now - member.last_seen > timeout:
                self.drop(name, f"no heartbeat for {now - member.last_seen:.1f} s")

    def connection_closed(self, connection):
        """A connection closed: the members whose heartbeats it carried are gone (they died, or they
        reconnect and say hello again as new ones)."""
        for name, member in list(self.members.items()):
            if member.connection is connection:
                self.drop(name, "its heartbeat connection closed")
