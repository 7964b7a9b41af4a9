"""The dispatcher's side of checkpoints: where a resumed session starts, orders to the shards, their
reports, and the record that commits a checkpoint (written last).

The session notes where it would go on (:meth:`gensim_distw2v.core.session.Session.resume_point`),
the shards copy and write their rows (ordered in their heartbeat replies, reported by
``shard_checkpoint``), and the dispatcher's record commits it
(:class:`gensim_distw2v.core.checkpoints.SessionCheckpoints` keeps the state).
"""
import logging
import time
import uuid

from gensim_distw2v import protocol
from gensim_distw2v.io.store import CheckpointError, CheckpointStore, identity_differences
from gensim_distw2v.protocol import errors
from gensim_distw2v.protocol.constants import RUNNING

logger = logging.getLogger(__name__)

__all__ = ["Checkpointing", "start_point"]


DISPATCHER_RECORD_BYTES = 4 * (1 << 20)  # a dispatcher's checkpoint record: a manifest and small JSON, no arrays
RECORD_READ_SECONDS = 30.0  # the longest the dispatcher spends reading a checkpoint folder when a session opens


def start_point(spec, key=None):
    """A session with checkpoints: ``(run id, resume point or None)``. Resuming, the newest committed
    checkpoint in the folder (numbered below ``spec.below``), checked to be of the same run;
    starting afresh, a folder without an unfinished run. ``key``: the cluster's (records are signed
    with it). Reads are bounded in size and time (:data:`DISPATCHER_RECORD_BYTES`,
    :data:`RECORD_READ_SECONDS`); the caller holds no lock.

    Raises
    ------
    NoCheckpoint
        Nothing to resume: no usable checkpoint. (A finished run's last checkpoint is a resume point
        past its last epoch: the session trains nothing and the client takes the trained weights.)
    OtherRun
        The checkpoint is of a run with another identity (naming what differs).
    CheckpointUnreadable
        The folder cannot be used, or the checkpoint's record is malformed.
    BadRequest
        Starting afresh in a folder that holds an unfinished run.
    """
    try:
        found = CheckpointStore(spec.dir, "dispatcher", key=key).latest(
            below=spec.below, max_bytes=DISPATCHER_RECORD_BYTES, seconds=RECORD_READ_SECONDS)
    except OSError as err:
        raise errors.CheckpointUnreadable(f"checkpoint_dir {spec.dir}: cannot use it ({err})") from None
    if not spec.resume:
        if found is not None and not found[1].get("finished"):
            raise errors.BadRequest(
                f"checkpoint_dir {spec.dir} holds checkpoint {found[0]} of an unfinished run: to go on with it, "
                f"pass resume_from={spec.dir!r} to train() (--resume on the command line); to start afresh, "
                f"give an empty folder (or delete that one)")
        return uuid.uuid4().hex, None
    if found is None:
        raise errors.NoCheckpoint(f"resume: no usable checkpoint in {spec.dir}" + (
            f" numbered below {spec.below}" if spec.below else "") + " (none written yet, or every one damaged: "
            "the dispatcher's log names what is wrong with each)")
    sequence, meta, _arrays = found
    if not isinstance(meta, dict) or not isinstance(meta.get("identity"), dict):
        raise errors.CheckpointUnreadable(f"resume: checkpoint {sequence} in {spec.dir} has no run identity")
    differ = identity_differences(meta["identity"], spec.identity)
    if differ:
        raise errors.OtherRun(
            f"resume: checkpoint {sequence} in {spec.dir} is of another run: " + "; ".join(differ)
            + ". Resume with the same corpus, vocabulary and hyper-parameters, or give another checkpoint_dir")
    if meta.get("finished"):  # its client may have died before it had the weights: the session hands them back
        logger.info("resume: the run in %s finished (checkpoint %i): its session trains nothing and hands back "
                    "the trained weights", spec.dir, sequence)
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


class Checkpointing:
    """Checkpoints of the cluster's session (see the module's docstring).

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    """

    def __init__(self, cluster):
        self.cluster = cluster

    def begin(self, session, now):
        """Order a checkpoint of the running session (the lock held)."""
        point = session.resume_point(0)
        finished = point.epoch >= session.config.epochs
        sequence = session.checkpoints.begin(point, finished, now, session.trained_mark())
        logger.info("checkpoint %i of session %s ordered: epoch %i, %i jobs of it trained%s", sequence, session.id,
                    point.epoch, point.done_below - point.first_job + len(point.done_jobs),
                    " (the run's last)" if finished else "")
        self.cluster.beats.notify_all()  # the shards' long polls carry the order

    def watch(self, session, now):
        """The monitor's look at a running session's checkpoints: one overdue fails; one due begins
        (the lock held)."""
        checkpoints = session.checkpoints
        if checkpoints is None:
            return
        if checkpoints.expired(now):
            checkpoints.fail(f"checkpoint {checkpoints.sequence} was not complete within "
                             f"{checkpoints.deadline():.0f} s", now)
            logger.error("session %s: %s; training goes on, the last complete checkpoint is %i",
                         session.id, checkpoints.state.error, checkpoints.state.committed)
            self.cluster.cond.notify_all()
        if session.state == RUNNING and checkpoints.due(now, session.trained_mark()):
            self.begin(session, now)

    def ask(self, sid):
        """The client asks for a checkpoint now (at an epoch end, before it goes on): its number
        (``progress``'s ``checkpoints.taken`` reaches it once every shard has copied its rows,
        ``committed`` once it is on disk)."""
        cluster = self.cluster
        with cluster.cond:
            session = cluster.session_of(sid)
            session.client_seen = now = time.monotonic()
            if session.checkpoints is None:
                raise errors.BadRequest(f"checkpoint: session {sid} has no checkpoint_dir")
            sequence = session.checkpoints.ask(session.advance())
            if session.checkpoints.due(now, session.trained_mark()):
                self.begin(session, now)
            return sequence

    def report(self, name, sid, report):
        """A shard's report on a checkpoint order; the last one commits the checkpoint: the record is
        written (outside the lock: the session goes on)."""
        cluster = self.cluster
        with cluster.cond:
            session = cluster.session_of(sid)
            checkpoints = session.checkpoints
            if checkpoints is None:
                raise errors.BadRequest(f"shard_checkpoint: session {sid} has no checkpoint_dir")
            now = time.monotonic()
            outcome = checkpoints.report(cluster.shard_index(session, name), report, now)
            if outcome == "failed":
                logger.error("checkpoint %i of session %s failed: %s; training goes on, the last complete "
                             "checkpoint is %i", report.sequence, sid, checkpoints.state.error,
                             checkpoints.state.committed)
            if outcome != "commit":
                cluster.cond.notify_all()
                return
            sequence, meta = checkpoints.record(session.config.checkpoint.identity)
        try:
            nbytes = checkpoints.store.size(checkpoints.store.write(meta, {}, sequence=sequence))
            error = None
        except (OSError, ValueError) as err:
            error = f"the dispatcher could not write its record of checkpoint {sequence}: {err}"
        with cluster.cond:
            now = time.monotonic()
            if error:
                checkpoints.fail(error, now)
                logger.error("%s; training goes on, the last complete checkpoint is %i", error,
                             checkpoints.state.committed)
            else:
                checkpoints.committed(sequence, nbytes, now)
                logger.info("checkpoint %i of session %s committed in %.2f s (%.1f MB)", sequence, sid,
                            checkpoints.last_seconds, checkpoints.last_bytes / 1e6)
                if cluster.session is session and session.state == RUNNING \
                        and checkpoints.due(now, session.trained_mark()) and checkpoints.wanted is not None:
                    self.begin(session, now)
            cluster.cond.notify_all()
