"""Who may call the dispatcher: the credential of each kind of call (:data:`gensim_distw2v.protocol.calls.AUTHS`)
checked against the cluster's state before the call's handler runs (:class:`gensim_distw2v.protocol.calls.Handlers`).

Each guard looks under the cluster's lock at what the request names: the session, the count's lease or
the member. A request naming what is not here (no such session, lease or member) passes: its handler
refuses it, and can do nothing for it. Every comparison is in constant time.

The guard and the handler take the lock in turn, not at once: a member that says hello again under
its name between the two (a restarted process) has the old process's call act for it once (a job
it then holds goes back to the queue at its deadline; a heartbeat sees the member is another).
"""
from gensim_distw2v import protocol
from gensim_distw2v.protocol import tables

__all__ = ["Guards"]


class Guards:
    """The dispatcher's guards, one per kind of credential its table asks for.

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    """

    #: the calls a shard makes (the others that carry a member's secret are a worker's)
    SHARD_OPS = frozenset(call.op for call in tables.DISPATCHER if call.handler.startswith("shards."))

    def __init__(self, cluster):
        self.cluster = cluster

    def table(self):
        """``{auth: guard}`` for :class:`~gensim_distw2v.protocol.calls.Handlers`."""
        return {"owner": self.owner, "watcher": self.watcher, "token": self.token, "count": self.count,
                "member": self.member}

    def _session(self, sid):
        session = self.cluster.session
        return session if session is not None and session.id == sid else None

    def owner(self, request, op):
        """The session's client: its owner secret (``Opened.owner``)."""
        with self.cluster.cond:
            session = self._session(request.session)
            if session is not None:
                protocol.check_token(request.token, session.owner, op, owner=True)

    def watcher(self, request, op):
        """Anyone; the owner secret checked when given (a client's poll counts as word from it)."""
        if request.token is not None:
            self.owner(request, op)

    def token(self, request, op):
        """The session's client and its workers: the session's token (``Opened.token``)."""
        with self.cluster.cond:
            session = self._session(request.session)
            if session is not None:
                protocol.check_token(request.token, session.token, op)

    def count(self, request, op):
        """The client of the count leased here: the count's secret."""
        with self.cluster.cond:
            lease = self.cluster.count
            if lease is not None and lease.count == request.count:
                protocol.check_token(request.token, lease.token, op, owner=True)

    def member(self, request, op):
        """A registered worker or shard, for its own name: the secret its hello's reply gave it."""
        role = "shard" if op in self.SHARD_OPS else "worker"
        with self.cluster.cond:
            member = self.cluster.members[role].get(request.name)
            if member is not None:
                member.check_secret(request.secret, op)
