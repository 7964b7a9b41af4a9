"""The dispatcher's vocabulary-count leases: which count the shards may hold, and whose it is.

A client counting a corpus on the cluster (:mod:`gensim_distw2v.client.vocab`) first asks the
dispatcher for the cluster's count lease (``open_count``, with the count's id and secret), keeps it
(``count_alive``) and gives it back (``close_count``). The shards' heartbeat replies carry the
leased count and a digest of its secret (:class:`gensim_distw2v.protocol.ShardBeat`'s ``count`` and
``count_owner``): a shard opens only that count, for its holder only, and drops any other it holds.
So a peer holding the cluster's key cannot fill the shards with counts of its own behind the
dispatcher's back; it can hold the one lease, as it could open a session, and that is all. The
workers' heartbeat replies carry the lease too, with the corpus and the shards its client named
(:class:`gensim_distw2v.protocol.Beat`): a worker counts for the leased count only, that corpus and those
shards, so that a peer can neither have a worker read another file nor send a count's words elsewhere.
A lease whose client is silent for ``client_timeout`` seconds is withdrawn.
"""
import dataclasses
import logging
import time

from gensim_distw2v import protocol
from gensim_distw2v.protocol import errors

logger = logging.getLogger(__name__)

__all__ = ["CountLease", "CountLeases"]


@dataclasses.dataclass
class CountLease:
    """The count the shards may hold: its id, its client's secret, when its client was last heard, and the
    corpus (:func:`gensim_distw2v.protocol.corpus_digest`) and shards its client named."""

    count: str
    token: str
    seen: float
    corpus: str = None
    shards: list = None

    def owner(self):
        """What the shards are told of the secret (they check the one a ``count_open`` shows against it)."""
        return protocol.owner_digest(self.token)


class CountLeases:
    """The calls ``open_count``, ``count_alive`` and ``close_count`` of
    :data:`gensim_distw2v.protocol.tables.DISPATCHER`, and the monitor's look at the lease.

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    """

    def __init__(self, cluster):
        self.cluster = cluster

    def _held(self, request, what):
        """The lease ``request`` names (the lock held; its secret checked: :mod:`~gensim_distw2v.dispatcher.guards`)."""
        lease = self.cluster.count
        if lease is None or lease.count != request.count:
            raise errors.SessionClosed(f"{what}: no count {request.count!r} is leased here (closed, or withdrawn "
                                       f"after {self.cluster.limits.client_timeout:.0f} s without word from its "
                                       f"client)")
        return lease

    def open(self, request):
        """Lease the cluster's count to ``request`` (a :class:`gensim_distw2v.protocol.CountRef`).

        Raises
        ------
        gensim_distw2v.protocol.errors.Busy
            Another count holds the lease.
        """
        cluster = self.cluster
        with cluster.cond:
            lease = cluster.count
            if lease is not None and lease.count == request.count:
                self._held(request, "open_count").seen = time.monotonic()
                return
            if lease is not None:
                raise errors.Busy(f"another vocabulary count is running on this cluster (count {lease.count[:8]}, "
                                  f"its client heard from {time.monotonic() - lease.seen:.0f} s ago); one runs at a "
                                  f"time: try again when it ends")
            cluster.count = CountLease(request.count, request.token, time.monotonic(), request.corpus, request.shards)
            cluster.wake()  # the shards' long polls answer with it
        logger.info("count %s leased: the shards may open it", request.count)

    def alive(self, request):
        """The lease's client is alive."""
        with self.cluster.cond:
            self._held(request, "count_alive").seen = time.monotonic()

    def close(self, request):
        """The count ended: the lease is free (one not held is no error: it was withdrawn)."""
        cluster = self.cluster
        with cluster.cond:
            lease = cluster.count
            if lease is None or lease.count != request.count:
                return
            self._held(request, "close_count")
            cluster.count = None
            cluster.wake()
        logger.info("count %s closed: the lease is free", request.count)

    def expire(self, now):
        """Withdraw a lease whose client has been silent for ``client_timeout`` (the lock held)."""
        cluster = self.cluster
        lease = cluster.count
        if lease is not None and now - lease.seen > cluster.limits.client_timeout:
            logger.warning("count %s withdrawn: no word from its client for %.0f s", lease.count, now - lease.seen)
            cluster.count = None
            cluster.wake()

    def excuse(self, seconds):
        """The dispatcher did not run for ``seconds``: its client's silence does not count them (the lock held)."""
        if self.cluster.count is not None:
            self.cluster.count.seen += seconds
