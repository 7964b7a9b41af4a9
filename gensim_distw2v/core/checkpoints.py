"""A session's checkpoints as the dispatcher runs them: state only, no sockets, no locks."""
from gensim_distw2v import protocol

CHECKPOINT_DEADLINE = 120.0  # seconds from order to commit before a cluster checkpoint is given up


class SessionCheckpoints:
    """The checkpoints of one session as the dispatcher runs them: no sockets, no locks (the
    caller's), the clock passed in.

    A cluster checkpoint ``n`` goes: *ordered* (the dispatcher notes where the session would go
    on, :meth:`gensim_distw2v.core.session.Session.resume_point`, and the shards learn of the order in
    their heartbeat replies), *taken* (every shard has copied its rows: they are at least as new
    as the note, so every job it counts as trained is in them), *written* (every shard has its
    copy on disk) and *committed* (the dispatcher's record ``n`` is on disk: a restart resumes
    from it). One is in progress at a time; a timed one is due ``every`` seconds after the last
    ended, but never sooner than 49 times as long as the last took (so that checkpoints cost at
    most about 2 % of the run, whatever the model's size); one asked for meanwhile (an epoch end)
    starts as soon as the current one ends.

    Parameters
    ----------
    spec : gensim_distw2v.protocol.CheckpointSpec
        Where, how often, and the run's identity.
    run : str
        The run's id (the first session's; a resumed session keeps it).
    shards : int
        The session's shards.
    now : float
        The clock (monotonic seconds).
    store : gensim_distw2v.io.store.CheckpointStore
        Where the dispatcher's records go (``spec.dir``'s ``dispatcher`` store): the caller opens
        it, so that this class does no I/O of its own beyond asking the store.
    committed : int, optional
        The checkpoint the session resumed from.
    """

    def __init__(self, spec, run, shards, now, store, committed=0, mark=None):
        self.spec, self.run, self.shards = spec, run, shards
        self.store = store
        self.sequence = max([committed] + self.store.sequences())  # the last number given out
        self.current = None  # the checkpoint in progress: see begin()
        self.wanted = None  # a checkpoint asked for while another was in progress: its number
        self.last_end, self.last_seconds, self.last_bytes = now, 0.0, 0
        self.last_mark = mark  # the session's trained_mark() at the last commit (or the resume)
        self.state = protocol.CheckpointState(committed=committed, taken=committed)

    def due(self, now, mark):
        """Whether a checkpoint should start now: none is in progress, and one was asked for, or it
        is time and the session trained something since the last one (``mark``: its
        :meth:`~gensim_distw2v.core.session.Session.trained_mark`; an idle session, its client gone
        say, writes none)."""
        if self.current is not None:
            return False
        if self.wanted is not None:
            return True
        return mark != self.last_mark and now - self.last_end >= max(self.spec.every, 49 * self.last_seconds)

    def status(self, mark):
        """The :class:`~gensim_distw2v.protocol.CheckpointState`, with the checkpoint in progress and the jobs merged
        since
        the last commit (``mark``: the session's trained_mark() now)."""
        state = self.state
        state.progress = 0 if self.current is None else self.current["sequence"]
        state.unsaved = max(0, mark[1] - (self.last_mark or (None, 0))[1])
        return state

    def ask(self, completed=None):
        """A checkpoint is wanted now (an epoch end: every epoch up to ``completed`` is trained and
        flushed): returns the number it will have, or that of the one in progress if it was
        ordered at that very point (after the epoch, before any job of the next)."""
        current = self.current
        if current is not None and completed is not None:
            point = current["point"]
            if point.epoch == completed + 1 and point.done_below == point.first_job and not point.done_jobs:
                return current["sequence"]
        if self.wanted is None:
            self.wanted = self.sequence + 1
        return self.wanted

    def begin(self, point, finished, now, mark=None):
        """Order checkpoint ``sequence + 1`` of the session at ``point`` (a :class:`~gensim_distw2v.protocol.Resumed`,
        whose
        ``mark`` is the session's trained_mark()); ``finished``: the run's last (every epoch
        trained). Returns its number."""
        self.sequence += 1
        self.wanted = None
        point.checkpoint = self.sequence
        self.current = {"sequence": self.sequence, "point": point, "finished": bool(finished), "started": now,
                        "taken": set(), "written": {}, "mark": mark}
        return self.sequence

    def deadline(self):
        """Seconds a checkpoint may take from order to commit before it is given up (a shard's
        report lost, say): 120, or 10 times as long as the last one took."""
        return max(CHECKPOINT_DEADLINE, 10 * self.last_seconds)

    def expired(self, now):
        """Whether the checkpoint in progress is past its :meth:`deadline`."""
        return self.current is not None and now - self.current["started"] > self.deadline()

    def order(self, index):
        """The order shard ``index`` should act on (a :class:`~gensim_distw2v.protocol.CheckpointOrder`), or None."""
        from gensim_distw2v import protocol

        current = self.current
        if current is None or index in current["taken"]:
            return None
        # keep what the newest record and the last committed checkpoint (the one resumed from: a
        # newer record may be damaged) name, until this one is committed
        kept = self.store.sequences()[-self.store.keep + 1:] + ([self.state.committed] if self.state.committed else [])
        return protocol.CheckpointOrder(sequence=current["sequence"], dir=self.spec.dir, run=self.run,
                                    keep_from=max(1, min([current["sequence"]] + kept)))

    def report(self, index, report, now):
        """Shard ``index``'s :class:`~gensim_distw2v.protocol.ShardCheckpoint`. Returns ``"commit"`` when every shard
        has
        written the checkpoint (the caller then writes :meth:`record`), ``"failed"`` when one could
        not (the checkpoint is dropped), else None."""
        current = self.current
        if current is None or report.sequence != current["sequence"] or not 0 <= index < self.shards:
            return None  # a late report of a checkpoint dropped since
        if report.stage == "failed":
            self.fail(f"shard {index} could not write checkpoint {report.sequence}: {report.error}", now)
            return "failed"
        if report.stage == "taken":
            self.state.copy_seconds += report.seconds
        current["taken"].add(index)
        if len(current["taken"]) == self.shards:
            self.state.taken = max(self.state.taken, current["sequence"])
        if report.stage == "written":
            current["written"][index] = report.bytes
            if len(current["written"]) == self.shards:
                return "commit"
        return None

    def record(self, identity):
        """The dispatcher's record of the current checkpoint: ``(sequence, meta)``."""
        current = self.current
        return current["sequence"], {"run": self.run, "identity": identity, "point": current["point"].to_wire(),
                                     "shards": self.shards, "finished": current["finished"]}

    def committed(self, sequence, nbytes, now):
        """The record of checkpoint ``sequence`` is on disk: it is the one to resume from."""
        current = self.current
        if current is None or current["sequence"] != sequence:
            return
        self.last_seconds = now - current["started"]
        self.last_end, self.last_mark, self.current = now, current["mark"], None
        state = self.state
        state.committed, state.count = sequence, state.count + 1
        state.seconds += self.last_seconds
        self.last_bytes = nbytes + sum(current["written"].values())
        state.bytes += self.last_bytes

    def fail(self, error, now):
        """The checkpoint in progress cannot complete (a shard could not write it, or was lost)."""
        if self.current is not None:
            self.state.taken = max(self.state.taken, self.current["sequence"])  # no one waits for it
            self.state.failed = self.current["sequence"]
        self.current, self.last_end = None, now
        self.state.error = error[:1000]
