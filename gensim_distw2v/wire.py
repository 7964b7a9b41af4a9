"""Message formats as plain data, and their validation on arrival.

Everything on the wire is msgpack-able plain data: dicts with str keys, ints, floats, str, bytes,
lists. An array is ``{"dtype": str, "shape": [int, ...], "data": bytes}`` (C order). Every
message from a peer goes through a ``check_*`` / ``unpack_*`` function here before use; they
raise :class:`ValueError` naming what is wrong, and never execute or import anything.

Messages
--------
Every message is a named, typed record (:class:`Record`) defined once, below, with its checks
beside it: the session config (:class:`SessionConfig`, with :class:`TrainParams`,
:class:`RngState`, :class:`CorpusFileSpec` and the :class:`gensim_distw2v.settings.Settings`
whole), jobs (:class:`Job`, :class:`RangeJob`), the dispatcher's replies (:class:`Opened`,
:class:`Joined`, :class:`JobBatch`, :class:`Beat`, :class:`Progress`, :class:`Status`), merges
(:class:`MergePart`, :class:`MergeReply`, :class:`RoundReport`) and the shards' messages
(:class:`ShardSpec`, :class:`ShardBeat`, :class:`ShardHello`, :class:`ShardStatus`); checkpoints
(:class:`CheckpointSpec`, :class:`Resumed`, :class:`CheckpointOrder`, :class:`ShardCheckpoint`,
:class:`RestoreSpec`, :class:`CheckpointState`); a worker's :class:`WorkerStatus`. Arrays and merges move in parts of at most
``part_bytes`` bytes.
"""
import dataclasses
import functools
import math
import secrets
import types
import typing

import numpy as np

__all__ = [
    "ARRAY_DTYPES", "MERGE_RULES", "SYNC_MODES", "MAX_JOB_WORDS", "WEIGHTS", "pack_array", "unpack_array", "need", "pack_deltas",
    "unpack_deltas", "pack_wanted", "unpack_wanted", "Record", "SessionConfig", "TrainParams", "RngState", "CorpusFileSpec", "Job", "RangeJob",
    "Progress", "EpochCounts", "WorkerCounts", "ShardSpec", "MergePart", "MergeReply", "RoundReport", "ShardBeat",
    "Hello", "Beat", "Opened", "Joined", "JobBatch", "Status", "MemberStatus", "ShardMemberStatus", "SessionState",
    "ShardStatus", "HeldStatus", "WorkerStatus", "ShardHello", "CheckpointSpec", "Resumed", "CheckpointOrder",
    "ShardCheckpoint", "RestoreSpec", "CheckpointState", "NodeMetrics",
]

# dtypes allowed on the wire (anything else is refused before numpy sees it)
ARRAY_DTYPES = {"float32", "float16", "int8", "uint32", "uint8", "int64"}
DELTA_DTYPES = ("float32", "float16", "int8")  # merge deltas' values (int8 with a float32 scale per row)
# looked up per array on every merge (numpy's dtype.name and np.dtype(name) cost microseconds each)
_NAME_OF = {np.dtype(name): name for name in ARRAY_DTYPES}
_DTYPE = {name: np.dtype(name) for name in ARRAY_DTYPES}
_ITEMSIZE = {name: dtype.itemsize for name, dtype in _DTYPE.items()}
MAX_SCALE = float(np.finfo(np.float32).max) / 127  # an int8 row's scale: level * scale stays finite
MERGE_RULES = ("sum", "damp", "mean")
SYNC_MODES = ("ssp", "bsp", "asp", "local")  # how workers' merge rounds are ordered (settings.Settings.sync)
WEIGHTS = ("syn0", "syn1neg", "syn1")  # the trained matrices (held and merged by the shards)
STATIC = {"lockf": "float32", "cum_table": "uint32", "sample_int": "uint32", "points": "uint32",
          "codes": "uint8", "code_offsets": "int64", "vocab_bytes": "uint8", "vocab_offsets": "int64"}
MAX_JOB_WORDS = 1_000_000  # a job is about batch_words (10,000) words; refuse absurd ones
MAX_ARRAY_BYTES = 128 * 1024 * 1024  # one message's array (arrays move in chunks below this)


def need(msg, key, kind, what="message"):
    """``msg[key]``, checked to be of type ``kind``; ValueError naming the field otherwise."""
    if not isinstance(msg, dict):
        raise ValueError(f"malformed {what}: expected a dict, got {type(msg).__name__}")
    if key not in msg:
        raise ValueError(f"malformed {what}: missing field {key!r}")
    value = msg[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ValueError(f"malformed {what}: field {key!r} must be {name}, got {type(value).__name__}")
    if kind is float and not math.isfinite(value):
        raise ValueError(f"malformed {what}: field {key!r} must be finite, got {value}")
    return value


def pack_array(arr):
    """An ndarray as plain data (the bytes are a copy only if ``arr`` is not C-contiguous)."""
    arr = np.ascontiguousarray(arr)
    name = _NAME_OF.get(arr.dtype) or arr.dtype.name
    return {"dtype": name, "shape": list(arr.shape), "data": arr.data.cast("B") if arr.size else b""}


def pack_deltas(rows, values, scales=None):
    """One matrix's deltas as a merge message: ``{"rows", "values"}``, and ``"scales"`` for int8 values."""
    msg = {"rows": pack_array(rows), "values": pack_array(values)}
    if scales is not None:
        msg["scales"] = pack_array(scales)
    return msg


def unpack_array(msg, what, dtype=None, ndim=None, shape=None):
    """Check an array message and return a read-only ndarray over its bytes.

    Parameters
    ----------
    msg : dict
        ``{"dtype", "shape", "data"}``.
    what : str
        Name for error messages.
    dtype : str or tuple of str, optional
        Allowed dtype name(s).
    ndim : int, optional
        Required number of dimensions.
    shape : tuple, optional
        Required shape; ``None`` entries match anything.

    Raises
    ------
    ValueError
        Malformed message, wrong dtype, shape or byte count.
    """
    name = need(msg, "dtype", str, what)
    dims = need(msg, "shape", (list, tuple), what)
    data = need(msg, "data", (bytes, bytearray, memoryview), what)
    if name not in ARRAY_DTYPES:
        raise ValueError(f"{what}: dtype {name!r} is not allowed on the wire (allowed: {sorted(ARRAY_DTYPES)})")
    if dtype is not None and name not in ((dtype,) if isinstance(dtype, str) else dtype):
        raise ValueError(f"{what} must have dtype {dtype}, got {name}")
    if not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2 ** 40 for d in dims):
        raise ValueError(f"{what}: shape must be non-negative integers, got {dims!r}")
    if ndim is not None and len(dims) != ndim:
        raise ValueError(f"{what} must be {ndim}-dimensional, got shape {tuple(dims)}")
    if shape is not None and any(want is not None and want != got for want, got in zip(shape, dims)):
        raise ValueError(f"{what} must have shape {tuple(shape)}, got {tuple(dims)}")
    expected = math.prod(dims) * _ITEMSIZE[name]
    if expected > MAX_ARRAY_BYTES:
        raise ValueError(f"{what}: {expected} bytes in one message is more than the {MAX_ARRAY_BYTES} allowed")
    if len(data) != expected:
        raise ValueError(f"{what}: shape {tuple(dims)} of {name} needs {expected} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=_DTYPE[name]).reshape(dims)


def check_damp_rows(damp_rows, what="session config"):
    """``damp_rows`` (how many first rows of ``syn0``, ``syn1neg`` and, with hs, ``syn1`` the damp
    rule damps) as plain ints; ValueError naming the problem otherwise."""
    if not isinstance(damp_rows, dict) or not {"syn0", "syn1neg"} <= set(damp_rows) <= {"syn0", "syn1neg", "syn1"} \
            or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in damp_rows.values()):
        raise ValueError(f"{what}: damp_rows must be {{'syn0': int >= 0, 'syn1neg': int >= 0}} (and 'syn1': int >= 0 "
                         f"with hs), got {damp_rows!r}")
    return {name: int(n) for name, n in damp_rows.items()}


def check_cold_every(cold_every, what=None):
    """``cold_every`` (merge the rows of rare words every n-th round) as an int in [1, 1000];
    ValueError naming the problem otherwise."""
    if isinstance(cold_every, bool) or not isinstance(cold_every, (int, np.integer)) or not 1 <= cold_every <= 1000:
        where = f"{what}: " if what else ""
        raise ValueError(f"{where}cold_every must be an int in [1, 1000] (merge the rows of rare words every "
                         f"n-th round; 1: in every round), got {cold_every!r}")
    return int(cold_every)


def pack_wanted(rows, lo, hi):
    """Rows of ``[lo, hi)`` (increasing, distinct) as an array message, in the smaller of two forms:
    the rows themselves (uint32), or one bit per row of the range (uint8, :func:`numpy.packbits`)."""
    rows = np.asarray(rows, dtype=np.uint32)
    if 4 * len(rows) <= (hi - lo + 7) // 8:
        return pack_array(rows)
    mask = np.zeros(hi - lo, dtype=bool)
    mask[rows.astype(np.int64) - lo] = True
    return pack_array(np.packbits(mask))


def unpack_wanted(msg, lo, hi, what="merge part wanted"):
    """A :func:`pack_wanted` message, checked, as a boolean mask over ``[lo, hi)``."""
    arr = unpack_array(msg, what, ("uint32", "uint8"), ndim=1)
    if arr.dtype == np.uint8:
        if len(arr) != (hi - lo + 7) // 8:
            raise ValueError(f"{what}: a bitmap of rows [{lo}, {hi}) needs {(hi - lo + 7) // 8} bytes, got {len(arr)}")
        return np.unpackbits(arr, count=hi - lo).astype(bool)
    if len(arr) and (int(arr.min()) < lo or int(arr.max()) >= hi):
        raise ValueError(f"{what}: rows must lie in [{lo}, {hi})")
    if len(arr) > 1 and np.any(np.diff(arr.astype(np.int64)) <= 0):
        raise ValueError(f"{what}: rows must be strictly increasing")
    mask = np.zeros(hi - lo, dtype=bool)
    mask[arr.astype(np.int64) - lo] = True
    return mask


def check_turn(turn, what):
    """A merge round's ``[epoch, round]``: two ints >= 0, as a list."""
    if not isinstance(turn, (list, tuple)) or len(turn) != 2 \
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 62 for v in turn):
        raise ValueError(f"{what}: turn must be [epoch, round], two ints >= 0, got {turn!r}")
    return list(turn)


class PoisonError(ValueError):
    """A merge's values are beyond the session's bound (or not finite): refused, and the session fails
    naming the worker that sent them."""


def check_token(given, token, what):
    """Refuse a call on a session that does not carry the session's secret token."""
    if not (isinstance(given, str) and isinstance(token, str) and token
            and secrets.compare_digest(given.encode("utf8"), token.encode("utf8"))):
        raise ValueError(f"{what}: not this session's token: only the session's client and its workers may do that")


def max_delta_for(alpha, vector_size):
    """The largest change a merge may make to one weight: about 16 times the largest seen in a whole
    epoch of gensim on devmix (4 at ``alpha`` 0.025 to 0.1, ``vector_size`` 100; weights are larger
    when vectors are shorter), so no real round comes near it and no value near float32's limit
    passes (docs: Security).
    """
    return float(max(64.0, 2000.0 * float(alpha)) * max(1.0, (100.0 / max(1, int(vector_size))) ** 0.5))


_ABS_BITS = {np.dtype(np.float16): (np.uint16, np.uint16(0x7FFF)), np.dtype(np.float32): (np.uint32, np.uint32(0x7FFFFFFF))}


def within(values, bound):
    """Every value of a float16 or float32 array is finite and at most ``bound`` in size (from the
    bits: a float's magnitude orders as its bits do, and inf and nan lie above every finite bound)."""
    if not values.size:
        return True
    view, mask = _ABS_BITS[values.dtype]
    limit = np.array(min(bound, float(np.finfo(values.dtype).max)), dtype=values.dtype).view(view)
    return bool((values.view(view) & mask).max() <= limit)


def all_finite(values):
    """No inf or nan in a float16 or float32 array (float16: from the bits, 10x faster than numpy's isfinite)."""
    if values.dtype == np.float16:
        exponent = values.view(np.uint16) & np.uint16(0x7C00)
        return not (exponent == 0x7C00).any()
    return bool(np.isfinite(values).all())


def unpack_deltas(msg, name, vector_size, lo, hi, what, bound=None):
    """One matrix's deltas ``{"rows", "values"[, "scales"]}`` of a merge part or reply (or rows'
    values: same form), checked; with ``bound``, no value may exceed it in size (else
    :class:`PoisonError`).

    Returns
    -------
    tuple
        ``(rows, values, scales)``: uint32 rows, strictly increasing, in ``[lo, hi)``; finite values
        (float32, float16, or int8 levels); int8's float32 scales (one per row, ``0 <= scale <=``
        :data:`MAX_SCALE`), else None.
    """
    rows = unpack_array(need(msg, "rows", dict, what), f"{name} rows", "uint32", ndim=1)
    values = unpack_array(need(msg, "values", dict, what), f"{name} values", DELTA_DTYPES, ndim=2,
                          shape=(len(rows), vector_size))
    if len(rows) and (int(rows.min()) < lo or int(rows.max()) >= hi):
        raise ValueError(f"{what}: {name} rows must lie in [{lo}, {hi})")
    if len(rows) > 1 and np.any(np.diff(rows.astype(np.int64)) <= 0):
        raise ValueError(f"{what}: {name} rows must be strictly increasing")
    scales = None
    if values.dtype == np.int8:
        scales = unpack_array(need(msg, "scales", dict, what), f"{name} scales", "float32", shape=(len(rows),))
        if not np.all((scales >= 0) & (scales <= MAX_SCALE)):  # (NaN fails both)
            raise ValueError(f"{what}: {name} scales must be finite, >= 0 and at most {MAX_SCALE:.3g}")
        if bound is not None and len(scales) and float(scales.max()) * 127 > bound:
            raise PoisonError(f"{what}: {name} changes a weight by up to {float(scales.max()) * 127:.3g}, beyond "
                              f"this session's bound of {bound:.3g}")
    elif "scales" in msg:
        raise ValueError(f"{what}: {name} has scales, which only int8 values take")
    elif bound is not None and not within(values, bound):
        raise PoisonError(f"{what}: {name} changes a weight by more than this session's bound of {bound:.3g} (or "
                          f"by inf or nan)")
    elif not all_finite(values):
        raise ValueError(f"{what}: {name} values must be finite")
    return rows, values, scales


# ---------------------------------------------------------------------------------------------- records
# Messages as named, typed records: each is defined once here, with its validation beside it.
# ``to_wire()`` gives the plain dict that travels; ``from_wire(msg)`` checks every field's type (and
# refuses unknown ones; a field with a default, added later, may be left out), then the record's own
# ``check()``; both sides use the same class.

def _kind(annotation):
    """The type(s) :func:`need` checks for a field's annotation (``Optional[X]`` allows None)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(_kind(a) if a is not type(None) else type(None) for a in typing.get_args(annotation))
    if annotation is list:
        return (list, tuple)
    return annotation


@functools.lru_cache(maxsize=None)
def _hints(cls):
    """A record's fields' annotations, names of records defined further down resolved."""
    return typing.get_type_hints(cls)


def _flat(kinds):
    out = []
    for kind in kinds if isinstance(kinds, tuple) else (kinds,):
        out.extend(_flat(kind) if isinstance(kind, tuple) else [kind])
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _specs(cls):
    """Per field of a record, what :meth:`Record.from_wire` checks: ``(name, the type(s) for
    :func:`need`, whether None is allowed, the nested record class or None, the default or
    _REQUIRED)``, and the set of names; worked out once per class (it runs for every message)."""
    hints, out = _hints(cls), []
    for field in dataclasses.fields(cls):
        kind = _flat(_kind(hints[field.name]))
        optional = type(None) in kind
        kind = tuple(k for k in kind if k is not type(None))
        nested = kind[0] if isinstance(kind[0], type) and issubclass(kind[0], Record) else None
        default = field.default if field.default is not dataclasses.MISSING else _REQUIRED
        out.append((field.name, dict if nested else kind if len(kind) > 1 else kind[0], optional, nested, default))
    return tuple(out), frozenset(name for name, *_ in out)


_REQUIRED = object()  # a field without a default: a message must carry it


@dataclasses.dataclass
class Record:
    """A message with named, typed fields (subclasses are dataclasses; see :meth:`from_wire`)."""

    WHAT: typing.ClassVar[str] = "message"

    @classmethod
    def from_wire(cls, msg, **context):
        """Check a message from a peer and return it as a record.

        Raises
        ------
        ValueError
            Not a dict, a missing, unknown or mistyped field, or what :meth:`check` refuses.
        """
        if not isinstance(msg, dict):
            raise ValueError(f"malformed {cls.WHAT}: expected a dict, got {type(msg).__name__}")
        specs, names = _specs(cls)
        if not names.issuperset(msg):
            unknown = set(msg) - names
            raise ValueError(f"malformed {cls.WHAT}: unknown fields {sorted(map(str, unknown))}")
        values = {}
        for name, kind, optional, nested, default in specs:
            if optional and msg.get(name, 0) is None:
                values[name] = None
                continue
            if name not in msg and default is not _REQUIRED:  # a field added with a default
                values[name] = default
                continue
            value = need(msg, name, kind, cls.WHAT)
            values[name] = nested.from_wire(value) if nested else value
        record = cls(**values)
        record.check(**context)
        return record

    def check(self, **context):
        """Checks beyond the fields' types (ranges, consistency); raise ValueError naming the problem."""

    @classmethod
    def names(cls):
        """Its fields' names, in order."""
        return [field.name for field in dataclasses.fields(cls)]

    def to_wire(self):
        """The record as plain data for the wire (records and settings inside it too, arrays packed)."""
        return {name: _plain(getattr(self, name)) for name, *_ in _specs(type(self))[0]}


_PLAIN = frozenset((type(None), int, float, str, bytes, bool, memoryview, list))


def _plain(value):
    """A field's value as plain data: records (and anything with ``to_wire``) and arrays converted,
    in dicts too."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, (int, float, str, bytes, bool, memoryview)):
        return value
    if hasattr(value, "to_wire"):
        return value.to_wire()
    if isinstance(value, np.ndarray):
        return pack_array(value)
    if isinstance(value, dict):
        return {key: v if type(v) in _PLAIN else _plain(v) for key, v in value.items()}
    return value


def _record_map(mapping, cls):
    """``{str key: cls record}`` from a field that maps names to records (as built, or as plain
    data from the wire, checked)."""
    return {str(key): value if isinstance(value, cls) else cls.from_wire(value) for key, value in mapping.items()}


def _check_array(record, name, dtype, ndim=None, shape=None):
    """Replace ``record.name`` (an array message, or an array) by the checked, read-only array."""
    value = getattr(record, name)
    value = pack_array(value) if isinstance(value, np.ndarray) else value
    setattr(record, name, unpack_array(value, f"{record.WHAT} {name}", dtype, ndim=ndim, shape=shape))
    return getattr(record, name)


def _non_negative(record, *names):
    for name in names:
        if getattr(record, name) < 0:
            raise ValueError(f"malformed {record.WHAT}: {name} must be >= 0, got {getattr(record, name)}")


@dataclasses.dataclass
class ShardSpec(Record):
    """What a shard holds of a session (client -> shard): rows ``index, index + count, ...`` of
    each trained matrix (:class:`gensim_distw2v.layout.ShardLayout`), and how it merges them.
    ``damp_rows`` and ``hot_rows`` are the session's (global rows); the shard keeps its own share
    of them (replies carry the hot rows as deltas)."""

    WHAT: typing.ClassVar[str] = "shard spec"
    session: str
    index: int
    count: int
    vocab_size: int
    vector_size: int
    weights: list
    merge: str
    merge_dtype: str
    damp_rows: dict
    hot_rows: int
    versions: dict
    token: str  # the session's secret (Opened.token): uploads, merges and close need it
    tree_hot_rows: int = 0  # with hs: syn1's hot rows (tree nodes, busiest first; merge.tree_hot_rows)
    restore: typing.Optional["RestoreSpec"] = None  # a resumed session: the rows come from a checkpoint
    max_delta: float = 64.0  # the largest change a merge may make to one weight (max_delta_for)

    def check(self):
        if not 0 < self.max_delta <= MAX_SCALE:
            raise ValueError(f"shard spec: max_delta must be in (0, {MAX_SCALE:.3g}], got {self.max_delta}")
        if not 0 <= self.index < self.count <= 4096:
            raise ValueError(f"shard spec: index must be in [0, count) and count in [1, 4096], got index "
                             f"{self.index} of {self.count}")
        if not 1 <= self.vocab_size < 2 ** 32 or not 1 <= self.vector_size <= 100_000:
            raise ValueError(f"shard spec: vocab_size must be in [1, 2**32) and vector_size in [1, 100000], got "
                             f"{self.vocab_size} and {self.vector_size}")
        if not self.weights or len(set(self.weights)) != len(self.weights) \
                or not all(isinstance(n, str) and n in WEIGHTS for n in self.weights):
            raise ValueError(f"shard spec: weights must be distinct names among {WEIGHTS}, got {self.weights!r}")
        if self.merge not in MERGE_RULES:
            raise ValueError(f"unknown merge rule {self.merge!r}; choose one of {MERGE_RULES}")
        if self.merge_dtype not in DELTA_DTYPES:
            raise ValueError(f"merge_dtype must be one of {DELTA_DTYPES}, got {self.merge_dtype!r}")
        self.damp_rows = check_damp_rows(self.damp_rows, "shard spec")
        if not 0 <= self.hot_rows <= self.vocab_size or not 0 <= self.tree_hot_rows <= self.vocab_size:
            raise ValueError(f"shard spec: hot_rows and tree_hot_rows must be in [0, vocab_size={self.vocab_size}], "
                             f"got {self.hot_rows} and {self.tree_hot_rows}")
        self.weights = list(self.weights)


@dataclasses.dataclass
class MergePart(Record):
    """One part of a worker's merge round with one shard (worker -> shard), in the shard's own rows.

    ``matrices`` maps a matrix to its deltas (:func:`pack_deltas`) for rows in ``[lo, hi)``;
    ``hold_back`` shapes the reply, ``exact`` asks for float32,
    ``hot_rows`` (-1: every row) limits a routine round's ``syn0`` and ``syn1neg`` to the rows
    below it. ``wanted`` (None: every row) names the rows of ``syn0`` and ``syn1neg`` beyond the
    hot ones whose values the worker wants now (those of the jobs it holds: :func:`pack_wanted`);
    the others it lacks wait on the shard (the hot rows come as deltas, always). The shard answers
    with a :class:`MergeReply`.
    """

    WHAT: typing.ClassVar[str] = "merge part"
    session: str
    rank: int
    lo: int
    hi: int
    matrices: dict
    hold_back: float
    hot_rows: int
    exact: bool
    token: str  # the session's secret (Joined.token)
    wanted: typing.Optional[dict] = None
    tree_hot_rows: int = -1  # with hs: syn1's rows in a routine round (-1: every row)

    def check(self, n_rows=None, vector_size=None, weights=(), max_delta=None):
        if not 0 <= self.lo <= self.hi <= (n_rows if n_rows is not None else self.hi):
            raise ValueError(f"merge part: row range [{self.lo}, {self.hi}) is outside [0, {n_rows})")
        _non_negative(self, "rank")
        if self.wanted is not None:
            self.wanted = unpack_wanted(self.wanted, self.lo, self.hi)
        if not 0.0 <= self.hold_back < 1.0:
            raise ValueError(f"merge part: hold_back must be in [0, 1), got {self.hold_back}")
        if self.hot_rows < -1 or self.tree_hot_rows < -1:
            raise ValueError(f"merge part: hot_rows and tree_hot_rows must be >= 0, or -1 (every row), got "
                             f"{self.hot_rows} and {self.tree_hot_rows}")
        unknown = set(self.matrices) - set(weights)
        if unknown:
            raise ValueError(f"merge part: unknown matrices {sorted(map(str, unknown))}; this session trains "
                             f"{sorted(weights)}")
        if vector_size is not None:  # unpacked in place: the shard folds arrays, not messages
            self.matrices = {name: unpack_deltas(msg, name, vector_size, self.lo, self.hi, "merge part", max_delta)
                             for name, msg in self.matrices.items()}


@dataclasses.dataclass
class MergeReply(Record):
    """A shard's answer to a :class:`MergePart`: per matrix, the damped rows' missed change as
    deltas (``matrices``) and the global values of the other rows the worker lacks (``values``),
    both :func:`pack_deltas` messages in the shard's rows."""

    WHAT: typing.ClassVar[str] = "merge reply"
    matrices: dict
    values: dict


@dataclasses.dataclass
class RoundReport(Record):
    """A worker's merge round is folded into every shard (worker -> dispatcher): the jobs it
    carried count as trained from now on.

    ``jobs`` lists ``[id, effective_words]`` (a range job's ``[id, effective_words, raw_words,
    examples]``: only its worker knows them); ``flush`` is the epoch the round flushed, or -1;
    ``turn`` is the round's ``[epoch, round within the epoch]`` on this worker (``sync="bsp"``
    orders rounds by it);
    the seconds are the worker's totals so far (wall time in merge rounds, their CPU, its trainer
    threads' CPU in jobs, and the time trainers waited for a round: the staleness bound); the
    bytes are this round's, to and from the shards (``exact``: an epoch flush, in float32).
    """

    WHAT: typing.ClassVar[str] = "round report"
    jobs: list
    loss: float
    flush: int
    exact: bool
    merge_seconds: float
    merge_cpu: float
    kernel_cpu: float
    stall_seconds: float
    bytes_up: int
    bytes_down: int
    turn: list
    node: typing.Optional["NodeMetrics"] = None  # an epoch flush's: the worker's metrics as the epoch ends on it

    def check(self):
        if self.flush < -1:
            raise ValueError(f"round report: flush must be an epoch or -1, got {self.flush}")
        self.turn = check_turn(self.turn, "round report")
        if self.node is not None and self.node.role != "worker":
            raise ValueError(f"round report: node must be a worker's metrics, got role {self.node.role!r}")
        _non_negative(self, "merge_seconds", "merge_cpu", "kernel_cpu", "stall_seconds", "bytes_up", "bytes_down")
        for entry in self.jobs:
            if (not isinstance(entry, (list, tuple)) or len(entry) not in (2, 4)
                    or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in entry)):
                raise ValueError(f"round report: jobs must be [id, effective_words] or [id, effective_words, "
                                 f"raw_words, examples], got {entry!r}")


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


@dataclasses.dataclass
class JobBatch(Record):
    """The dispatcher's answer to ``get_jobs``: job messages (checked when trained), and
    ``drained``: the last epoch the client closed when nothing is left to hand out (time to
    flush), else None."""

    WHAT: typing.ClassVar[str] = "get_jobs reply"
    jobs: list
    drained: typing.Optional[int]

    def check(self):
        if self.drained is not None and self.drained < 0:
            raise ValueError(f"get_jobs reply: drained must be an epoch >= 0 or None, got {self.drained}")


# ---------------------------------------------------------------------------------------------- session
@dataclasses.dataclass
class TrainParams(Record):
    """The hyper-parameters of the session's kernel (gensim's names) and of its vocabulary."""

    WHAT: typing.ClassVar[str] = "session params"
    sg: int
    hs: int
    negative: int
    window: int
    cbow_mean: int
    shrink_windows: bool
    sample: bool
    vector_size: int
    vocab_size: int
    seed: int

    def check(self):
        if not 1 <= self.vocab_size < 2 ** 32 or not 1 <= self.vector_size <= 100_000:
            raise ValueError(f"session params: vocab_size must be in [1, 2**32) and vector_size in [1, 100000], "
                             f"got {self.vocab_size} and {self.vector_size}")
        if self.sg not in (0, 1) or self.hs not in (0, 1) or self.cbow_mean not in (0, 1):
            raise ValueError(f"session params: sg, hs and cbow_mean must be 0 or 1, got {self.sg}, {self.hs}, "
                             f"{self.cbow_mean}")
        if not 0 <= self.negative <= 1000 or not 1 <= self.window <= 10_000 or self.seed < 0:
            raise ValueError(f"session params: negative must be in [0, 1000], window in [1, 10000] and seed >= 0, "
                             f"got {self.negative}, {self.window}, {self.seed}")
        if not self.hs and not self.negative:
            raise ValueError("session params: either hs=1 or negative > 0 is needed")

    def kernel(self):
        """The keyword arguments of :class:`gensim_distw2v._inner.JobTrainer` these give."""
        return dict(sg=self.sg, hs=self.hs, negative=self.negative, window=self.window, cbow_mean=self.cbow_mean,
                    shrink_windows=self.shrink_windows)


@dataclasses.dataclass
class RngState(Record):
    """A ``numpy.random.RandomState`` (MT19937) state: the client's random stream, which rank 0's
    first thread continues (so one worker with one thread reproduces gensim)."""

    WHAT: typing.ClassVar[str] = "rng_state"
    keys: dict
    pos: int
    has_gauss: int
    cached_gaussian: float

    def check(self):
        _check_array(self, "keys", "uint32", shape=(624,))
        if not 0 <= self.pos <= 624 or self.has_gauss not in (0, 1):
            raise ValueError(f"rng_state: pos must be in [0, 624] and has_gauss 0 or 1, got {self.pos} and "
                             f"{self.has_gauss}")

    @classmethod
    def of(cls, rng):
        """The state of ``rng`` (a ``RandomState``) as a record."""
        _name, keys, pos, has_gauss, cached = rng.get_state()
        return cls(keys=keys.astype(np.uint32), pos=int(pos), has_gauss=int(has_gauss),
                   cached_gaussian=float(cached))

    def state(self):
        """The tuple ``RandomState.set_state`` takes."""
        return ("MT19937", np.array(self.keys), self.pos, self.has_gauss, self.cached_gaussian)


@dataclasses.dataclass
class CorpusFileSpec(Record):
    """The corpus file of a ``corpus_file`` session: where it is, its fingerprint
    (:func:`gensim_distw2v.corpusfile.fingerprint`: ``size``, ``digest``), its words, the
    learning rate's schedule, and ``range_bytes``: the byte ranges the dispatcher cuts."""

    WHAT: typing.ClassVar[str] = "corpus_file"
    path: str
    size: int
    digest: str
    range_bytes: int
    total_words: int
    start_alpha: float
    end_alpha: float

    def check(self):
        if self.size < 0 or self.range_bytes < 1 or self.total_words < 1:
            raise ValueError(f"corpus_file: size must be >= 0, range_bytes and total_words >= 1, got {self.size}, "
                             f"{self.range_bytes}, {self.total_words}")
        if not self.path or "\0" in self.path:
            raise ValueError("corpus_file: path must be a non-empty str without NUL")

    def fingerprint(self):
        """What :func:`gensim_distw2v.corpusfile.fingerprint` gave the client."""
        return {"size": self.size, "digest": self.digest}


@dataclasses.dataclass
class SessionConfig(Record):
    """A training session, as the client opens it (client -> dispatcher -> workers).

    ``arrays`` declares every array of the session, ``{name: {"dtype", "shape"}}``: the trained
    matrices (:data:`WEIGHTS`, on the shards) and the static ones (:data:`STATIC`, on the
    dispatcher); ``settings`` is the model's :class:`gensim_distw2v.settings.Settings` whole, with
    ``sync_words`` resolved; ``damp_rows`` and ``hot_rows`` are the merge rule's row counts;
    ``workers`` is how many workers the client saw (``sync="bsp"`` deals the jobs to that many ranks);
    ``corpus_file`` is set for ``corpus_file`` training (the vocabulary then travels as the arrays
    ``vocab_bytes`` and ``vocab_offsets``).
    """

    WHAT: typing.ClassVar[str] = "session config"
    versions: dict
    params: TrainParams
    arrays: dict
    settings: object  # a Settings (a dict on the wire; settings.py imports this module)
    damp_rows: dict
    hot_rows: int
    compute_loss: bool
    epochs: int
    rng_state: RngState
    workers: int
    corpus_file: typing.Optional[CorpusFileSpec] = None
    tree_hot_rows: int = 0  # with hs: syn1's hot rows (tree nodes, busiest first; merge.tree_hot_rows)
    checkpoint: typing.Optional["CheckpointSpec"] = None  # with checkpoint_dir: where and how often
    total_words: int = 0  # raw words per epoch, as the client expects them (0: unknown): progress and ETA

    def check(self):
        from gensim_distw2v.settings import Settings  # (settings needs merge, which needs this module)

        _non_negative(self, "total_words")
        vocab, size = self.params.vocab_size, self.params.vector_size
        params = self.params
        wanted = {"syn0", "lockf"} | ({"syn1neg", "cum_table"} if params.negative else set()) \
            | ({"sample_int"} if params.sample else set()) \
            | ({"syn1", "points", "codes", "code_offsets"} if params.hs else set()) \
            | ({"vocab_bytes", "vocab_offsets"} if self.corpus_file is not None else set())
        if set(self.arrays) != wanted:
            raise ValueError(f"session config: arrays must be exactly {sorted(wanted)}, got "
                             f"{sorted(map(str, self.arrays))}")
        for name, spec in self.arrays.items():
            dtype = need(spec, "dtype", str, f"array {name}")
            dims = need(spec, "shape", (list, tuple), f"array {name}")
            if name in WEIGHTS:
                if dtype != "float32" or list(dims) != [vocab, size]:
                    raise ValueError(f"array {name} must be float32 of shape ({vocab}, {size}), got {dtype} {dims}")
            elif dtype != STATIC[name] or len(dims) != 1 or not isinstance(dims[0], int) or dims[0] < 0:
                raise ValueError(f"array {name} must be 1-dimensional {STATIC[name]}, got {dtype} {dims}")
        if self.corpus_file is not None and list(self.arrays["vocab_offsets"]["shape"]) != [vocab + 1]:
            raise ValueError(f"array vocab_offsets must have vocab_size + 1 = {vocab + 1} entries")
        if not isinstance(self.settings, Settings):
            self.settings = Settings.from_wire(self.settings)  # validated as where it was built
        if self.settings.sync_words is None:
            raise ValueError("session settings: sync_words must be set (the client derives it from the workers)")
        self.damp_rows = check_damp_rows(self.damp_rows)
        if not 0 <= self.hot_rows <= vocab:
            raise ValueError(f"hot_rows must be in [0, vocab_size={vocab}], got {self.hot_rows}")
        if not 0 <= self.tree_hot_rows <= vocab:
            raise ValueError(f"tree_hot_rows must be in [0, vocab_size={vocab}], got {self.tree_hot_rows}")
        if not 1 <= self.epochs <= 1_000_000:
            raise ValueError(f"session config: epochs must be in [1, 1000000], got {self.epochs}")
        if not 1 <= self.workers <= 65_536:
            raise ValueError(f"session config: workers must be in [1, 65536], got {self.workers}")


# ---------------------------------------------------------------------------------------------- checkpoints
MAX_PATH = 4096
CHECKPOINT_STAGES = ("taken", "written", "failed")


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
        if not all(isinstance(j, int) and not isinstance(j, bool) and j >= 0 for j in self.done_jobs):
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


# ---------------------------------------------------------------------------------------------- jobs
@dataclasses.dataclass
class Job(Record):
    """Sentences to train (client -> dispatcher -> worker): word ``indices`` (uint32), sentence
    ``offsets`` into them (int64, from 0 to ``len(indices)``), the learning rate, and the raw
    words and examples they stand for (gensim's progress counts)."""

    WHAT: typing.ClassVar[str] = "job"
    id: int
    epoch: int
    alpha: float
    indices: dict
    offsets: dict
    raw_words: int
    examples: int

    def check(self, vocab_size):
        """Everything the kernel relies on (dtype, index range, offsets that fit): a bad job is
        refused where it arrives."""
        _non_negative(self, "id", "epoch", "raw_words", "examples")
        if not 0 <= self.alpha < 10:
            raise ValueError(f"job: alpha must be in [0, 10), got {self.alpha}")
        indices = _check_array(self, "indices", "uint32", ndim=1)
        offsets = _check_array(self, "offsets", "int64", ndim=1)
        if len(indices) > MAX_JOB_WORDS:
            raise ValueError(f"job has {len(indices)} words, more than the {MAX_JOB_WORDS} allowed")
        if len(indices) and int(indices.max()) >= vocab_size:
            raise ValueError(f"job has a word index {int(indices.max())} >= vocab_size {vocab_size}")
        if (len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(indices)
                or (len(offsets) > 1 and np.any(np.diff(offsets) < 0))):
            raise ValueError(f"job offsets must run non-decreasing from 0 to {len(indices)}")

    @classmethod
    def of(cls, job_id, epoch, job):
        """A :class:`gensim_distw2v.jobs.Job` as a record (its arrays packed for the wire)."""
        return cls(id=job_id, epoch=epoch, alpha=float(job.alpha), indices=pack_array(job.indices),
                   offsets=pack_array(job.offsets), raw_words=int(job.raw_words), examples=int(job.examples))


@dataclasses.dataclass
class RangeJob(Record):
    """A byte range of the corpus file to train (dispatcher -> worker, ``corpus_file`` sessions):
    the lines that start in bytes ``[lo, hi)``."""

    WHAT: typing.ClassVar[str] = "range job"
    id: int
    epoch: int
    alpha: float
    lo: int
    hi: int

    def check(self, size):
        if self.id < 0 or self.epoch < 0 or not 0 <= self.alpha < 10 or not 0 <= self.lo < self.hi <= size:
            raise ValueError(f"range job: id and epoch must be >= 0, alpha in [0, 10) and 0 <= lo < hi <= {size}, "
                             f"got {self.id}, {self.epoch}, {self.alpha}, {self.lo}, {self.hi}")


# ---------------------------------------------------------------------------------------------- progress
@dataclasses.dataclass
class EpochCounts(Record):
    """One epoch's progress: jobs put (ranges, for a corpus file) and done, and what the done ones
    trained."""

    WHAT: typing.ClassVar[str] = "epoch progress"
    put: int = 0
    done: int = 0
    raw_words: int = 0
    effective_words: int = 0
    examples: int = 0

    def check(self):
        _non_negative(self, "put", "done", "raw_words", "effective_words", "examples")


@dataclasses.dataclass
class WorkerCounts(Record):
    """One worker's totals in a session: raw words trained, merge rounds, bytes to and from the
    shards (of them, ``exact_*`` in float32 epoch flushes), wall seconds in merge rounds and
    their CPU, its trainer threads' CPU in jobs, and seconds its trainers waited for a round."""

    WHAT: typing.ClassVar[str] = "worker counters"
    words: int = 0
    merges: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    exact_bytes_up: int = 0
    exact_bytes_down: int = 0
    merge_seconds: float = 0.0
    merge_cpu: float = 0.0
    kernel_cpu: float = 0.0
    stall_seconds: float = 0.0

    def check(self):
        _non_negative(self, *self.names())

    def add(self, report, words):
        """Count a merge round (:class:`RoundReport`) whose jobs carried ``words`` raw words; its
        seconds are the worker's totals so far (a report that arrives late does not lower them)."""
        self.words += words
        self.merges += 1
        self.bytes_up += report.bytes_up
        self.bytes_down += report.bytes_down
        if report.exact:
            self.exact_bytes_up += report.bytes_up
            self.exact_bytes_down += report.bytes_down
        for name in ("merge_seconds", "merge_cpu", "kernel_cpu", "stall_seconds"):
            setattr(self, name, max(getattr(self, name), getattr(report, name)))


@dataclasses.dataclass
class Progress(Record):
    """The dispatcher's answer to ``progress``: per epoch (str keys) its :class:`EpochCounts`;
    jobs ``queued`` and ``in_flight``; the summed ``loss``; merge rounds reported; per worker its
    :class:`WorkerCounts`; ``flushed``: the last epoch every worker flushed (or None);
    ``lost_shards`` (shard -> why: the session cannot go on); ``no_workers_for`` (seconds without
    any worker that is or may still join, or None); ``file_checks`` (worker -> None or what is
    wrong with its view of the corpus file); ``quit`` (worker -> why the session failed on it);
    ``poisoned`` (worker -> why a shard refused its merge as beyond the session's bound)."""

    WHAT: typing.ClassVar[str] = "progress reply"
    epochs: dict
    queued: int
    in_flight: int
    loss: float
    merges: int
    workers: dict
    flushed: typing.Optional[int]
    lost_shards: dict
    no_workers_for: typing.Optional[float]
    file_checks: dict
    quit: dict
    checkpoints: typing.Optional["CheckpointState"] = None  # with checkpoint_dir
    poisoned: typing.Optional[dict] = None  # worker -> why a shard refused its merge (the session cannot go on)
    nodes: typing.Optional[dict] = None  # name -> NodeMetrics: the session's workers, shards and the dispatcher

    def check(self):
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


# --------------------------------------------------------------------------------------------- metrics
NODE_ROLES = ("worker", "shard", "dispatcher")


@dataclasses.dataclass
class NodeMetrics(Record):
    """What one process of the cluster reports about itself (on its heartbeats; the dispatcher
    adds its own): counters since ``session`` began on it (or since the process started, outside
    sessions).

    ``seconds`` of wall time they cover; raw ``words`` trained (workers); CPU seconds of the
    whole process (``cpu``) and of it, in the word2vec kernel (``kernel_cpu``: trainer threads'
    kernel calls) and in merges (``merge_cpu``: a worker's merge rounds, a shard's merge calls);
    resident memory now and the process's peak (bytes); bytes sent and received on all its
    connections (the wire's bytes, headers included); trainer ``threads`` (workers). The
    dispatcher fills ``silent`` (seconds since it heard the node) and ``words_per_second`` (its
    recent rate) when it passes them on."""

    WHAT: typing.ClassVar[str] = "node metrics"
    role: str
    session: typing.Optional[str]
    seconds: float
    words: int
    cpu: float
    kernel_cpu: float
    merge_cpu: float
    rss: int
    peak_rss: int
    bytes_sent: int
    bytes_received: int
    threads: typing.Optional[int] = None
    silent: float = 0.0
    words_per_second: float = 0.0

    def check(self):
        if self.role not in NODE_ROLES:
            raise ValueError(f"malformed {self.WHAT}: role must be one of {NODE_ROLES}, got {self.role!r}")
        if self.session is not None and len(self.session) > 64:
            raise ValueError(f"malformed {self.WHAT}: session must be a session id of at most 64 characters")
        _non_negative(self, "seconds", "words", "cpu", "kernel_cpu", "merge_cpu", "rss", "peak_rss", "bytes_sent",
                      "bytes_received", "silent", "words_per_second")
        if self.threads is not None and not 1 <= self.threads <= 4096:
            raise ValueError(f"malformed {self.WHAT}: threads must be in [1, 4096], got {self.threads}")

    @property
    def other_cpu(self):
        """CPU seconds neither in the kernel nor in merges (serving, messaging, waiting loops)."""
        return max(0.0, self.cpu - self.kernel_cpu - self.merge_cpu)


# ---------------------------------------------------------------------------------------------- status
@dataclasses.dataclass
class MemberStatus(Record):
    """A worker as the dispatcher sees it: threads, rank in the session (or None), seconds since
    last heard, jobs in flight on it, raw words it merged in this session."""

    WHAT: typing.ClassVar[str] = "worker status"
    threads: int
    rank: typing.Optional[int]
    silent: float
    in_flight: int
    words: int


@dataclasses.dataclass
class ShardMemberStatus(Record):
    """A shard as the dispatcher sees it: its URI and seconds since last heard."""

    WHAT: typing.ClassVar[str] = "shard status"
    uri: str
    silent: float


@dataclasses.dataclass
class SessionState(Record):
    """A session's id and state (``uploading``, ``running``, ``closed``, ``failed``)."""

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


@dataclasses.dataclass
class ShardHello(Record):
    """What a shard tells the dispatcher of itself when it says hello."""

    WHAT: typing.ClassVar[str] = "shard hello"
    versions: dict
