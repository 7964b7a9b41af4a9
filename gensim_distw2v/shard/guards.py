"""Who may call a shard: the credential of each kind of call (:data:`gensim_distw2v.protocol.calls.AUTHS`)
checked against what the shard holds before the call's handler runs (:class:`gensim_distw2v.protocol.calls.Handlers`).

A session's client shows each shard its own capability (:func:`gensim_distw2v.protocol.shard_capability`),
whose digest the dispatcher told the shard; the session's token is its client's and its workers'; a
count's secret is its client's, and each of its ranges' tokens the worker's given that range. A request
naming a session or count this shard does not hold passes: its handler refuses it. Every comparison is
in constant time.
"""
from gensim_distw2v import protocol

__all__ = ["ShardGuards"]


class ShardGuards:
    """A shard's guards, one per kind of credential its table asks for.

    Parameters
    ----------
    shard : gensim_distw2v.shard.service.Shard
    """

    def __init__(self, shard):
        self.shard = shard

    def table(self):
        """``{auth: guard}`` for :class:`~gensim_distw2v.protocol.calls.Handlers`."""
        counts = self.shard.counts
        return {"grant": self.grant, "capability": self.capability, "token": self.token,
                "count_grant": counts.check_grant, "count": self.count, "range": self.range}

    def _spec(self, sid):
        held = self.shard.held
        return held.spec if held is not None and held.id == sid else None

    def grant(self, spec, op):
        """The owner of a session the dispatcher runs, at this shard (the shard's ``check_grant``)."""
        self.shard.check_grant(spec, op)

    def capability(self, request, op):
        """The session's client at this shard: its capability for this shard."""
        spec = self._spec(request.session)
        if spec is not None:
            protocol.check_token(request.token, spec.owner, op, owner=True)

    def token(self, request, op):
        """The session's client and its workers: the session's token."""
        spec = self._spec(request.session)
        if spec is not None:
            protocol.check_token(request.token, spec.token, op)

    def count(self, request, op):
        """A count's client: the count's secret."""
        secret = self.shard.counts.secret_of(request.count)
        if secret is not None:
            protocol.check_token(request.token, secret, op)

    def range(self, part, op):
        """A worker counting a range it was given: that range's token."""
        secret = self.shard.counts.secret_of(part.count)
        if secret is not None:
            protocol.check_token(part.token, protocol.range_token(secret, part.count, part.range), op)
