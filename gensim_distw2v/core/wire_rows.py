"""Merge rows on the wire, apart from their arithmetic: which codec a part of rows goes in, and the numpy
ways of :mod:`gensim_distw2v._rows`'s float16 work for a CPU without F16C (the merge rules and their
bookkeeping are :mod:`gensim_distw2v.core.merge`'s)."""
import math

import numpy as np

from gensim_distw2v._rows import HALF_LIMIT, from_half, send_rows, to_half
from gensim_distw2v.protocol.arrays import all_finite

__all__ = []


def _compact(values, half):
    """``(values for the wire, their float32 equivalent)``: float16 when ``half`` and it fits."""
    if half and (not len(values) or np.abs(values).max() < np.finfo(np.float16).max / 2):
        wire_values = to_half(values)
        return wire_values, from_half(wire_values)
    return values, values  # float32, or too large for float16


def _fits_half(norms):
    """Whether rows of these squared norms fit float16 (every value below :data:`HALF_LIMIT`)."""
    return not len(norms) or float(norms.max()) < HALF_LIMIT ** 2


def _part_codec(codec, norms):
    """The codec rows of these squared norms go in: ``codec``, unless they do not fit it (float16:
    a value beyond :data:`HALF_LIMIT`; int8: not finite), then float32 (the receiver refuses
    values that are not finite, naming them)."""
    if codec == "float16" and _fits_half(norms):
        return "float16"
    if codec == "int8" and (not len(norms) or math.isfinite(float(norms.max()))):
        return "int8"
    return "float32"


def _as_float32(values):
    """Received deltas (float16 or float32) as C-contiguous float32."""
    return from_half(values) if values.dtype == np.float16 else np.ascontiguousarray(values, dtype=np.float32)


def _stale_reply(weights, stale_bits, rounded, word, mask, a, end, exact, wanted, lo, codec):
    """:func:`gensim_distw2v._rows.stale_reply` in numpy (float16 without the CPU's F16C)."""
    if a < end:
        bits = stale_bits[a:end, word] | rounded[a:end, word] if exact else stale_bits[a:end, word]
        stale = np.flatnonzero(bits & mask).astype(np.uint32) + np.uint32(a)
    else:
        stale = np.zeros(0, np.uint32)
    if wanted is not None:
        stale = stale[wanted[stale.astype(np.int64) - lo]]
    reply = (stale,) + _values(weights, stale, codec)
    stale_bits[stale, word] &= ~mask
    if reply[1].dtype != np.float32:
        rounded[stale, word] |= mask
    else:
        rounded[stale, word] &= ~mask
    return reply


def _values(weights, rows, codec):
    """``(values, row scales or None)``: rows of the global weights for the wire: int8 levels with a
    scale per row if ``codec`` is int8, else float16 unless ``codec`` is float32 or a value does
    not fit float16."""
    values = weights[rows]
    if codec == "int8" and len(rows):
        return send_rows(values, np.zeros_like(values), np.arange(len(rows), dtype=np.uint32), "int8")
    if codec != "float32" and len(rows):
        half = to_half(values)
        if all_finite(half):
            return half, None
    return values, None
