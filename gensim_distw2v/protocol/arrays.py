"""Arrays and merge deltas as plain data, and their checks on arrival.

An array is ``{"dtype": str, "shape": [int, ...], "data": bytes}`` (C order); a matrix's deltas
are ``{"rows", "values"[, "scales"]}``. Every check raises :class:`ValueError` naming what is
wrong, and never executes or imports anything.
"""
import math

import numpy as np

from gensim_distw2v.config.choices import DELTA_DTYPES, MAX_ARRAY_BYTES
from gensim_distw2v.protocol.constants import ARRAY_DTYPES
from gensim_distw2v._rows import check_deltas
from gensim_distw2v.protocol.errors import Poisoned
# looked up per array on every merge (numpy's dtype.name and np.dtype(name) cost microseconds each)
_NAME_OF = {np.dtype(name): name for name in ARRAY_DTYPES}
_DTYPE = {name: np.dtype(name) for name in ARRAY_DTYPES}
_ITEMSIZE = {name: dtype.itemsize for name, dtype in _DTYPE.items()}
MAX_SCALE = float(np.finfo(np.float32).max) / 127  # an int8 row's scale: level * scale stays finite


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



def max_delta_for(alpha, vector_size):
    """The largest change a merge may make to one weight: about 16 times the largest seen in a whole
    epoch of gensim on devmix (4 at ``alpha`` 0.025 to 0.1, ``vector_size`` 100; weights are larger
    when vectors are shorter), so no real round comes near it and no value near float32's limit
    passes (docs: Security).
    """
    return float(max(64.0, 2000.0 * float(alpha)) * max(1.0, (100.0 / max(1, int(vector_size))) ** 0.5))


_ABS_BITS = {np.dtype(np.float16): (np.uint16, np.uint16(0x7FFF)), np.dtype(np.float32): (np.uint32, np.uint32(0x7FFFFFFF))}


def weight_bound(max_delta):
    """The largest weight a model may hold (trained weights downloaded, rows restored from a
    checkpoint): 100 times the largest change one merge may make (:func:`max_delta_for`)."""
    return 100.0 * float(max_delta)


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
    :class:`~gensim_distw2v.protocol.errors.Poisoned`).

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
    scales = None
    if values.dtype == np.int8:
        scales = unpack_array(need(msg, "scales", dict, what), f"{name} scales", "float32", shape=(len(rows),))
    elif "scales" in msg:
        raise ValueError(f"{what}: {name} has scales, which only int8 values take")
    # one compiled pass over rows, scales and values (no GIL; numpy took a dozen passes and temporaries)
    code, top = check_deltas(rows, values, scales, lo, hi, -1.0 if bound is None else float(bound), MAX_SCALE)
    if code == 1:
        raise ValueError(f"{what}: {name} rows must lie in [{lo}, {hi})")
    if code == 2:
        raise ValueError(f"{what}: {name} rows must be strictly increasing")
    if code == 3:
        raise ValueError(f"{what}: {name} scales must be finite, >= 0 and at most {MAX_SCALE:.3g}")
    if code == 4 and scales is not None:
        raise Poisoned(f"{what}: {name} changes a weight by up to {top:.3g}, beyond this session's bound of "
                          f"{bound:.3g}")
    if code == 4:
        raise Poisoned(f"{what}: {name} changes a weight by more than this session's bound of {bound:.3g} (or "
                          f"by inf or nan)")
    if code == 5:
        raise ValueError(f"{what}: {name} values must be finite")
    return rows, values, scales
