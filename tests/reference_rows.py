"""numpy references of the merge's compiled row work (:mod:`gensim_distw2v._rows`), for the tests only:
the readable rules the compiled passes are checked against."""
import math

import numpy as np

from gensim_distw2v._rows import HALF_LIMIT, send_rows
from gensim_distw2v.protocol.arrays import all_finite


def damp_agreeing(delta, missed, missed_sq):
    """A worker's delta, less what it repeats of the change it missed (AdaSum's pairwise rule, per row),
    as ``fold_part`` applies it to the damped rows.

    Where ``missed . delta > 0`` the result is ``AdaSum(missed, delta) - missed``: two equal updates
    count once, orthogonal ones both, partly aligned ones in between; where they disagree or nothing
    was missed, ``delta`` as is (``delta``, ``missed``: float32 (rows, dim); ``missed_sq``: their
    squared norms).
    """
    dot = np.einsum("ij,ij->i", missed, delta)
    agree = np.flatnonzero(dot > 0)
    if not len(agree):
        return delta
    out = delta.copy()
    d, m, dot = delta[agree], missed[agree], dot[agree]
    delta_sq = np.einsum("ij,ij->i", d, d)
    out[agree] -= (dot / (2 * missed_sq[agree]))[:, None] * m + (dot / (2 * delta_sq))[:, None] * d
    return out


def part_codec(codec, norms):
    """The codec a part of rows of these squared norms goes in, as ``take_part`` chooses it:
    ``codec``, unless they do not fit it (float16: a value beyond ``HALF_LIMIT``; int8: not finite),
    then float32."""
    if codec == "float16" and (not len(norms) or float(norms.max()) < HALF_LIMIT ** 2):
        return "float16"
    if codec == "int8" and (not len(norms) or math.isfinite(float(norms.max()))):
        return "int8"
    return "float32"


def stale_reply(weights, stale_bits, rounded, word, mask, a, end, exact, wanted, lo, codec):
    """``_rows.stale_reply`` in numpy steps: the stale (and, exact, rounded) rows of ``[a, end)``
    the worker wants, their values in the codec, and the bits after."""
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
    """Rows of the global weights for the wire: int8 levels with a scale per row, else float16
    unless ``codec`` is float32 or a value does not fit float16."""
    values = weights[rows]
    if codec == "int8" and len(rows):
        return send_rows(values, np.zeros_like(values), np.arange(len(rows), dtype=np.uint32), "int8")
    if codec != "float32" and len(rows):
        with np.errstate(over="ignore"):
            half = values.astype(np.float16)
        if all_finite(half):
            return half, None
    return values, None
