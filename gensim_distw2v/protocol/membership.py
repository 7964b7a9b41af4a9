"""Membership: hellos and heartbeats of workers and shards (one generic membership: a worker and a
shard send the same records), the session work calls of a worker, and the replies that put them in
a session."""
import dataclasses
import re
import typing

from gensim_distw2v.protocol.arrays import check_turn
from gensim_distw2v.protocol.checkpoints import CheckpointOrder, Resumed
from gensim_distw2v.protocol.constants import LONG_POLL, MAX_URI, MEMBER_ID
from gensim_distw2v.protocol.errors import BadRequest, Code
from gensim_distw2v.protocol.nodes import NodeMetrics
from gensim_distw2v.protocol.records import Record, _non_negative
from gensim_distw2v.protocol.rounds import RoundReport
from gensim_distw2v.protocol.session import SessionConfig

_MEMBER_ID = re.compile(MEMBER_ID)
_CODES = frozenset(code.value for code in Code)


def check_member(name, uri, prefix, what):
    """Refuse a worker's or shard's name (``prefix`` and 1 to 64 of ``[A-Za-z0-9_.-]``) or URI that is
    not one, or is absurdly long (:class:`~gensim_distw2v.protocol.errors.BadRequest`)."""
    if not isinstance(name, str) or not name.startswith(prefix) or not _MEMBER_ID.fullmatch(name[len(prefix):]):
        raise BadRequest(f"{what}: name must be {prefix} and 1 to 64 letters, digits, '_', '.' or '-'")
    if not isinstance(uri, str) or not uri.startswith("PYRO:") or len(uri) > MAX_URI:
        raise BadRequest(f"{what}: uri must be a Pyro URI (PYRO:...) of at most {MAX_URI} characters")


def _check_wait(record, op, most):
    if isinstance(record.wait, bool) or not 0 <= record.wait <= most:
        raise BadRequest(f"{op}: wait must be a number of seconds in [0, {most:g}]")


# ---------------------------------------------------------------------------------------------- members
@dataclasses.dataclass
class Hello(Record):
    """A worker (op ``hello``) or a shard (op ``shard_hello``) tells the dispatcher of itself: its
    registration name, its URI, its versions, and a worker's trainer threads (a shard: None)."""

    WHAT: typing.ClassVar[str] = "hello"
    name: str
    uri: str
    versions: dict
    threads: typing.Optional[int] = None

    def check(self):
        if self.threads is not None and not 1 <= self.threads <= 4096:
            raise BadRequest(f"hello: threads must be in [1, 4096], got {self.threads}")


@dataclasses.dataclass
class Heartbeat(Record):
    """A worker (op ``heartbeat``) or a shard (op ``shard_beat``) is alive: ``known`` is the session it
    is in (or None); the dispatcher answers once the session differs from it, or after ``wait``
    seconds (at most :data:`~gensim_distw2v.protocol.constants.LONG_POLL`). ``metrics``: its
    :class:`NodeMetrics` (of its role). ``poisoned`` (a shard's only): ``{rank (str): why}``, workers
    of session ``known`` whose merges the shard refused as beyond the session's bound."""

    WHAT: typing.ClassVar[str] = "heartbeat"
    name: str
    known: typing.Optional[str] = None
    wait: float = 0.0
    metrics: typing.Optional[NodeMetrics] = None
    poisoned: typing.Optional[dict] = None
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only
    count: typing.Optional[str] = None  # the count lease it last heard of (news is what differs)

    def check(self):
        _check_wait(self, "heartbeat", LONG_POLL)
        if self.count is not None and not 0 < len(self.count) <= 64:
            raise BadRequest(f"heartbeat: count must be 1 to 64 characters, got {len(self.count)}")
        if self.poisoned is not None and not (len(self.poisoned) <= 4096 and all(
                isinstance(k, str) and k.isdigit() and len(k) < 12 and isinstance(v, str) and len(v) <= 4096
                for k, v in self.poisoned.items())):
            raise BadRequest("shard_beat: poisoned must be a dict of at most 4096 {rank (decimal str): why (str)}")


@dataclasses.dataclass
class Leave(Record):
    """A worker (op ``leave``) or a shard (op ``shard_leave``) shuts down cleanly."""

    WHAT: typing.ClassVar[str] = "leave"
    name: str
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only


# ---------------------------------------------------------------------------------------------- a worker's session
@dataclasses.dataclass
class Join(Record):
    """A worker joins the running session ``session``."""

    WHAT: typing.ClassVar[str] = "join"
    name: str
    session: str
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only


@dataclasses.dataclass
class GetJobs(Record):
    """A worker asks for up to ``max_jobs`` jobs, waiting up to ``wait`` seconds while there are none
    (a long poll: jobs put wake it), unless there is news it has not had: an epoch drained later
    than ``drained``, the last it was told of (-1: none)."""

    WHAT: typing.ClassVar[str] = "get_jobs"
    name: str
    session: str
    max_jobs: int
    wait: float = 0.2
    drained: int = -1
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only

    def check(self):
        if not 1 <= self.max_jobs <= 1024:
            raise BadRequest("get_jobs: max_jobs must be an int in [1, 1024]")
        _check_wait(self, "get_jobs", 1)


@dataclasses.dataclass
class BeginRound(Record):
    """A worker asks whether it may merge its round ``turn`` (``[epoch, round]``) now, waiting up to
    ``wait`` seconds for its turn."""

    WHAT: typing.ClassVar[str] = "begin_round"
    name: str
    session: str
    turn: list
    wait: float = 0.5
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only

    def check(self):
        try:
            self.turn = check_turn(self.turn, "begin_round")
        except ValueError as err:
            raise BadRequest(str(err)) from None
        _check_wait(self, "begin_round", 1)


@dataclasses.dataclass
class RoundDone(Record):
    """A worker's merge round is folded into every shard: its :class:`RoundReport`."""

    WHAT: typing.ClassVar[str] = "round_done"
    name: str
    session: str
    report: "RoundReport"
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only


@dataclasses.dataclass
class FileCheck(Record):
    """A worker's verdict on the session's corpus file: ``problem`` is None if it sees the client's
    file, else what is wrong with it there."""

    WHAT: typing.ClassVar[str] = "file_check"
    name: str
    session: str
    problem: typing.Optional[str]
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only

    def check(self):
        if self.problem is not None:
            self.problem = self.problem[:1000]


@dataclasses.dataclass
class QuitSession(Record):
    """The session failed on a worker: it leaves it for good; ``reason`` says why (for the client),
    ``code`` the error's code if it had one."""

    WHAT: typing.ClassVar[str] = "quit_session"
    name: str
    session: str
    reason: str
    code: typing.Optional[str] = None  # the error code of why, if it had one (shard_lost: a shard, not the worker)
    secret: str = ""  # the member's secret from its hello: a member calls for its own name only

    def check(self):
        self.reason = self.reason[:1000]
        if self.code is not None and self.code not in _CODES:
            raise BadRequest(f"quit_session: unknown error code {self.code[:40]!r}")


@dataclasses.dataclass
class Beat(Record):
    """The dispatcher's answer to a worker's heartbeat: the session to be in (or None);
    ``hello``: the dispatcher does not know the worker (it restarted or dropped it): say hello.
    ``count``, ``count_corpus`` and ``count_shards``: the vocabulary count the dispatcher leases
    (:mod:`gensim_distw2v.dispatcher.counts`), its corpus (a digest) and its shards: the only count a
    worker counts for."""

    WHAT: typing.ClassVar[str] = "heartbeat reply"
    session: typing.Optional[str]
    hello: bool
    count: typing.Optional[str] = None
    count_corpus: typing.Optional[str] = None
    count_shards: typing.Optional[list] = None


@dataclasses.dataclass
class ShardBeat(Record):
    """The dispatcher's answer to a shard's heartbeat: the session it should hold (or None), the
    ranks of the workers in it, and ``next_rank`` (ranks below it were handed out before this
    answer: a shard frees the slots of those not in ``ranks``). ``hello``: say hello again.
    ``owner``, ``checkpoint_dir`` and ``run``: who may open the session on the shard (a digest of
    the client's secret) and the only checkpoints it may restore rows from. ``count`` and
    ``count_owner``: the one vocabulary count it may hold, and a digest of its secret."""

    WHAT: typing.ClassVar[str] = "shard heartbeat reply"
    session: typing.Optional[str]
    ranks: list
    next_rank: int
    hello: bool
    checkpoint: typing.Optional["CheckpointOrder"] = None  # write the session's rows to a checkpoint
    owner: typing.Optional[str] = None  # owner_digest() of the session's owner secret: who may open it on a shard
    checkpoint_dir: typing.Optional[str] = None  # the session's checkpoint folder: the only one it may restore from
    run: typing.Optional[str] = None  # the run its checkpoints are of
    count: typing.Optional[str] = None  # the vocabulary count the shard may hold (dispatcher.counts), if any
    count_owner: typing.Optional[str] = None  # owner_digest() of that count's secret: who may open it

    def check(self):
        if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in self.ranks):
            raise ValueError("shard heartbeat reply: ranks must be ints >= 0")
        _non_negative(self, "next_rank")


def _check_shard_list(record):
    if not record.shards or not all(isinstance(s, (list, tuple)) and len(s) == 2 and all(isinstance(x, str) for x in s)
                                    for s in record.shards):
        raise ValueError(f"malformed {record.WHAT}: shards must be a non-empty list of [name, uri]")
    record.shards = [list(s) for s in record.shards]


@dataclasses.dataclass
class Opened(Record):
    """The dispatcher's answer to ``open_session``: the session and its shards, in order (shard p
    of P holds rows p, p + P, ...)."""

    WHAT: typing.ClassVar[str] = "open_session reply"
    session: str
    shards: list
    token: str  # the session's secret, the workers' too: their merges and downloads need it
    resumed: typing.Optional["Resumed"] = None  # a session resumed from a checkpoint: where it goes on
    owner: str = ""  # the client's own secret (no worker has it): uploads, start, progress, close need it

    def check(self):
        _check_shard_list(self)


@dataclasses.dataclass
class Joined(Record):
    """The dispatcher's answer to a worker's ``join``: the :class:`SessionConfig`, the worker's
    rank (rank 0 continues the client's random stream) and the session's shards."""

    WHAT: typing.ClassVar[str] = "join reply"
    config: "SessionConfig"
    rank: int
    shards: list
    token: str  # the session's secret (Opened.token): merges carry it

    def check(self):
        _non_negative(self, "rank")
        _check_shard_list(self)
