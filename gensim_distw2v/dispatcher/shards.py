"""The dispatcher's shard-facing part: membership (shard_hello, shard_beat, shard_leave) and a
shard's checkpoint reports (shard_checkpoint)."""
import logging
import time

from gensim_distw2v import protocol
from gensim_distw2v.protocol import errors
from gensim_distw2v.dispatcher.membership import SHARD_ROLE, Membership
from gensim_distw2v.protocol.constants import RUNNING

logger = logging.getLogger(__name__)

__all__ = ["ShardCalls"]


class ShardCalls(Membership):
    """The calls of :data:`gensim_distw2v.protocol.tables.DISPATCHER` that shards make.

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    checkpointing : gensim_distw2v.dispatcher.checkpointing.Checkpointing
    """

    def __init__(self, cluster, checkpointing):
        super().__init__(cluster, SHARD_ROLE)
        self.checkpointing = checkpointing

    # ------------------------------------------------------------------ membership
    def answer(self, name, request, final):
        """The session the shard should hold, its workers' ranks, a checkpoint order for it, and the
        vocabulary count it may hold (:mod:`~gensim_distw2v.dispatcher.counts`)."""
        session, lease = self.cluster.session, self.cluster.count
        order = None
        index = -1 if session is None else self.cluster.shard_index(session, name)
        if index >= 0 and session.checkpoints is not None and session.state == RUNNING:
            order = session.checkpoints.order(index)
        leased = lease.count if lease else None
        if (session.id if session else None) == request.known and leased == request.count and not final \
                and order is None:
            return None
        count = {} if lease is None else {"count": lease.count, "count_owner": lease.owner()}
        if session is None:
            return protocol.ShardBeat(session=None, ranks=[], next_rank=0, hello=False, **count)
        spec = session.config.checkpoint
        # who may open the session here: the digest of this shard's capability (the owner's secret stays the client's)
        owner = None if index < 0 else protocol.owner_digest(protocol.shard_capability(session.owner, session.id, index))
        return protocol.ShardBeat(session=session.id, next_rank=session.next_rank, hello=False,
                                  ranks=sorted(session.ranks.values()), checkpoint=order, owner=owner,
                                  run=session.run if spec else None, checkpoint_dir=spec.dir if spec else None,
                                  **count)

    def unknown(self):
        return protocol.ShardBeat(session=None, ranks=[], next_rank=0, hello=True)

    def before_wait(self, name, request):
        """Workers whose merges the shard refused as poison: the session fails, naming them; they
        leave it, their jobs go back to the queue. Only a shard of the session is heard: another
        member that knows the session's id (``status()`` shows it) holds none of its rows."""
        session = self.cluster.session
        if not request.poisoned or session is None or session.id != request.known:
            return
        if self.cluster.shard_index(session, name) < 0:
            logger.warning("shard %s reported poisoned merges in session %s, which it is not a shard of: ignored",
                           name, session.id)
            return
        for rank, why in request.poisoned.items():
            worker = session.rank_names.get(int(rank), f"rank {rank}")
            if session.poison(worker, f"shard {name} refused its merge: {why}"):
                logger.error("session %s: worker %s sent a merge beyond the session's bound (%s); the session fails",
                             session.id, worker, why)
        self.cluster.wake()

    def dropped(self, member, reason):
        """A session it holds rows of cannot go on: it fails."""
        session, name = self.cluster.session, member.name
        if session is not None and session.lose_shard(name, reason):
            logger.error("shard %s of session %s lost (%s): the session cannot go on; restart the shard with: "
                         "python -m gensim_distw2v.shard", name, session.id, reason)
            if session.checkpoints is not None and session.checkpoints.current is not None:
                session.checkpoints.fail(f"shard {name} was lost", time.monotonic())
        else:
            logger.warning("shard %s lost (%s); %i shards left", name, reason, len(self.members))

    # ------------------------------------------------------------------ checkpoints
    def checkpointed(self, request):
        """A shard's report (:class:`~gensim_distw2v.protocol.ShardCheckpoint`) on a checkpoint order,
        with its secret (no shard reports for another)."""
        with self.cluster.cond:
            member = self.members.get(request.name)
            if member is None:
                raise errors.UnknownMember(f"shard_checkpoint: unknown shard {request.name!r}")
        self.checkpointing.report(request.name, request.session, request.report)
