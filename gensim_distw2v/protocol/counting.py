"""Counting a corpus file's vocabulary on the cluster: the client's requests to the workers and the
shards, the workers' parts, and the replies (:mod:`gensim_distw2v.client.vocab` runs a count).

A count has an id and a secret ``token`` the client makes; the shards hold its words partitioned by
a hash of each word (part ``index`` of ``parts``); each byte range of the corpus is counted by a
worker, whose table of the range goes to the shards in ``parts`` pieces, each piece added once
per range (``range``). The count's secret stays between the client and the shards (open, take,
close); a worker is given, per range it is asked to count, that range's token
(:func:`~gensim_distw2v.protocol.auth.range_token`), which a shard checks against the range a part names: a worker can add the
ranges it was given, no other.
"""
import dataclasses
import hashlib
import typing

import numpy as np

from gensim_distw2v.protocol.records import Record, _check_array, _non_negative
from gensim_distw2v.protocol.session import MAX_READ_BYTES, CorpusFileSpec

__all__ = ["CountOpen", "CountRef", "CountPart", "CountTake", "CountChunk", "CountRanges", "Counted",
           "MAX_COUNT_PARTS", "MAX_RANGES_PER_CALL", "MAX_TAKE_WORDS", "corpus_digest"]

MAX_COUNT_PARTS = 4096  # shards of a count at most (as of a session)
MAX_RANGES_PER_CALL = 1024  # byte ranges one worker call counts at most
MAX_TAKE_WORDS = 1_000_000  # words one count_take answers at most
MAX_RANGE_ID = 2 ** 40
MAX_ID = 64  # characters of a count's id and token at most


def corpus_digest(corpus):
    """What names a count's corpus (a :class:`CorpusFileSpec`): a digest of its path, size, fingerprint and
    files, the same for the client's lease (:class:`CountRef`) and a worker's ranges (:class:`CountRanges`)."""
    text = repr((corpus.path, int(corpus.size), corpus.digest, [list(f) for f in corpus.files or ()]))
    return hashlib.blake2b(text.encode("utf8"), digest_size=16).hexdigest()


def _check_shards(record, shards, what):
    """``shards`` as ``[name, uri]`` lists (1 to MAX_COUNT_PARTS of them)."""
    if not 0 < len(shards) <= MAX_COUNT_PARTS or not all(
            isinstance(s, (list, tuple)) and len(s) == 2 and all(isinstance(v, str) for v in s) for s in shards):
        raise ValueError(f"{what}: shards must be 1 to {MAX_COUNT_PARTS} [name, uri] pairs")
    return [list(s) for s in shards]


def _check_ids(record):
    for name in ("count", "token"):
        value = getattr(record, name)
        if not 0 < len(value) <= MAX_ID:
            raise ValueError(f"malformed {record.WHAT}: {name} must be 1 to {MAX_ID} characters, got {len(value)}")


def _check_words(record):
    """``words``, ``offsets``, ``counts`` and ``firsts`` as checked arrays that fit each other."""
    words = _check_array(record, "words", "uint8", ndim=1)
    offsets = _check_array(record, "offsets", "int64", ndim=1)
    counts = _check_array(record, "counts", "int64", ndim=1)
    firsts = _check_array(record, "firsts", "int64", ndim=1, shape=(len(counts),))
    if len(offsets) != len(counts) + 1 or offsets[0] != 0 or offsets[-1] != len(words):
        raise ValueError(f"malformed {record.WHAT}: offsets must have one more entry than counts, from 0 to "
                         f"len(words)")
    if len(counts) and (np.any(np.diff(offsets) < 0) or counts.min() < 1 or firsts.min() < 0):
        raise ValueError(f"malformed {record.WHAT}: offsets must not decrease, counts must be >= 1 and firsts >= 0")


@dataclasses.dataclass
class CountOpen(Record):
    """Hold part ``index`` of ``parts`` of a count's words (client -> shard)."""

    WHAT: typing.ClassVar[str] = "count open"
    count: str
    token: str
    index: int
    parts: int

    def check(self):
        _check_ids(self)
        if not 0 <= self.index < self.parts <= MAX_COUNT_PARTS:
            raise ValueError(f"count open: index must be in [0, parts) and parts in [1, {MAX_COUNT_PARTS}], got "
                             f"{self.index} of {self.parts}")


@dataclasses.dataclass
class CountRef(Record):
    """A count, with its token (client -> shard: close it; client -> dispatcher: its lease). Leasing it
    (``open_count``), the client names the count's corpus (:func:`corpus_digest`) and its shards (``[name,
    uri]`` in part order): the workers count for that corpus and those shards only."""

    WHAT: typing.ClassVar[str] = "count"
    count: str
    token: str
    corpus: typing.Optional[str] = None
    shards: typing.Optional[list] = None

    def check(self):
        _check_ids(self)
        if self.corpus is not None and not 0 < len(self.corpus) <= MAX_ID:
            raise ValueError(f"malformed count: corpus must be a digest of 1 to {MAX_ID} characters")
        if self.shards is not None:
            self.shards = _check_shards(self, self.shards, "count")


@dataclasses.dataclass
class CountPart(Record):
    """A byte range's words that fall in part ``index`` of a count (worker -> shard): each word's
    UTF-8 bytes (``words``, back to back, cut by ``offsets``), its count in the range and the file
    offset of its first occurrence there. The shard adds a range's part once; ``token`` is the
    range's (:func:`~gensim_distw2v.protocol.auth.range_token`)."""

    WHAT: typing.ClassVar[str] = "count part"
    count: str
    token: str
    range: int
    index: int
    words: dict
    offsets: dict
    counts: dict
    firsts: dict

    def check(self):
        _check_ids(self)
        if not 0 <= self.range < MAX_RANGE_ID or not 0 <= self.index < MAX_COUNT_PARTS:
            raise ValueError(f"count part: range must be in [0, 2**40) and index in [0, {MAX_COUNT_PARTS}), got "
                             f"{self.range} and {self.index}")
        _check_words(self)


@dataclasses.dataclass
class CountTake(Record):
    """Words ``[lo, hi)`` of a shard's part of a count, in first-occurrence order (client -> shard); those
    counted fewer than ``min_count`` times are left out (every take of a count names the same)."""

    WHAT: typing.ClassVar[str] = "count take"
    count: str
    token: str
    lo: int
    hi: int
    min_count: int = 1

    def check(self):
        _check_ids(self)
        if self.min_count < 1:
            raise ValueError(f"count take: min_count must be >= 1, got {self.min_count}")
        if not 0 <= self.lo <= self.hi or self.hi - self.lo > MAX_TAKE_WORDS:
            raise ValueError(f"count take: [lo, hi) must be a range of at most {MAX_TAKE_WORDS} words, got "
                             f"[{self.lo}, {self.hi})")


@dataclasses.dataclass
class CountChunk(Record):
    """A shard's answer to :class:`CountTake`: the words (as :class:`CountPart`'s), the words its
    part holds in all (``total``; of at least the take's ``min_count``), the ranges added to it, the bytes
    its table takes, the CPU seconds it spent adding the ranges, and the distinct words the take's
    ``min_count`` left out and their occurrences (``dropped``, ``dropped_total``)."""

    WHAT: typing.ClassVar[str] = "count chunk"
    words: dict
    offsets: dict
    counts: dict
    firsts: dict
    total: int
    ranges: int
    table_bytes: int
    cpu: float = 0.0
    dropped: int = 0
    dropped_total: int = 0

    def check(self):
        _non_negative(self, "total", "ranges", "table_bytes", "cpu", "dropped", "dropped_total")
        _check_words(self)


@dataclasses.dataclass
class CountRanges(Record):
    """Count byte ranges of a corpus (client -> worker): ``ranges`` as ``[id, lo, hi]`` and ``tokens``
    each range's token (:func:`~gensim_distw2v.protocol.auth.range_token`: the count's secret is not given to workers), ``corpus``
    the file(s) and their fingerprint (its ``range_bytes``, ``total_words`` and learning rates are
    not used), ``shards`` the ``[name, uri]`` of the count's shards in part order."""

    WHAT: typing.ClassVar[str] = "count ranges"
    count: str
    tokens: list
    corpus: CorpusFileSpec
    ranges: list
    shards: list

    def check(self):
        if not 0 < len(self.count) <= MAX_ID:
            raise ValueError(f"malformed count ranges: count must be 1 to {MAX_ID} characters, got {len(self.count)}")
        if not 0 < len(self.ranges) <= MAX_RANGES_PER_CALL:
            raise ValueError(f"count ranges: 1 to {MAX_RANGES_PER_CALL} ranges a call, got {len(self.ranges)}")
        for entry in self.ranges:
            if not (isinstance(entry, (list, tuple)) and len(entry) == 3
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in entry)
                    and 0 <= entry[0] < MAX_RANGE_ID and 0 <= entry[1] < entry[2] <= self.corpus.size
                    and entry[2] - entry[1] <= MAX_READ_BYTES):
                raise ValueError(f"count ranges: each range must be [id, lo, hi] with 0 <= lo < hi <= the corpus' "
                                 f"size ({self.corpus.size}) and hi - lo <= {MAX_READ_BYTES}, got {entry!r}"[:300])
        if len(self.tokens) != len(self.ranges) or not all(
                isinstance(t, str) and 0 < len(t) <= MAX_ID for t in self.tokens):
            raise ValueError(f"count ranges: one token of 1 to {MAX_ID} characters per range")
        self.shards = _check_shards(self, self.shards, "count ranges")
        self.ranges = [list(entry) for entry in self.ranges]
        self.shards = [list(s) for s in self.shards]


@dataclasses.dataclass
class Counted(Record):
    """A worker's answer to :class:`CountRanges`: per range ``[id, raw words, sentences, distinct
    words]``, the CPU seconds its threads spent counting and sending, and the bytes it sent."""

    WHAT: typing.ClassVar[str] = "counted"
    ranges: list
    cpu: float
    bytes_sent: int

    def check(self):
        _non_negative(self, "cpu", "bytes_sent")
        for entry in self.ranges:
            if not (isinstance(entry, (list, tuple)) and len(entry) == 4
                    and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in entry)):
                raise ValueError(f"counted: each range must be [id, raw, sentences, distinct], ints >= 0, got "
                                 f"{entry!r}"[:300])
        self.ranges = [list(entry) for entry in self.ranges]
