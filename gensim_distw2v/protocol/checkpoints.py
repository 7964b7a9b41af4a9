"""Checkpoint messages: a session's checkpoint spec, orders to shards and their reports, restores."""
import dataclasses
import math
import typing

from gensim_distw2v.protocol.constants import CHECKPOINT_STAGES, MAX_PATH
from gensim_distw2v.protocol.jobs import EpochCounts
from gensim_distw2v.protocol.records import Record, _non_negative, _record_map


MAX_EPOCH_JOBS = 10 ** 7  # jobs (or byte ranges) of one epoch a resume point may name as trained (100 G words)
MAX_EPOCHS = 1_000_000  # as SessionConfig's epochs


def _check_dir(record, name="dir"):
    path = getattr(record, name)
    if not path.startswith("/") or len(path) > MAX_PATH or "\x00" in path:
        raise ValueError(f"malformed {record.WHAT}: {name} must be an absolute path of at most {MAX_PATH} "
                         f"characters, got {path[:200]!r}")


def _plain_json(value, what, depth=0):
    """Raise ValueError unless ``value`` is JSON-able plain data (str keys, no bytes), not too deep."""
    if depth > 8:
        raise ValueError(f"malformed {what}: nested too deep")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"malformed {what}: keys must be str")
            _plain_json(item, what, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _plain_json(item, what, depth + 1)
    elif not (value is None or isinstance(value, (str, int, float, bool))) or \
            (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"malformed {what}: {type(value).__name__} is not plain data")


@dataclasses.dataclass
class CheckpointSpec(Record):
    """Checkpoints of a session (client -> dispatcher, in :class:`SessionConfig`): the folder the
    dispatcher and the shards write to (the same path on every node), seconds between timed
    checkpoints, and the run's ``identity`` (vocabulary digest, hyper-parameters, corpus: what must
    be equal to resume). ``resume``: go on from the newest checkpoint in the folder (numbered below
    ``below``, when given: one above failed to load)."""

    WHAT: typing.ClassVar[str] = "checkpoint spec"
    dir: str
    every: float
    identity: dict
    resume: bool = False
    below: typing.Optional[int] = None

    def check(self):
        _check_dir(self)
        if not 0 < self.every <= 10 ** 7:
            raise ValueError(f"checkpoint spec: every must be in (0, 1e7] seconds, got {self.every}")
        _plain_json(self.identity, "checkpoint identity")
        if self.below is not None and self.below < 1:
            raise ValueError(f"checkpoint spec: below must be >= 1, got {self.below}")


@dataclasses.dataclass
class Resumed(Record):
    """Where a session resumed from a checkpoint goes on (dispatcher -> client, in :class:`Opened`):
    the checkpoint's number, the ``epoch`` to train next (every one before it was trained and
    flushed), for a corpus iterable the id of that epoch's first job, the jobs of it already
    trained (every id below ``done_below``, and ``done_jobs``) and the sum of their CRC-32
    (``crc``, modulo 2**64), and the CRC-32 of every epoch's first jobs (``head``): the client's
    corpus must give the same jobs; the per-epoch counts and the loss as they were."""

    WHAT: typing.ClassVar[str] = "resume point"
    checkpoint: int
    epoch: int
    first_job: int
    done_below: int
    done_jobs: list
    crc: int
    epochs: dict
    loss: float
    shards: int = 0  # the shards that wrote the checkpoint (set when it is read)
    run: str = ""  # the run's id (likewise)
    head: list = dataclasses.field(default_factory=list)  # CRC-32 of an epoch's first jobs' words, in order
    range_bytes: int = 0  # a corpus file's ranges, as cut before (their indices are the trained ones)

    def check(self):
        _non_negative(self, "checkpoint", "epoch", "first_job", "done_below", "crc", "shards", "range_bytes")
        if not (self.first_job <= self.done_below <= self.first_job + MAX_EPOCH_JOBS < 2 ** 53
                and self.epoch <= MAX_EPOCHS and len(self.done_jobs) <= MAX_EPOCH_JOBS
                and self.checkpoint < 10 ** 8 and self.crc < 2 ** 64 and len(self.epochs) <= MAX_EPOCHS + 1):
            raise ValueError(f"resume point: out of bounds (first_job {self.first_job}, done_below {self.done_below}: "
                             f"at most {MAX_EPOCH_JOBS} jobs apart; epoch {self.epoch}, {len(self.epochs)} epochs' "
                             f"counts: at most {MAX_EPOCHS}; {len(self.done_jobs)} done_jobs)")
        if not all(isinstance(j, int) and not isinstance(j, bool) and 0 <= j < 2 ** 53 for j in self.done_jobs):
            raise ValueError("resume point: done_jobs must be job ids (ints >= 0)")
        if len(self.head) > 64 or not all(isinstance(c, int) and 0 <= c < 2 ** 32 for c in self.head):
            raise ValueError("resume point: head must be at most 64 CRC-32 values")
        self.epochs = _record_map(self.epochs, EpochCounts)


@dataclasses.dataclass
class CheckpointOrder(Record):
    """Write a checkpoint of the session's rows (dispatcher -> shard, in :class:`ShardBeat`):
    its number, the folder, the run it is of, and ``keep_from``: checkpoints numbered below it
    are no longer needed."""

    WHAT: typing.ClassVar[str] = "checkpoint order"
    sequence: int
    dir: str
    run: str
    keep_from: int

    def check(self):
        _check_dir(self)
        if not 1 <= self.sequence < 10 ** 8 or not 1 <= self.keep_from <= self.sequence or len(self.run) > 64:
            raise ValueError(f"checkpoint order: sequence must be in [1, 1e8), keep_from in [1, sequence], run at most "
                             f"64 characters, got {self.sequence}, {self.keep_from}, {self.run[:80]!r}")


@dataclasses.dataclass
class ShardCheckpoint(Record):
    """A shard's report on a checkpoint order (shard -> dispatcher): its rows were copied
    (``taken``: merges go on meanwhile), written to disk (``written``), or could not be
    (``failed``, with the ``error``)."""

    WHAT: typing.ClassVar[str] = "shard checkpoint report"
    sequence: int
    stage: str
    error: typing.Optional[str] = None
    seconds: float = 0.0  # taking the copy, or writing it
    bytes: int = 0  # written

    def check(self):
        if self.stage not in CHECKPOINT_STAGES:
            raise ValueError(f"shard checkpoint report: stage must be one of {CHECKPOINT_STAGES}, got {self.stage!r}")
        _non_negative(self, "sequence", "seconds", "bytes")
        if self.error is not None:
            self.error = self.error[:1000]


@dataclasses.dataclass
class RestoreSpec(Record):
    """A resumed session's rows come from checkpoint ``sequence`` of run ``run`` in ``dir``, which
    ``count`` shards wrote (client -> shard, in :class:`ShardSpec`; the count may differ from the
    session's: a shard then reads its rows from the files of every shard that held some)."""

    WHAT: typing.ClassVar[str] = "restore spec"
    dir: str
    sequence: int
    count: int
    run: str

    def check(self):
        _check_dir(self)
        if not 1 <= self.sequence < 10 ** 8 or not 1 <= self.count <= 4096:
            raise ValueError(f"restore spec: sequence must be in [1, 1e8) and count in [1, 4096], got "
                             f"{self.sequence} and {self.count}")


@dataclasses.dataclass
class CheckpointState(Record):
    """A session's checkpoints (in :class:`Progress`): the last one every shard has ``taken``
    (copied), the last ``committed`` (whole on disk: the one a restart resumes from), the last that
    ``failed`` and why (``error``), how many were committed, and their cost: seconds from order to
    commit, bytes, and the seconds the shards' copies took (merges wait for them); the one in
    ``progress`` (0: none), and the jobs merged since the last committed one (``unsaved``: those a
    resume would train again)."""

    WHAT: typing.ClassVar[str] = "checkpoint state"
    taken: int = 0
    committed: int = 0
    count: int = 0
    seconds: float = 0.0
    bytes: int = 0
    error: typing.Optional[str] = None
    failed: int = 0  # the last that could not be completed (``error`` says why)
    copy_seconds: float = 0.0  # the shards' copies of their rows, summed (merges wait for them)
    progress: int = 0  # the checkpoint in progress (0: none)
    unsaved: int = 0  # jobs merged since the last committed checkpoint

    def check(self):
        _non_negative(self, "taken", "committed", "count", "seconds", "bytes", "failed", "copy_seconds", "progress",
                      "unsaved")


@dataclasses.dataclass
class ShardCheckpointed(Record):
    """A shard's report (its :class:`ShardCheckpoint`) on a checkpoint order of session ``session``."""

    WHAT: typing.ClassVar[str] = "shard_checkpoint"
    name: str
    session: str
    report: ShardCheckpoint
    secret: str = ""  # the shard's secret from its hello
