"""Message formats as plain data, and their validation on arrival.

Everything on the wire is msgpack-able plain data: dicts with str keys, ints, floats, str, bytes,
lists. An array is ``{"dtype": str, "shape": [int, ...], "data": bytes}`` (C order). Every
message from a peer goes through a ``check_*`` / ``unpack_*`` function here before use; they
raise :class:`ValueError` naming what is wrong, and never execute or import anything.

Messages
--------
job
    ``{"id", "epoch", "alpha", "indices": array uint32, "offsets": array int64, "raw_words", "examples"}``
range job (``corpus_file`` sessions; the dispatcher cuts them)
    ``{"id", "epoch", "alpha", "lo", "hi"}``: train the lines of the corpus file that start in
    bytes ``[lo, hi)``
session config (client -> dispatcher -> workers)
    ``{"versions", "params", "arrays": {name: {"dtype", "shape"}}, "settings", "damp_rows", "hot_rows",
    "compute_loss", "rng_state", "epochs"}``: ``settings`` is the model's
    :class:`gensim_distw2v.settings.Settings` whole (``sync_words`` resolved)
    and, for
    ``corpus_file`` training,
    ``"corpus_file": {"path", "size", "digest", "range_bytes", "total_words", "start_alpha",
    "end_alpha"}`` (the vocabulary then travels as arrays ``vocab_bytes`` and ``vocab_offsets``);
    arrays and merges move in parts of at most ``part_bytes`` bytes
merge part, merge reply, round report, shard messages
    named, typed records: :class:`MergePart`, :class:`MergeReply`, :class:`RoundReport`,
    :class:`ShardSpec`, :class:`ShardBeat` and the replies below them (:class:`Record`)
"""
import dataclasses
import math
import types
import typing

import numpy as np

__all__ = [
    "ARRAY_DTYPES", "MERGE_RULES", "MAX_JOB_WORDS", "WEIGHTS", "pack_array", "unpack_array", "pack_job",
    "unpack_job", "unpack_range_job", "check_config", "need", "pack_deltas", "unpack_deltas",
]

# dtypes allowed on the wire (anything else is refused before numpy sees it)
ARRAY_DTYPES = {"float32", "float16", "int8", "uint32", "uint8", "int64"}
DELTA_DTYPES = ("float32", "float16", "int8")  # merge deltas' values (int8 with a float32 scale per row)
MAX_SCALE = float(np.finfo(np.float32).max) / 127  # an int8 row's scale: level * scale stays finite
MERGE_RULES = ("sum", "damp", "mean")
WEIGHTS = ("syn0", "syn1neg", "syn1")  # the trained matrices, merged by the dispatcher
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
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": arr.data.cast("B") if arr.size else b""}


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
    expected = math.prod(dims) * np.dtype(name).itemsize
    if expected > MAX_ARRAY_BYTES:
        raise ValueError(f"{what}: {expected} bytes in one message is more than the {MAX_ARRAY_BYTES} allowed")
    if len(data) != expected:
        raise ValueError(f"{what}: shape {tuple(dims)} of {name} needs {expected} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=name).reshape(dims)


def pack_job(job_id, epoch, job):
    """A :class:`gensim_distw2v.jobs.Job` as a wire message."""
    return {"id": job_id, "epoch": epoch, "alpha": float(job.alpha), "indices": pack_array(job.indices),
            "offsets": pack_array(job.offsets), "raw_words": int(job.raw_words), "examples": int(job.examples)}


def unpack_job(msg, vocab_size):
    """Check a job message; return ``(id, epoch, alpha, indices, offsets, raw_words, examples)``.

    Checks everything the kernel relies on (dtype, index range, offsets that fit), so that a bad
    job is refused where it arrives.
    """
    job_id = need(msg, "id", int, "job")
    epoch = need(msg, "epoch", int, "job")
    alpha = need(msg, "alpha", float, "job")
    raw_words = need(msg, "raw_words", int, "job")
    examples = need(msg, "examples", int, "job")
    indices = unpack_array(need(msg, "indices", dict, "job"), "job indices", "uint32", ndim=1)
    offsets = unpack_array(need(msg, "offsets", dict, "job"), "job offsets", "int64", ndim=1)
    if job_id < 0 or epoch < 0 or raw_words < 0 or examples < 0 or not 0 <= alpha < 10:
        raise ValueError(f"job: id, epoch, raw_words, examples must be >= 0 and alpha in [0, 10), got "
                         f"{job_id}, {epoch}, {raw_words}, {examples}, {alpha}")
    if len(indices) > MAX_JOB_WORDS:
        raise ValueError(f"job has {len(indices)} words, more than the {MAX_JOB_WORDS} allowed")
    if len(indices) and int(indices.max()) >= vocab_size:
        raise ValueError(f"job has a word index {int(indices.max())} >= vocab_size {vocab_size}")
    if (len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(indices)
            or (len(offsets) > 1 and np.any(np.diff(offsets) < 0))):
        raise ValueError(f"job offsets must run non-decreasing from 0 to {len(indices)}")
    return job_id, epoch, alpha, indices, offsets, raw_words, examples


def unpack_range_job(msg, size):
    """Check a range job message; return ``(id, epoch, alpha, lo, hi)`` with ``0 <= lo < hi <= size``."""
    job_id = need(msg, "id", int, "range job")
    epoch = need(msg, "epoch", int, "range job")
    alpha = need(msg, "alpha", float, "range job")
    lo, hi = need(msg, "lo", int, "range job"), need(msg, "hi", int, "range job")
    if job_id < 0 or epoch < 0 or not 0 <= alpha < 10 or not 0 <= lo < hi <= size:
        raise ValueError(f"range job: id and epoch must be >= 0, alpha in [0, 10) and 0 <= lo < hi <= {size}, got "
                         f"{job_id}, {epoch}, {alpha}, {lo}, {hi}")
    return job_id, epoch, alpha, lo, hi


def _check_corpus_file(spec):
    for key in ("path", "digest"):
        need(spec, key, str, "corpus_file")
    for key in ("size", "range_bytes", "total_words"):
        need(spec, key, int, "corpus_file")
    for key in ("start_alpha", "end_alpha"):
        need(spec, key, float, "corpus_file")
    if spec["size"] < 0 or spec["range_bytes"] < 1 or spec["total_words"] < 1:
        raise ValueError(f"corpus_file: size must be >= 0, range_bytes and total_words >= 1, got {spec['size']}, "
                         f"{spec['range_bytes']}, {spec['total_words']}")
    if not spec["path"] or "\0" in spec["path"]:
        raise ValueError("corpus_file: path must be a non-empty str without NUL")


def check_damp_rows(damp_rows, what="session config"):
    """``damp_rows`` (how many first rows of ``syn0`` and ``syn1neg`` the damp rule damps) as plain
    ints; ValueError naming the problem otherwise."""
    if not isinstance(damp_rows, dict) or set(damp_rows) != {"syn0", "syn1neg"} or any(
            isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in damp_rows.values()):
        raise ValueError(f"{what}: damp_rows must be {{'syn0': int >= 0, 'syn1neg': int >= 0}}, got {damp_rows!r}")
    return {name: int(n) for name, n in damp_rows.items()}


def check_cold_every(cold_every, what=None):
    """``cold_every`` (merge the rows of rare words every n-th round) as an int in [1, 1000];
    ValueError naming the problem otherwise."""
    if isinstance(cold_every, bool) or not isinstance(cold_every, (int, np.integer)) or not 1 <= cold_every <= 1000:
        where = f"{what}: " if what else ""
        raise ValueError(f"{where}cold_every must be an int in [1, 1000] (merge the rows of rare words every "
                         f"n-th round; 1: in every round), got {cold_every!r}")
    return int(cold_every)


def check_config(config):
    """Check a session config from a client; return it (plain data, validated).

    Raises
    ------
    ValueError
        A missing or malformed field, an unknown merge rule, or inconsistent array declarations.
    """
    need(config, "versions", dict, "session config")
    params = need(config, "params", dict, "session config")
    for key in ("sg", "hs", "negative", "window", "cbow_mean", "vector_size", "vocab_size", "seed"):
        need(params, key, int, "session params")
    for key in ("shrink_windows", "sample"):
        need(params, key, bool, "session params")
    vocab, size = params["vocab_size"], params["vector_size"]
    if vocab < 1 or size < 1 or vocab >= 2 ** 32:
        raise ValueError(f"session params: vocab_size and vector_size must be >= 1, got {vocab} and {size}")
    if not params["hs"] and not params["negative"]:
        raise ValueError("session params: either hs=1 or negative > 0 is needed")
    arrays = need(config, "arrays", dict, "session config")
    wanted = {"syn0", "lockf"} | ({"syn1neg", "cum_table"} if params["negative"] else set()) \
        | ({"sample_int"} if params["sample"] else set()) \
        | ({"syn1", "points", "codes", "code_offsets"} if params["hs"] else set()) \
        | ({"vocab_bytes", "vocab_offsets"} if config.get("corpus_file") is not None else set())
    if config.get("corpus_file") is not None:
        _check_corpus_file(need(config, "corpus_file", dict, "session config"))
        if list(need(arrays.get("vocab_offsets"), "shape", (list, tuple), "array vocab_offsets")) != [vocab + 1]:
            raise ValueError(f"array vocab_offsets must have vocab_size + 1 = {vocab + 1} entries")
    if set(arrays) != wanted:
        raise ValueError(f"session config: arrays must be exactly {sorted(wanted)}, got {sorted(arrays)}")
    for name, spec in arrays.items():
        dtype = need(spec, "dtype", str, f"array {name}")
        dims = need(spec, "shape", (list, tuple), f"array {name}")
        if name in WEIGHTS:
            if dtype != "float32" or list(dims) != [vocab, size]:
                raise ValueError(f"array {name} must be float32 of shape ({vocab}, {size}), got {dtype} {dims}")
        elif dtype != STATIC[name] or len(dims) != 1 or not isinstance(dims[0], int) or dims[0] < 0:
            raise ValueError(f"array {name} must be 1-dimensional {STATIC[name]}, got {dtype} {dims}")
    from gensim_distw2v.settings import Settings  # (settings needs merge, which needs this module)

    settings = Settings.from_wire(need(config, "settings", dict, "session config"))
    if settings.sync_words is None:
        raise ValueError("session settings: sync_words must be set (the client derives it from the workers)")
    config["settings"] = settings.to_wire()  # validated and normalised
    check_damp_rows(need(config, "damp_rows", dict, "session config"))
    if not 0 <= need(config, "hot_rows", int, "session config") <= vocab:
        raise ValueError(f"hot_rows must be in [0, vocab_size={vocab}], got {config['hot_rows']}")
    need(config, "compute_loss", bool, "session config")
    need(config, "epochs", int, "session config")
    rng = need(config, "rng_state", dict, "session config")
    unpack_array(need(rng, "keys", dict, "rng_state"), "rng_state keys", "uint32", shape=(624,))
    if not 0 <= need(rng, "pos", int, "rng_state") <= 624:
        raise ValueError("rng_state: pos must be in [0, 624]")
    return config


def all_finite(values):
    """No inf or nan in a float16 or float32 array (float16: from the bits, 10x faster than numpy's isfinite)."""
    if values.dtype == np.float16:
        exponent = values.view(np.uint16) & np.uint16(0x7C00)
        return not (exponent == 0x7C00).any()
    return bool(np.isfinite(values).all())


def unpack_deltas(msg, name, vector_size, lo, hi, what, absolute=False):
    """One matrix's deltas ``{"rows", "values"[, "scales"]}`` of a merge part or reply, checked
    (with ``absolute``, rows' values: float16 or float32 only).

    Returns
    -------
    tuple
        ``(rows, values, scales)``: uint32 rows, strictly increasing, in ``[lo, hi)``; finite values
        (float32, float16, or int8 levels); int8's float32 scales (one per row, ``0 <= scale <=``
        :data:`MAX_SCALE`), else None.
    """
    rows = unpack_array(need(msg, "rows", dict, what), f"{name} rows", "uint32", ndim=1)
    values = unpack_array(need(msg, "values", dict, what), f"{name} values",
                          ("float32", "float16") if absolute else DELTA_DTYPES, ndim=2,
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
    elif "scales" in msg:
        raise ValueError(f"{what}: {name} has scales, which only int8 values take")
    elif not all_finite(values):
        raise ValueError(f"{what}: {name} values must be finite")
    return rows, values, scales


# ---------------------------------------------------------------------------------------------- records
# Messages as named, typed records: each is defined once here, with its validation beside it.
# ``to_wire()`` gives the plain dict that travels; ``from_wire(msg)`` checks every field's type (and
# refuses unknown ones), then the record's own ``check()``; both sides use the same class.

def _kind(annotation):
    """The type(s) :func:`need` checks for a field's annotation (``Optional[X]`` allows None)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(_kind(a) if a is not type(None) else type(None) for a in typing.get_args(annotation))
    if annotation is list:
        return (list, tuple)
    return annotation


def _flat(kinds):
    out = []
    for kind in kinds if isinstance(kinds, tuple) else (kinds,):
        out.extend(_flat(kind) if isinstance(kind, tuple) else [kind])
    return tuple(out)


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
        fields = dataclasses.fields(cls)
        unknown = set(msg) - {f.name for f in fields}
        if unknown:
            raise ValueError(f"malformed {cls.WHAT}: unknown fields {sorted(map(str, unknown))}")
        values = {}
        for field in fields:
            kind = _flat(_kind(field.type))
            if type(None) in kind and msg.get(field.name) is None:
                values[field.name] = None
                continue
            values[field.name] = need(msg, field.name, tuple(k for k in kind if k is not type(None))
                                      if len(kind) > 1 else kind[0], cls.WHAT)
        record = cls(**values)
        record.check(**context)
        return record

    def check(self, **context):
        """Checks beyond the fields' types (ranges, consistency); raise ValueError naming the problem."""

    def to_wire(self):
        """The record as plain data for the wire."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


def _non_negative(record, *names):
    for name in names:
        if getattr(record, name) < 0:
            raise ValueError(f"malformed {record.WHAT}: {name} must be >= 0, got {getattr(record, name)}")


@dataclasses.dataclass
class ShardSpec(Record):
    """What a shard holds of a session (client -> shard): rows ``index, index + count, ...`` of
    each trained matrix (:class:`gensim_distw2v.layout.ShardLayout`), and how it merges them.
    ``damp_rows`` is the session's (global rows); the shard keeps its own share of them."""

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
    versions: dict

    def check(self):
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
        self.weights = list(self.weights)


@dataclasses.dataclass
class MergePart(Record):
    """One part of a worker's merge round with one shard (worker -> shard), in the shard's own rows.

    ``matrices`` maps a matrix to its deltas (:func:`pack_deltas`) for rows in ``[lo, hi)``;
    ``hold_back`` and ``max_rows`` (-1: no cap) shape the reply, ``exact`` asks for float32,
    ``hot_rows`` (-1: every row) limits a routine round's ``syn0`` and ``syn1neg`` to the rows
    below it. The shard answers with a :class:`MergeReply`.
    """

    WHAT: typing.ClassVar[str] = "merge part"
    session: str
    rank: int
    lo: int
    hi: int
    matrices: dict
    hold_back: float
    max_rows: int
    hot_rows: int
    exact: bool

    def check(self, n_rows=None, vector_size=None, weights=()):
        if not 0 <= self.lo <= self.hi <= (n_rows if n_rows is not None else self.hi):
            raise ValueError(f"merge part: row range [{self.lo}, {self.hi}) is outside [0, {n_rows})")
        _non_negative(self, "rank")
        if not 0.0 <= self.hold_back < 1.0:
            raise ValueError(f"merge part: hold_back must be in [0, 1), got {self.hold_back}")
        if self.max_rows < -1 or self.hot_rows < -1:
            raise ValueError(f"merge part: max_rows and hot_rows must be >= 0, or -1 (no limit), got "
                             f"{self.max_rows} and {self.hot_rows}")
        unknown = set(self.matrices) - set(weights)
        if unknown:
            raise ValueError(f"merge part: unknown matrices {sorted(map(str, unknown))}; this session trains "
                             f"{sorted(weights)}")
        if vector_size is not None:  # unpacked in place: the shard folds arrays, not messages
            self.matrices = {name: unpack_deltas(msg, name, vector_size, self.lo, self.hi, "merge part")
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

    def check(self):
        if self.flush < -1:
            raise ValueError(f"round report: flush must be an epoch or -1, got {self.flush}")
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

    def check(self):
        _check_shard_list(self)


@dataclasses.dataclass
class Joined(Record):
    """The dispatcher's answer to a worker's ``join``: the session config (checked on arrival with
    :func:`check_config`), the worker's rank (rank 0 continues the client's random stream) and
    the session's shards."""

    WHAT: typing.ClassVar[str] = "join reply"
    config: dict
    rank: int
    shards: list

    def check(self):
        _non_negative(self, "rank")
        _check_shard_list(self)
        check_config(self.config)


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
