"""Membership: hellos and heartbeats of workers and shards, and the replies that put them in a session."""
import dataclasses
import typing

from gensim_distw2v.protocol.checkpoints import CheckpointOrder, Resumed
from gensim_distw2v.protocol.records import Record, _non_negative
from gensim_distw2v.protocol.session import SessionConfig


@dataclasses.dataclass
class Hello(Record):
    """What a worker tells the dispatcher of itself when it says hello."""

    WHAT: typing.ClassVar[str] = "hello"
    versions: dict
    threads: int

    def check(self):
        if not 1 <= self.threads <= 4096:
            raise ValueError(f"hello: threads must be in [1, 4096], got {self.threads}")


@dataclasses.dataclass
class Beat(Record):
    """The dispatcher's answer to a worker's heartbeat: the session to be in (or None);
    ``hello``: the dispatcher does not know the worker (it restarted or dropped it): say hello."""

    WHAT: typing.ClassVar[str] = "heartbeat reply"
    session: typing.Optional[str]
    hello: bool


@dataclasses.dataclass
class ShardHello(Record):
    """What a shard tells the dispatcher of itself when it says hello."""

    WHAT: typing.ClassVar[str] = "shard hello"
    versions: dict


@dataclasses.dataclass
class ShardBeat(Record):
    """The dispatcher's answer to a shard's heartbeat: the session it should hold (or None), the
    ranks of the workers in it, and ``next_rank`` (ranks below it were handed out before this
    answer: a shard frees the slots of those not in ``ranks``). ``hello``: say hello again."""

    WHAT: typing.ClassVar[str] = "shard heartbeat reply"
    session: typing.Optional[str]
    ranks: list
    next_rank: int
    hello: bool
    checkpoint: typing.Optional["CheckpointOrder"] = None  # write the session's rows to a checkpoint

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
    token: str  # the session's secret: close, uploads and merges need it (status() never shows it)
    resumed: typing.Optional["Resumed"] = None  # a session resumed from a checkpoint: where it goes on

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
