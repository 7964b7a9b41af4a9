"""Progress and status: what the dispatcher, a shard and a worker answer about themselves."""
import dataclasses
import typing

from gensim_distw2v.protocol.checkpoints import CheckpointState
from gensim_distw2v.protocol.constants import FAILED, LONG_POLL
from gensim_distw2v.protocol.errors import Code, fault
from gensim_distw2v.protocol.jobs import EpochCounts
from gensim_distw2v.protocol.nodes import NodeMetrics
from gensim_distw2v.protocol.records import Record, _non_negative, _record_map


_CODES = frozenset(code.value for code in Code)


# ---------------------------------------------------------------------------------------------- progress
@dataclasses.dataclass
class WorkerCounts(Record):
    """One worker's totals in a session: raw words trained, merge rounds, bytes to and from the
    shards (of them, ``exact_*`` in float32 epoch flushes), wall seconds in merge rounds and
    their CPU, its trainer threads' CPU in jobs, seconds its trainers waited for a round, and its
    process's CPU joining the session (``setup_cpu``: join, downloads, its replica)."""

    WHAT: typing.ClassVar[str] = "worker counters"
    words: int = 0
    merges: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    exact_bytes_up: int = 0
    exact_bytes_down: int = 0
    merge_seconds: float = 0.0
    merge_cpu: float = 0.0
    flush_cpu: float = 0.0
    kernel_cpu: float = 0.0
    stall_seconds: float = 0.0
    setup_cpu: float = 0.0
    routine_nogil_cpu: float = 0.0
    take_cpu: float = 0.0
    overlapped: int = 0
    lag_words: int = 0

    def check(self):
        _non_negative(self, *self.names())

    def add(self, report, words):
        """Count a merge round (:class:`RoundReport`) whose jobs carried ``words`` raw words; its
        seconds are the worker's totals so far (a report that arrives late does not lower them)."""
        self.words += words
        self.merges += report.rounds
        self.overlapped += report.overlapped
        self.lag_words += report.lag_words
        self.bytes_up += report.bytes_up
        self.bytes_down += report.bytes_down
        if report.exact:
            self.exact_bytes_up += report.bytes_up
            self.exact_bytes_down += report.bytes_down
        for name in report.TOTALS:
            setattr(self, name, max(getattr(self, name), getattr(report, name)))


@dataclasses.dataclass
class Failure(Record):
    """Why a session failed: a :class:`~gensim_distw2v.protocol.errors.Code` (its value) and a message
    saying what happened (:meth:`fault` gives the matching fault)."""

    WHAT: typing.ClassVar[str] = "session failure"
    code: str
    message: str

    def check(self):
        if self.code not in _CODES:
            raise ValueError(f"session failure: unknown code {self.code[:40]!r}")

    def fault(self):
        """The :class:`~gensim_distw2v.protocol.errors.ClusterFault` of this code, with this message."""
        return fault(self.code, self.message)


@dataclasses.dataclass
class Progress(Record):
    """The dispatcher's answer to ``progress``: the session's ``state`` (``running``, or ``failed``
    with its :class:`Failure` in ``failure``: the session cannot go on); per epoch (str keys) its
    :class:`EpochCounts`; jobs ``queued`` and ``in_flight``; the summed ``loss``; merge rounds
    reported; per worker its :class:`WorkerCounts`; ``flushed``: the last epoch every worker
    flushed (or None); ``file_checks`` (worker -> None or what is wrong with its view of the corpus
    file) and ``file_waiting`` (registered workers that have neither checked the corpus file nor
    quit; None without a corpus file)."""

    WHAT: typing.ClassVar[str] = "progress reply"
    state: str
    failure: typing.Optional[Failure]
    epochs: dict
    queued: int
    in_flight: int
    loss: float
    merges: int
    workers: dict
    flushed: typing.Optional[int]
    file_checks: dict
    file_waiting: typing.Optional[int] = None
    checkpoints: typing.Optional["CheckpointState"] = None  # with checkpoint_dir
    nodes: typing.Optional[dict] = None  # name -> NodeMetrics: the session's workers, shards and the dispatcher

    def check(self):
        if (self.state == FAILED) != (self.failure is not None):
            raise ValueError("progress reply: a failed session has its failure, and only a failed one")
        self.epochs = _record_map(self.epochs, EpochCounts)
        self.workers = _record_map(self.workers, WorkerCounts)
        if self.nodes is not None:
            self.nodes = _record_map(self.nodes, NodeMetrics)

    def epoch(self, epoch):
        """The :class:`EpochCounts` of ``epoch`` (zeros before it starts)."""
        return self.epochs.get(str(epoch), EpochCounts())

    def total(self, counter):
        """A :class:`WorkerCounts` field summed over the workers."""
        return sum(getattr(w, counter) for w in self.workers.values())


# ---------------------------------------------------------------------------------------------- status
@dataclasses.dataclass
class MemberStatus(Record):
    """A worker as the dispatcher sees it: threads, rank in the session (or None), seconds since
    last heard, jobs in flight on it, raw words it merged in this session, its URI."""

    WHAT: typing.ClassVar[str] = "worker status"
    threads: int
    rank: typing.Optional[int]
    silent: float
    in_flight: int
    words: int
    uri: str = ""


@dataclasses.dataclass
class ShardMemberStatus(Record):
    """A shard as the dispatcher sees it: its URI and seconds since last heard."""

    WHAT: typing.ClassVar[str] = "shard status"
    uri: str
    silent: float


@dataclasses.dataclass
class SessionState(Record):
    """A session's id and state (``uploading``, ``running`` or ``failed``: see
    :mod:`gensim_distw2v.core.session`; a closed session is no longer shown)."""

    WHAT: typing.ClassVar[str] = "session state"
    id: str
    state: str


@dataclasses.dataclass
class Status(Record):
    """The dispatcher's answer to ``status``: its versions, the workers (name ->
    :class:`MemberStatus`) and shards (name -> :class:`ShardMemberStatus`) registered, and the
    session (or None)."""

    WHAT: typing.ClassVar[str] = "status reply"
    versions: dict
    workers: dict
    shards: dict
    session: typing.Optional[SessionState]

    def check(self):
        self.workers = _record_map(self.workers, MemberStatus)
        self.shards = _record_map(self.shards, ShardMemberStatus)


@dataclasses.dataclass
class HeldStatus(Record):
    """What a shard holds of a session: its index of ``count`` shards and rows, whether started,
    merge calls and their CPU seconds, bytes in and out, rows the ``damp`` rule took part of, and
    the workers with a slot."""

    WHAT: typing.ClassVar[str] = "held session status"
    id: str
    index: int
    count: int
    rows: int
    started: bool
    merges: int
    merge_cpu: float
    bytes_in: int
    bytes_out: int
    damped: int
    workers: int
    exact_cpu: float = 0.0  # of merge_cpu, the exact (epoch-end) parts'
    routine_nogil_cpu: float = 0.0  # of merge_cpu, the routine parts' compiled folds and replies (no GIL)


@dataclasses.dataclass
class ShardStatus(Record):
    """A shard's answer to ``status``: its name, the session it holds (or None) and its
    :class:`NodeMetrics` now."""

    WHAT: typing.ClassVar[str] = "shard status reply"
    name: str
    session: typing.Optional[HeldStatus]
    node: typing.Optional[NodeMetrics] = None


@dataclasses.dataclass
class WorkerStatus(Record):
    """A worker's answer to ``status``: name, threads, the dispatcher it follows (URI or None)
    and the session it trains (or None)."""

    WHAT: typing.ClassVar[str] = "worker status reply"
    name: str
    threads: int
    dispatcher: typing.Optional[str]
    session: typing.Optional[str]


# ---------------------------------------------------------------------------------------------- requests
@dataclasses.dataclass
class StatusRequest(Record):
    """``status``: what the server is and holds (no fields)."""

    WHAT: typing.ClassVar[str] = "status request"


@dataclasses.dataclass
class ProgressRequest(Record):
    """``progress`` of session ``session``; with its ``token`` (its client's call) it counts as word
    from the client; with ``nodes``, every node's metrics too. With ``epoch`` and ``wait`` it is a
    long poll: the answer comes once that epoch is done (every job merged and flushed), the session
    is no longer running, or ``wait`` seconds have passed (at most
    :data:`~gensim_distw2v.protocol.constants.LONG_POLL`): a client waiting for an epoch's end
    hears of it at once without asking many times a second."""

    WHAT: typing.ClassVar[str] = "progress request"
    session: str
    token: typing.Optional[str] = None
    nodes: bool = False
    epoch: typing.Optional[int] = None
    wait: float = 0.0

    def check(self):
        if isinstance(self.wait, bool) or not 0 <= self.wait <= LONG_POLL:
            raise fault(Code.BAD_REQUEST, f"progress: wait must be a number of seconds in [0, {LONG_POLL:g}]")
        if self.epoch is not None and self.epoch < 0:
            raise fault(Code.BAD_REQUEST, f"progress: epoch must be >= 0, got {self.epoch}")
        if self.wait and self.epoch is None:
            raise fault(Code.BAD_REQUEST, "progress: a wait needs the epoch whose end it waits for")
