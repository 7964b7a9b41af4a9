"""Who may call: the session's and the count's secrets, and the checks of what a caller shows.

A session's client holds its owner secret; the session token goes to its workers; each shard is shown
its own capability (an HMAC of the owner secret) and told only that capability's digest; a count's
workers carry one token per range they are given. Every comparison is in constant time.
"""
import hashlib
import hmac
import secrets

from gensim_distw2v.protocol.errors import Forbidden

__all__ = ["check_token", "shard_capability", "owner_digest", "range_token"]


def check_token(given, token, what, owner=False):
    """Refuse a call on a session that does not carry the session's secret token, or with
    ``owner``, its client's own (:class:`~gensim_distw2v.protocol.errors.Forbidden`)."""
    if not (isinstance(given, str) and isinstance(token, str) and token
            and secrets.compare_digest(given.encode("utf8"), token.encode("utf8"))):
        raise Forbidden(f"{what}: not this session's " + ("owner secret: only the session's client may do that"
                                                          if owner else "token: only the session's client and its "
                                                                        "workers may do that"))


def shard_capability(owner, session, index):
    """What a session's owner shows shard ``index`` of it (its secret for that shard): an HMAC of the
    owner's secret, so that no shard learns the owner's secret, nor another shard's."""
    return hmac.new(owner.encode("utf8"), f"shard {session} {int(index)}".encode("utf8"), hashlib.sha256).hexdigest()


def owner_digest(capability):
    """What a shard is told of its :func:`shard_capability`: its SHA-256, hex (the dispatcher's
    heartbeat replies carry it; the capability itself goes to that shard from the owner alone)."""
    return hashlib.sha256(b"gensim_distw2v session owner\n" + capability.encode("utf8")).hexdigest()


def range_token(secret, count, rid):
    """The token of range ``rid`` of count ``count`` whose secret is ``secret``: what its parts carry."""
    return hmac.new(secret.encode("utf8"), f"count-range {count} {rid}".encode("utf8"), hashlib.sha256).hexdigest()[:32]
