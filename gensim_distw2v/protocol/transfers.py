"""Chunked transfers: an array's rows moved in parts of at most ``part_bytes`` each.

Every bulk transfer (the client's arrays up to the dispatcher and the shards, the weights back
down; a worker's static arrays and weights at a join) moves an array's rows in parts, one call
each, so that no message passes :data:`~gensim_distw2v.config.choices.MAX_ARRAY_BYTES`. This
module splits the rows (:func:`row_ranges`), sends and fetches them through a call given by the
caller (:func:`send_in_parts`, :func:`fetch_rows`: no sockets here), and checks a part on arrival
(:func:`check_part`, :func:`receive_part`).
"""
from gensim_distw2v.protocol.arrays import pack_array, unpack_array
from gensim_distw2v.config.choices import MAX_ARRAY_BYTES

__all__ = ["row_ranges", "bytes_per_row", "send_in_parts", "fetch_rows", "check_part", "receive_part"]


def row_ranges(n_rows, row_bytes, max_bytes=16 * 1024 * 1024):
    """Split ``[0, n_rows)`` into ranges of at most ``max_bytes`` worth of full rows."""
    step = max(1, max_bytes // max(1, row_bytes))
    return [(lo, min(n_rows, lo + step)) for lo in range(0, n_rows, step)]


def bytes_per_row(array):
    """Bytes of one row of ``array`` (at least 1: an empty array has parts of any size)."""
    return max(1, array.nbytes // max(1, len(array)))


def send_in_parts(array, part_bytes, send):
    """Send ``array``'s rows in parts: ``send(lo, part)`` for each, ``part`` the rows ``[lo, hi)``
    as plain data (:func:`~gensim_distw2v.protocol.arrays.pack_array`)."""
    for lo, hi in row_ranges(len(array), bytes_per_row(array), part_bytes):
        send(lo, pack_array(array[lo:hi]))


def fetch_rows(target, part_bytes, fetch, what, check=None):
    """Fill ``target``'s rows (an array, or a view of one) in parts: ``fetch(lo, hi)`` returns the
    rows ``[lo, hi)`` as plain data, checked to be of ``target``'s dtype and shape, then by
    ``check(part)`` if given (which raises to refuse it); returns ``target``.

    Raises
    ------
    ValueError
        A part is not the rows asked for (named by ``what``).
    """
    dtype, tail = target.dtype.name, tuple(target.shape[1:])
    for lo, hi in row_ranges(len(target), bytes_per_row(target), part_bytes):
        part = unpack_array(fetch(lo, hi), what, dtype, shape=(hi - lo,) + tail)
        if check is not None:
            check(part)
        target[lo:hi] = part
    return target


def check_part(array, lo, hi, what):
    """Check that ``[lo, hi)`` is a part of ``array``'s rows that one message may carry.

    Raises
    ------
    ValueError
        Not ints, outside ``[0, len(array))``, or more than
        :data:`~gensim_distw2v.config.choices.MAX_ARRAY_BYTES`.
    """
    if not (isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool) and not isinstance(hi, bool)
            and 0 <= lo <= hi <= len(array)):
        raise ValueError(f"{what}: rows [{lo!r}, {hi!r}) outside [0, {len(array)})")
    if bytes_per_row(array) * (hi - lo) > MAX_ARRAY_BYTES:
        raise ValueError(f"{what}: too many rows in one part")


def receive_part(target, received, lo, msg, what):
    """Put an uploaded part (plain data of ``target``'s dtype and row shape) at rows ``lo``; parts
    come in order, so ``lo`` must be ``received``, the rows received so far. Returns the rows
    received now. ``what`` names the part in messages (``"upload: syn0 chunk"``).

    Raises
    ------
    ValueError
        A part out of order, of another dtype or row shape, or past ``target``'s end.
    """
    if not isinstance(lo, int) or isinstance(lo, bool) or lo != received:
        raise ValueError(f"{what} starts at {lo!r}, expected {received}")
    part = unpack_array(msg, what, target.dtype.name, ndim=target.ndim, shape=(None,) + tuple(target.shape[1:]))
    if lo + len(part) > len(target):
        raise ValueError(f"{what} [{lo}, {lo + len(part)}) overflows {len(target)} rows")
    target[lo:lo + len(part)] = part
    return lo + len(part)
