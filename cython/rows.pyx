# cython: language_level=3
# cython: boundscheck=False
# cython: wraparound=False
# cython: cdivision=True
"""Row arithmetic of the merge protocol, one pass per call and without the GIL.

A merge round touches a few thousand rows of each matrix on the worker (which rows changed,
their deltas, advancing the base) and, on the server, the global weights, the damped rows'
per-worker snapshots and the stale bits. numpy does each step as a gather, a temporary and a
scatter, with the GIL held; these loops do it in place, so training threads (and the dispatcher's other calls) go
on meanwhile. The callers (:mod:`gensim_distw2v.core.merge`, :mod:`gensim_distw2v.core.replica`) check shapes
and ranges; the functions here check them again and raise ``ValueError`` rather than touch memory they do not own.
"""

import numpy as np

cimport numpy as cnp
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.math cimport INFINITY
from libc.string cimport memcmp, memcpy

cnp.import_array()


# Squared norms in double through eight independent partial sums: one running sum waits for
# every add before the next (a chain of ``width`` adds per row, the slowest step of the merge loops)
cdef inline double _sq_dist(const float *a, const float *b, Py_ssize_t n) noexcept nogil:
    """``sum((a - b)**2)`` in double (each difference exact); ``sum(a**2)`` when ``b`` is NULL."""
    cdef double s[8]
    cdef double d
    cdef Py_ssize_t j = 0, k
    for k in range(8):
        s[k] = 0.0
    while j + 8 <= n:
        for k in range(8):
            d = <double>a[j + k] - (<double>b[j + k] if b != NULL else 0.0)
            s[k] += d * d
        j += 8
    while j < n:
        d = <double>a[j] - (<double>b[j] if b != NULL else 0.0)
        s[0] += d * d
        j += 1
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))


cdef inline float _norm_floor(double total) noexcept nogil:
    """A squared norm as float32: a row that is not all zeros keeps a non-zero norm (float32 would underflow)."""
    return <float>total if total == 0.0 or total > 1e-30 else <float>1e-30


def changed_rows(const float[:, ::1] replica, const float[:, ::1] base, Py_ssize_t lo, Py_ssize_t hi):
    """Rows of ``[lo, hi)`` where ``replica`` differs from ``base``, and their squared change.

    Parameters
    ----------
    replica, base : numpy.ndarray of float32, C-contiguous, same shape
        The worker's replica ``R`` and base ``B``.
    lo, hi : int
        Row range, ``0 <= lo <= hi <= len(replica)``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The changed rows (uint32, increasing) and ``sum((R - B)**2)`` of each (float64).
    """
    if replica.shape[0] != base.shape[0] or replica.shape[1] != base.shape[1]:
        raise ValueError(f"replica and base must have the same shape, got ({replica.shape[0]}, {replica.shape[1]}) "
                         f"and ({base.shape[0]}, {base.shape[1]})")
    if not 0 <= lo <= hi <= replica.shape[0]:
        raise ValueError(f"rows [{lo}, {hi}) are outside [0, {replica.shape[0]})")
    rows = np.empty(hi - lo, dtype=np.uint32)
    norms = np.empty(hi - lo, dtype=np.float64)
    cdef cnp.uint32_t[::1] rows_view = rows
    cdef double[::1] norms_view = norms
    cdef Py_ssize_t r, j, n = 0, width = replica.shape[1]
    cdef double total
    with nogil:
        for r in range(lo, hi):
            if width == 0 or memcmp(&replica[r, 0], &base[r, 0], width * sizeof(float)) == 0:
                continue  # bit-identical: unchanged (memcmp is vectorized; most rows are, for rare words)
            total = _sq_dist(&replica[r, 0], &base[r, 0], width)
            if total != 0.0:  # not just -0.0 against 0.0 (a NaN counts as changed)
                rows_view[n] = <cnp.uint32_t>r
                norms_view[n] = total
                n += 1
    return rows[:n], norms[:n]


cdef int _check_rows(const cnp.uint32_t[::1] rows, Py_ssize_t n_rows) except -1:
    cdef Py_ssize_t i
    cdef cnp.uint32_t bad = 0
    cdef bint out = False
    with nogil:
        for i in range(rows.shape[0]):
            if rows[i] >= n_rows:
                out, bad = True, rows[i]
                break
    if out:
        raise ValueError(f"row {bad} is outside [0, {n_rows})")
    return 0


def row_diff(const float[:, ::1] a, const float[:, ::1] b, const cnp.uint32_t[::1] rows):
    """``a[rows] - b[rows]`` as a new float32 array, in one pass.

    Parameters
    ----------
    a, b : numpy.ndarray of float32, C-contiguous, same shape
    rows : numpy.ndarray of uint32
        Rows of ``a`` and ``b``.

    Returns
    -------
    numpy.ndarray
        float32, ``(len(rows), a.shape[1])``.
    """
    if a.shape[0] != b.shape[0] or a.shape[1] != b.shape[1]:
        raise ValueError("a and b must have the same shape")
    _check_rows(rows, a.shape[0])
    out = np.empty((rows.shape[0], a.shape[1]), dtype=np.float32)
    cdef float[:, ::1] out_view = out
    cdef Py_ssize_t i, j, r, width = a.shape[1]
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(width):
                out_view[i, j] = a[r, j] - b[r, j]
    return out


def add_rows(float[:, ::1] matrix, const cnp.uint32_t[::1] rows, const float[:, ::1] values, float scale=1.0,
             float[::1] norms=None):
    """``matrix[rows] += scale * values`` in place; with ``norms``, also ``norms[rows] = |matrix[rows]|**2``.

    Parameters
    ----------
    matrix : numpy.ndarray of float32, C-contiguous
        Updated in place.
    rows : numpy.ndarray of uint32
        Distinct rows of ``matrix`` (a repeated row is added to twice).
    values : numpy.ndarray of float32, C-contiguous, ``(len(rows), matrix.shape[1])``
    scale : float
    norms : numpy.ndarray of float32, optional
        ``len(matrix)`` squared row norms, kept up to date for the rows touched.
    """
    if values.shape[0] != rows.shape[0] or values.shape[1] != matrix.shape[1]:
        raise ValueError(f"values must have shape ({rows.shape[0]}, {matrix.shape[1]}), "
                         f"got ({values.shape[0]}, {values.shape[1]})")
    if norms is not None and norms.shape[0] != matrix.shape[0]:
        raise ValueError(f"norms must have {matrix.shape[0]} entries, got {norms.shape[0]}")
    _check_rows(rows, matrix.shape[0])
    cdef Py_ssize_t i, j, r, width = matrix.shape[1]
    cdef bint with_norms = norms is not None
    with nogil:
        for i in range(rows.shape[0]):
            r = rows[i]
            for j in range(width):
                matrix[r, j] = matrix[r, j] + scale * values[i, j]
            if with_norms:
                norms[r] = _norm_floor(_sq_dist(&matrix[r, 0], NULL, width))


cdef extern from "half.h" nogil:
    int dw2v_f16c()
    int dw2v_half_hardware(int on)
    int dw2v_half_on_hardware()
    void dw2v_to_half(const float *src, cnp.uint16_t *dst, Py_ssize_t n)
    void dw2v_from_half(const cnp.uint16_t *src, float *dst, Py_ssize_t n)

cdef bint F16C = dw2v_f16c()
dw2v_half_hardware(1)

cdef extern from *:
    """
    /* Ask for a row's cache lines ahead of use: rows are visited in increasing but scattered order,
       which the hardware prefetcher does not follow; the loops below prefetch PREFETCH_AHEAD rows ahead. */
    #define DW2V_PREFETCH_AHEAD 4
    static inline void dw2v_prefetch_row(const void *row, Py_ssize_t bytes) {
        const char *p = (const char *)row;
        for (Py_ssize_t k = 0; k < bytes; k += 64) __builtin_prefetch(p + k, 1, 3);
    }
    """
    const Py_ssize_t AHEAD "DW2V_PREFETCH_AHEAD"
    void prefetch_row "dw2v_prefetch_row"(const void *row, Py_ssize_t bytes) noexcept nogil
HAS_F16C = bool(F16C)  #: the CPU converts float16 in hardware (else half.h's portable code does, bit for bit)


def half_hardware(on=None):
    """Whether float16 converts with the CPU's F16C instructions (they are used where the CPU has them).

    ``on=False`` switches every conversion of this process to half.h's portable code, which gives
    the same bits (finite values and infinities; NaNs stay NaNs), ``on=True`` back to the
    instructions where the CPU has them: tests run the path of a CPU without F16C on one with it.
    Returns the path in use afterwards (True: the instructions).
    """
    if on is not None:
        dw2v_half_hardware(1 if on else 0)
    return bool(dw2v_half_on_hardware())


def to_half(values):
    """``values.astype(numpy.float16)``, with the CPU's F16C instructions where it has them.

    numpy converts to float16 one element at a time (about 30 times slower than a copy); a merge
    round converts every delta it sends. Same rounding (to nearest, ties to even), same result.
    """
    values = np.ascontiguousarray(values, dtype=np.float32)
    out = np.empty(values.shape, dtype=np.float16)
    cdef const float[::1] src = values.reshape(-1)
    cdef cnp.uint16_t[::1] dst = out.reshape(-1).view(np.uint16)
    if src.shape[0]:
        with nogil:
            dw2v_to_half(&src[0], &dst[0], src.shape[0])
    return out


def from_half(values):
    """``values.astype(numpy.float32)`` for float16 ``values`` (F16C where the CPU has it)."""
    values = np.ascontiguousarray(values, dtype=np.float16)
    out = np.empty(values.shape, dtype=np.float32)
    cdef const cnp.uint16_t[::1] src = values.reshape(-1).view(np.uint16)
    cdef float[::1] dst = out.reshape(-1)
    if src.shape[0]:
        with nogil:
            dw2v_from_half(&src[0], &dst[0], src.shape[0])
    return out


# Fused merge steps: one pass over the rows of a matrix instead of a gather, conversions and a
# scatter each (float16 with F16C where the CPU has it, else half.h's portable code).
HALF_LIMIT = 32752.0  # |values| below this fit float16 with room to round (numpy's max is 65504)


cdef inline void _round_to_half(float *row, cnp.uint16_t *out, Py_ssize_t width) noexcept nogil:
    """``out = float16(row)``, then ``row = float32(out)``: the row becomes what the wire carries."""
    cdef Py_ssize_t j
    cdef float x
    for j in range(width):  # never inf: a value beyond float16's range goes as its largest value (branch-free)
        x = row[j]
        x = 65504.0 if x > 65504.0 else x
        row[j] = -65504.0 if x < -65504.0 else x
    dw2v_to_half(row, out, width)
    dw2v_from_half(out, row, width)


# int8 deltas: each row on its own scale (its largest |value| -> level 127), the scale as float32.
# A row of width d costs d + 4 bytes instead of float16's 2 d; what rounding loses stays behind for
# the next round (error feedback), as float16's rounding does. Receivers compute ``level * scale``
# in float32 exactly as the sender does, so both sides add bit-identical values.
from gensim_distw2v.config.choices import DELTA_DTYPES as CODECS  # the value codecs of merge deltas


cdef extern from "q8.h" nogil:
    float dw2v_to_q8(float *row, signed char *out, Py_ssize_t n)
    void dw2v_from_q8(const signed char *levels, float scale, float *row, Py_ssize_t n)


cdef inline void _round_to_q8(float *row, signed char *out, float *row_scale, Py_ssize_t width) noexcept nogil:
    """``out`` = the row's int8 levels and ``row_scale`` their scale, then ``row = out * row_scale`` (what
    the wire carries). ``row`` must be finite."""
    row_scale[0] = dw2v_to_q8(row, out, width)


cdef inline void _from_q8(const signed char *levels, float row_scale, float *row, Py_ssize_t width) noexcept nogil:
    """``row = levels * row_scale`` in float32, as :func:`_round_to_q8` leaves the sender's row."""
    dw2v_from_q8(levels, row_scale, row, width)


cdef int _codec(codec) except -1:
    """0, 1, 2 for "float32", "float16", "int8"; ValueError naming the choices otherwise."""
    if codec not in CODECS:
        raise ValueError(f"unknown delta codec {codec!r}; choose one of {CODECS}")
    return CODECS.index(codec)


def _delta_out(Py_ssize_t n, Py_ssize_t width, int codec):
    """Empty values (and int8's scales, else None) for ``n`` rows of ``width``."""
    values = np.empty((n, width), dtype=CODECS[codec])
    return values, (np.empty(n, dtype=np.float32) if codec == 2 else None)


cdef int _check_incoming(values, row_scales, Py_ssize_t n, Py_ssize_t width, str what) except -1:
    """Checks deltas coming in: shape, dtype, and int8's scales; returns the codec."""
    if values.ndim != 2 or values.shape[0] != n or values.shape[1] != width:
        raise ValueError(f"{what}: values must have shape ({n}, {width}), got {values.shape}")
    if values.dtype.name not in CODECS:
        raise ValueError(f"{what}: values must be one of {CODECS}, got {values.dtype}")
    cdef int codec = CODECS.index(values.dtype.name)
    if (codec == 2) != (row_scales is not None):
        raise ValueError(f"{what}: int8 values need their row scales (and only int8 values have them)")
    if codec == 2 and (row_scales.ndim != 1 or row_scales.shape[0] != n or row_scales.dtype != np.float32):
        raise ValueError(f"{what}: row scales must be float32 of shape ({n},), got {row_scales.dtype} "
                         f"{row_scales.shape}")
    return codec


def send_rows(float[:, ::1] replica, float[:, ::1] base, const cnp.uint32_t[::1] rows, codec):
    """A worker's deltas ``replica[rows] - base[rows]`` for the wire, and ``base[rows] +=`` what they carry.

    One pass: ``row_diff``, rounding to the codec and ``add_rows(base, ...)`` of the value sent,
    so that the base advances by exactly what the dispatcher receives (rounding stays in
    ``replica - base`` for the next round).

    Parameters
    ----------
    replica, base : numpy.ndarray of float32, C-contiguous, same shape
    rows : numpy.ndarray of uint32
        Distinct rows.
    codec : {'float32', 'float16', 'int8'}
        How values go (int8: levels and a float32 scale
        per row; both need finite deltas, float16 below :data:`HALF_LIMIT`).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray or None)
        ``(len(rows), width)`` values of the codec's dtype; int8's ``(len(rows),)`` float32 row
        scales, else None.
    """
    if replica.shape[0] != base.shape[0] or replica.shape[1] != base.shape[1]:
        raise ValueError("replica and base must have the same shape")
    cdef int kind = _codec(codec)
    _check_rows(rows, replica.shape[0])
    return _send(replica, base, rows, kind, None)


cdef tuple _send(float[:, ::1] replica, float[:, ::1] base, const cnp.uint32_t[::1] rows, int kind, differing):
    """:func:`send_rows`' work (``rows`` checked); with ``differing`` (uint8, one per row) also marks,
    in the same pass while the row is in cache, the rows where ``replica`` still differs from the
    advanced ``base`` (what the codec's rounding left behind)."""
    cdef Py_ssize_t i, j, r, n = rows.shape[0], width = replica.shape[1]
    out, row_scales = _delta_out(n, width, kind)
    cdef cnp.uint16_t[:, ::1] out16
    cdef float[:, ::1] out32
    cdef signed char[:, ::1] out8
    cdef float[::1] scales8
    cdef float[::1] scratch = np.empty(max(1, width), dtype=np.float32)
    cdef cnp.uint8_t[::1] differ
    cdef bint marking = differing is not None
    if marking:
        differ = differing
    if kind == 1:
        out16 = out.view(np.uint16)
    elif kind == 2:
        out8, scales8 = out, row_scales
    else:
        out32 = out
    with nogil:
        for i in range(n):
            if i + AHEAD < n:
                prefetch_row(&replica[rows[i + AHEAD], 0], width * sizeof(float))
                prefetch_row(&base[rows[i + AHEAD], 0], width * sizeof(float))
            r = rows[i]
            for j in range(width):
                scratch[j] = replica[r, j] - base[r, j]
            if kind == 1:
                _round_to_half(&scratch[0], &out16[i, 0], width)
            elif kind == 2:
                _round_to_q8(&scratch[0], &out8[i, 0], &scales8[i], width)
            else:
                for j in range(width):
                    out32[i, j] = scratch[j]
            for j in range(width):
                base[r, j] = base[r, j] + scratch[j]
            if marking:
                differ[i] = width > 0 and memcmp(&replica[r, 0], &base[r, 0], width * sizeof(float)) != 0
    return out, row_scales


def take_rows(float[:, ::1] replica, float[:, ::1] base, const cnp.uint32_t[::1] rows, values, row_scales=None,
              bint absolute=False):
    """``replica[rows] += values; base[rows] += values`` in one pass; with ``absolute``, ``values``
    are the rows' new global values: ``replica[rows] += values - base[rows]; base[rows] = values``
    (what the worker has not sent stays in ``replica - base``).

    ``values`` float32, float16 or int8 with ``row_scales``
    (float32, one per row: the value is ``level * scale``).
    """
    if replica.shape[0] != base.shape[0] or replica.shape[1] != base.shape[1]:
        raise ValueError("replica and base must have the same shape")
    cdef Py_ssize_t i, j, r, n = rows.shape[0], width = replica.shape[1]
    cdef int kind = _check_incoming(values, row_scales, n, width, "take_rows")
    _check_rows(rows, replica.shape[0])
    values = np.ascontiguousarray(values)
    cdef const cnp.uint16_t[:, ::1] in16
    cdef const float[:, ::1] in32
    cdef const signed char[:, ::1] in8
    cdef const float[::1] scales8
    cdef float[::1] scratch = np.empty(max(1, width), dtype=np.float32)
    if kind == 1:
        in16 = values.view(np.uint16)
    elif kind == 2:
        in8, scales8 = values, row_scales
    else:
        in32 = values
    with nogil:
        for i in range(n):
            if i + AHEAD < n:
                prefetch_row(&replica[rows[i + AHEAD], 0], width * sizeof(float))
                prefetch_row(&base[rows[i + AHEAD], 0], width * sizeof(float))
            r = rows[i]
            if kind == 1:
                dw2v_from_half(&in16[i, 0], &scratch[0], width)
            elif kind == 2:
                _from_q8(&in8[i, 0], scales8[i], &scratch[0], width)
            else:
                for j in range(width):
                    scratch[j] = in32[i, j]
            if absolute:
                for j in range(width):
                    replica[r, j] = replica[r, j] + (scratch[j] - base[r, j])
                    base[r, j] = scratch[j]
            else:
                for j in range(width):
                    replica[r, j] = replica[r, j] + scratch[j]
                    base[r, j] = base[r, j] + scratch[j]


def fold_part(float[:, ::1] weights, const cnp.uint32_t[::1] rows, values, Py_ssize_t top, float[:, ::1] snap,
              cnp.uint64_t[:, ::1] stale, const cnp.uint64_t[::1] marks, float scale=1.0, row_scales=None,
              Py_ssize_t damp_below=-1):
    """A server's side of a worker's merge part, for one matrix, in one pass over its rows; the
    work per row does not depend on the number of workers.

    For each row ``r = rows[i]`` with ``d = values[i]``:

    * ``i < top`` (a row with a snapshot, ``r < len(snap)``): ``snap`` is the worker's base as the
      server knows it, so ``m = weights[r] - snap[r]`` is what the worker missed; for a damped row
      (``r < damp_below``, or any such row if ``damp_below`` is -1), where ``m . d > 0`` the
      update is ``u = d - (m . d) / (2 |m|^2) m - (m . d) / (2 |d|^2) d`` (AdaSum's pairwise
      rule, as :func:`gensim_distw2v.merge.damp_agreeing`), else ``u = d``; ``snap[r] += d``
      (the worker's base advanced by what it sent);
    * otherwise ``u = d`` and ``stale[r, :] |= marks`` (the workers whose bit is set lack the
      row's new value);
    * ``weights[r] += scale * u``.

    Parameters
    ----------
    weights : numpy.ndarray of float32, C-contiguous ``(n_rows, dim)``
        The global weights.
    rows : numpy.ndarray of uint32
        Distinct rows, increasing.
    values : numpy.ndarray of float32, float16 or int8, ``(len(rows), dim)``
        The worker's deltas (int8 needs ``row_scales``).
    top : int
        The first ``top`` rows have a snapshot (they are below ``len(snap)``).
    snap : numpy.ndarray of float32, C-contiguous ``(n_snapshot, dim)``
        The worker's snapshot of the first rows.
    stale : numpy.ndarray of uint64, C-contiguous ``(n_rows, words)``
        One bit per worker slot and row.
    marks : numpy.ndarray of uint64, ``(words,)``
        The bits to set on the rows written (every other worker's; under ``mean`` the writer's too).
    scale : float
    row_scales : numpy.ndarray of float32, optional
        int8 values' scales, one per row (the value is ``level * scale``).
    damp_below : int
        Rows with a snapshot below this are damped, the others summed; -1: every one is damped.

    Returns
    -------
    int
        How many rows the damp rule took part of (their deltas agreed with what the worker missed).
    """
    cdef Py_ssize_t n = rows.shape[0], width = weights.shape[1], words = stale.shape[1], i, j, k, r, damped = 0
    if snap.shape[1] != width or snap.shape[0] > weights.shape[0]:
        raise ValueError("fold_part: snap must have the weights' width and at most their rows")
    if stale.shape[0] != weights.shape[0] or marks.shape[0] != words:
        raise ValueError("fold_part: stale must have a row per weight row, marks a word per stale column")
    cdef int kind = _check_incoming(values, row_scales, n, width, "fold_part")
    if not 0 <= top <= n:
        raise ValueError(f"fold_part: top={top} is outside [0, {n}]")
    _check_rows(rows, weights.shape[0])
    if top and rows[top - 1] >= snap.shape[0]:
        raise ValueError(f"fold_part: damped row {rows[top - 1]} is outside the snapshot's {snap.shape[0]} rows")
    values = np.ascontiguousarray(values)
    cdef float *sent = <float *>malloc(max(1, width) * sizeof(float))
    cdef float *update = <float *>malloc(max(1, width) * sizeof(float))
    cdef const cnp.uint16_t[:, ::1] in16
    cdef const float[:, ::1] in32
    cdef const signed char[:, ::1] in8
    cdef const float[::1] scales8
    cdef double dot, delta_sq, missed_sq, a, b, m
    try:
        if sent == NULL or update == NULL:
            raise MemoryError()
        if kind == 1:
            in16 = values.view(np.uint16)
        elif kind == 2:
            in8, scales8 = values, row_scales
        else:
            in32 = values
        with nogil:
            for i in range(n):
                if i + AHEAD < n:
                    r = rows[i + AHEAD]
                    prefetch_row(&weights[r, 0], width * sizeof(float))
                    if i + AHEAD < top:
                        prefetch_row(&snap[r, 0], width * sizeof(float))
                r = rows[i]
                if kind == 1:
                    dw2v_from_half(&in16[i, 0], sent, width)
                elif kind == 2:
                    _from_q8(&in8[i, 0], scales8[i], sent, width)
                else:
                    for j in range(width):
                        sent[j] = in32[i, j]
                for j in range(width):
                    update[j] = sent[j]
                if i < top:  # damp: AdaSum's pairwise rule against what the worker missed
                    missed_sq = _sq_dist(&weights[r, 0], &snap[r, 0], width) \
                        if damp_below < 0 or r < damp_below else 0.0
                    if missed_sq > 0:
                        dot = 0.0
                        delta_sq = 0.0
                        for j in range(width):
                            m = <double>weights[r, j] - <double>snap[r, j]
                            dot = dot + m * sent[j]
                            delta_sq = delta_sq + <double>sent[j] * sent[j]
                        if dot > 0:
                            damped = damped + 1
                            a = dot / (2 * missed_sq)
                            b = dot / (2 * delta_sq)
                            for j in range(width):
                                update[j] = <float>(sent[j] - a * (<double>weights[r, j] - <double>snap[r, j])
                                                    - b * sent[j])
                    for j in range(width):
                        snap[r, j] = snap[r, j] + sent[j]
                else:
                    for k in range(words):
                        stale[r, k] = stale[r, k] | marks[k]
                for j in range(width):
                    weights[r, j] = weights[r, j] + scale * update[j]
    finally:
        free(sent)
        free(update)
    return damped


cdef struct _Entry:
    double value
    Py_ssize_t index


cdef int _by_value(const void *a, const void *b) noexcept nogil:
    cdef double x = (<const _Entry *>a).value, y = (<const _Entry *>b).value
    return -1 if x < y else (1 if x > y else 0)


cdef inline Py_ssize_t _bucket(double value) noexcept nogil:
    """The leading 16 bits of a non-negative double: increasing with the value."""
    cdef cnp.uint64_t bits
    memcpy(&bits, &value, sizeof(double))
    return <Py_ssize_t>(bits >> 48)


cdef int _hold_back(const double *v, Py_ssize_t n, double hold_back, cnp.uint8_t *held) except -1 nogil:
    """Set ``held[i]`` for the smallest ``v`` that together carry up to ``hold_back`` of their sum
    (``held`` zeroed by the caller); nothing with a value NaN, negative or infinite. The selection of a
    sort in linear time: a histogram of the values' leading bits finds the bucket where the budget
    runs out, and only that bucket is sorted."""
    cdef Py_ssize_t i, b, top = -1, count = 0, low = 65535, high = 0
    cdef double total = 0.0, budget, cum = 0.0
    cdef double *sums
    cdef _Entry *edge = NULL
    if not hold_back > 0 or n <= 1:  # (a NaN share holds nothing back)
        return 0
    for i in range(n):
        if not v[i] >= 0 or v[i] == INFINITY:  # send everything: the receiver refuses what is not finite
            return 0
        b = _bucket(v[i])
        low = b if b < low else low
        high = b if b > high else high
    # buckets low..high only: norms span a few hundred of them, not all 65,536 (a 512 KB array per call)
    sums = <double *>malloc((high - low + 1) * sizeof(double))
    if sums == NULL:
        with gil:
            raise MemoryError()
    for b in range(high - low + 1):
        sums[b] = 0.0
    for i in range(n):
        total = total + v[i]
        sums[_bucket(v[i]) - low] += v[i]
    budget = hold_back * total
    for b in range(low, high + 1):  # buckets below top are held whole
        if cum + sums[b - low] > budget:
            top = b
            break
        cum = cum + sums[b - low]
    free(sums)
    for i in range(n):
        if top < 0 or _bucket(v[i]) < top:
            held[i] = 1
        elif _bucket(v[i]) == top:
            count += 1
    if top >= 0 and count:
        edge = <_Entry *>malloc(count * sizeof(_Entry))
        if edge == NULL:
            with gil:
                raise MemoryError()
        count = 0
        for i in range(n):
            if _bucket(v[i]) == top:
                edge[count].value = v[i]
                edge[count].index = i
                count += 1
        qsort(edge, count, sizeof(_Entry), _by_value)
        for i in range(count):  # the top bucket: its smallest, while the budget lasts
            if cum + edge[i].value > budget:
                break
            cum = cum + edge[i].value
            held[edge[i].index] = 1
        free(edge)
    return 0


def kept_rows(norms, double hold_back):
    """Indices of the rows that go now: all but the smallest, which together carry up to
    ``hold_back`` of the sum of ``norms`` (they are held back), in increasing order.

    The selection of a sort (smallest first, the longest prefix whose sum stays within the
    budget) in linear time (:func:`_hold_back`).

    Parameters
    ----------
    norms : numpy.ndarray
        Squared row norms (non-negative, finite), one per candidate row.
    hold_back : float
        Share of the sum that may be held back; 0 holds back nothing.

    Returns
    -------
    numpy.ndarray of int64
        With a norm that is NaN, negative or infinite, every index (nothing is held back).
    """
    cdef const double[::1] v = np.ascontiguousarray(norms, dtype=np.float64)
    cdef Py_ssize_t n = v.shape[0]
    held_array = np.zeros(n, dtype=np.uint8)
    cdef cnp.uint8_t[::1] held = held_array
    if n > 1 and hold_back > 0:
        with nogil:
            _hold_back(&v[0], n, hold_back, &held[0])
    return np.flatnonzero(held_array == 0)



cdef inline bint _bits_within32(const cnp.uint32_t *bits, Py_ssize_t n, cnp.uint32_t limit) noexcept nogil:
    """Every float32 (as bits) finite and of size at most the float whose bits are ``limit``."""
    cdef cnp.uint32_t top = 0, b
    cdef Py_ssize_t j
    for j in range(n):
        b = bits[j] & 0x7FFFFFFF
        top = b if b > top else top
    return top <= limit


cdef inline bint _bits_within16(const cnp.uint16_t *bits, Py_ssize_t n, cnp.uint16_t limit) noexcept nogil:
    cdef cnp.uint16_t top = 0, b
    cdef Py_ssize_t j
    for j in range(n):
        b = bits[j] & 0x7FFF
        top = b if b > top else top
    return top <= limit


def check_deltas(const cnp.uint32_t[::1] rows, values, row_scales, Py_ssize_t lo, Py_ssize_t hi, double bound,
                 double max_scale):
    """A merge message's deltas checked in one pass without the GIL (the receiver's checks of
    :func:`gensim_distw2v.protocol.arrays.unpack_deltas`, which names the problem).

    Parameters
    ----------
    rows : numpy.ndarray of uint32
    values : numpy.ndarray
        ``(len(rows), width)``, C-contiguous float32, float16 or int8 (levels).
    row_scales : numpy.ndarray of float32 or None
        int8's scales, one per row.
    lo, hi : int
        The rows must lie in ``[lo, hi)``, strictly increasing.
    bound : float
        The largest change a value may make (negative: no bound, values need only be finite).
    max_scale : float
        The largest int8 row scale allowed.

    Returns
    -------
    (int, float)
        ``(0, largest change)`` when fine (int8: 127 times the largest scale; float: 0); otherwise a
        code: 1 a row outside ``[lo, hi)``, 2 rows not strictly increasing, 3 a scale not finite,
        negative or above ``max_scale``, 4 a change beyond ``bound`` (or not finite, with a bound),
        5 a value not finite.
    """
    cdef Py_ssize_t i, n = rows.shape[0], count
    cdef int code = 0
    cdef double top = 0.0
    cdef float s, most = <float>max_scale  # compared in float32, as the scales are (numpy's rule too)
    cdef const float[::1] scales
    cdef const cnp.uint32_t[::1] bits32
    cdef const cnp.uint16_t[::1] bits16
    cdef cnp.uint32_t limit32
    cdef cnp.uint16_t limit16
    with nogil:
        for i in range(n):
            if rows[i] < lo or rows[i] >= hi:
                code = 1
                break
            if i and rows[i] <= rows[i - 1]:
                code = 2
                break
    if code:
        return code, 0.0
    if values.dtype == np.int8:
        scales = row_scales
        with nogil:
            for i in range(scales.shape[0]):
                s = scales[i]
                if not (s >= 0.0 and s <= most):  # (NaN fails both)
                    code = 3
                    break
                top = s if s > top else top
        if code:
            return code, 0.0
        top = top * 127
        return (4 if bound >= 0 and top > bound else 0), top
    count = values.size
    if count == 0:
        return 0, 0.0
    if values.dtype == np.float32:
        limit32 = np.array(min(bound, float(np.finfo(np.float32).max)) if bound >= 0
                           else float(np.finfo(np.float32).max), dtype=np.float32).view(np.uint32)
        bits32 = values.reshape(-1).view(np.uint32)
        with nogil:
            code = 0 if _bits_within32(&bits32[0], count, limit32) else (4 if bound >= 0 else 5)
    else:
        limit16 = np.array(min(bound, float(np.finfo(np.float16).max)) if bound >= 0
                           else float(np.finfo(np.float16).max), dtype=np.float16).view(np.uint16)
        bits16 = values.reshape(-1).view(np.uint16)
        with nogil:
            code = 0 if _bits_within16(&bits16[0], count, limit16) else (4 if bound >= 0 else 5)
    return code, 0.0


def stale_reply(const float[:, ::1] weights, cnp.uint64_t[:, ::1] stale, cnp.uint64_t[:, ::1] rounded,
                Py_ssize_t word, cnp.uint64_t mask, Py_ssize_t a, Py_ssize_t end, bint exact, wanted,
                Py_ssize_t lo, codec):
    """A shard's reply of current values for one matrix, in one pass: the rows of ``[a, end)`` a
    worker lacks (its ``mask`` bit in word ``word`` of ``stale``; in an exact reply also of
    ``rounded``), of those the ones ``wanted`` (a bool mask over ``[lo, ...)``; None: every one),
    their values in ``codec`` (float32, exactly; float16, or float32 if a value does not fit;
    int8 levels and a scale per row), and the bits updated: ``stale`` cleared, ``rounded`` set for
    a rounded reply and cleared for a float32 one.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray or None)
        uint32 rows, values, int8's float32 row scales (else None).
    """
    cdef int kind = 0 if exact else _codec(codec)
    cdef Py_ssize_t r, i, j, n = 0, width = weights.shape[1]
    if not (0 <= a <= end <= weights.shape[0] and end <= stale.shape[0] and end <= rounded.shape[0]
            and 0 <= word < stale.shape[1] and word < rounded.shape[1]):
        raise ValueError(f"stale_reply: rows [{a}, {end}) or word {word} outside the bits")
    cdef const cnp.uint8_t[::1] want
    cdef bint filtered = wanted is not None
    if filtered:
        want = np.ascontiguousarray(wanted).view(np.uint8)
        if a < end and (a < lo or end - lo > want.shape[0]):
            raise ValueError(f"stale_reply: the wanted mask from row {lo} does not cover [{a}, {end})")
    rows_array = np.empty(max(0, end - a), dtype=np.uint32)
    cdef cnp.uint32_t[::1] rows = rows_array
    cdef cnp.uint64_t bits
    with nogil:
        for r in range(a, end):
            bits = stale[r, word] | rounded[r, word] if exact else stale[r, word]
            if bits & mask and (not filtered or want[r - lo]):
                rows[n] = <cnp.uint32_t>r
                n += 1
    if n == 0:
        kind = 0  # (an empty reply is float32, as numpy's)
    cdef bint fits = True
    cdef cnp.uint16_t limit16 = 0x7BFF  # float16's largest finite value, as bits
    out, row_scales = _delta_out(n, width, kind)
    cdef float[:, ::1] out32
    cdef cnp.uint16_t[:, ::1] out16
    cdef signed char[:, ::1] out8
    cdef float[::1] scales8
    cdef float[::1] scratch = np.empty(max(1, width), dtype=np.float32)
    if kind == 1:
        out16 = out.view(np.uint16)
        with nogil:
            for i in range(n):
                dw2v_to_half(&weights[rows[i], 0], &out16[i, 0], width)
                if not _bits_within16(&out16[i, 0], width, limit16):
                    fits = False
                    break
        if not fits:  # a value beyond float16: the whole reply in float32
            kind = 0
            out, row_scales = _delta_out(n, width, kind)
    if kind == 0:
        out32 = out
        with nogil:
            for i in range(n):
                memcpy(&out32[i, 0], &weights[rows[i], 0], width * sizeof(float))
    elif kind == 2:
        out8, scales8 = out, row_scales
        with nogil:
            for i in range(n):
                memcpy(&scratch[0], &weights[rows[i], 0], width * sizeof(float))
                _round_to_q8(&scratch[0], &out8[i, 0], &scales8[i], width)
    with nogil:
        for i in range(n):
            r = rows[i]
            stale[r, word] &= ~mask
            if kind == 0:
                rounded[r, word] &= ~mask
            else:
                rounded[r, word] |= mask
    return rows_array[:n], out, row_scales


def take_part(float[:, ::1] replica, float[:, ::1] base, Py_ssize_t lo, Py_ssize_t hi, codec, double hold_back):
    """The rows of ``[lo, hi)`` where ``replica`` differs from ``base``, less those held back, and
    their deltas for the wire, with ``base`` advanced by exactly what they carry: :func:`changed_rows`,
    :func:`kept_rows` and :func:`send_rows` in one call (a merge part's fixed cost was three calls'
    set-up and their temporaries).

    ``codec`` is the wanted one; the part goes in float32 when its rows do not fit it (float16: a
    row of norm :data:`HALF_LIMIT` or more; int8: a norm not finite), as ``merge._part_codec``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray or None)
        uint32 rows, values of the codec used, int8's float32 row scales (else None).
    """
    if replica.shape[0] != base.shape[0] or replica.shape[1] != base.shape[1]:
        raise ValueError("replica and base must have the same shape")
    if not 0 <= lo <= hi <= replica.shape[0]:
        raise ValueError(f"rows [{lo}, {hi}) are outside [0, {replica.shape[0]})")
    return _take(replica, base, NULL, lo, hi, codec, hold_back)[:3]


def take_listed(float[:, ::1] replica, float[:, ::1] base, const cnp.uint32_t[::1] listed, codec, double hold_back):
    """:func:`take_part` over the rows ``listed`` only (those a worker's trainers have touched since
    they were last taken), not a whole range: a round reads the rows that may have changed, not
    every row of a large vocabulary. Also returns the listed rows that still differ from the base,
    which the caller lists again for a later round: those held back, and those whose rounding to the
    codec waits in ``replica - base``.

    Parameters
    ----------
    listed : numpy.ndarray of uint32
        Increasing rows of ``replica``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray or None, numpy.ndarray)
        As :func:`take_part`, and the uint32 rows that still differ (held back, then rounded).
    """
    if replica.shape[0] != base.shape[0] or replica.shape[1] != base.shape[1]:
        raise ValueError("replica and base must have the same shape")
    cdef Py_ssize_t i, n = listed.shape[0]
    cdef bint ordered = True
    with nogil:
        for i in range(1, n):
            if listed[i] <= listed[i - 1]:
                ordered = False
                break
    if not ordered:
        raise ValueError("listed rows must be increasing")
    if n and listed[n - 1] >= replica.shape[0]:
        raise ValueError(f"row {listed[n - 1]} is outside [0, {replica.shape[0]})")
    return _take(replica, base, &listed[0] if n else NULL, 0, n, codec, hold_back)


cdef tuple _take(float[:, ::1] replica, float[:, ::1] base, const cnp.uint32_t *listed, Py_ssize_t lo, Py_ssize_t hi,
                 codec, double hold_back):
    """:func:`take_part`'s work over rows ``[lo, hi)``, or (``listed`` not NULL) over ``listed[lo:hi]``;
    ``(rows, values, row scales or None, rows held back)``."""
    cdef int kind = _codec(codec)
    cdef Py_ssize_t r, i, j, n = 0, m = 0, k = 0, width = replica.shape[1], size = max(1, hi - lo)
    cdef double total, top = 0.0
    cdef bint odd = False
    cdef cnp.uint32_t *rows = <cnp.uint32_t *>malloc(size * sizeof(cnp.uint32_t))
    cdef cnp.uint32_t *kept_back = <cnp.uint32_t *>malloc(size * sizeof(cnp.uint32_t))
    cdef double *norms = <double *>malloc(size * sizeof(double))
    cdef cnp.uint8_t *held = <cnp.uint8_t *>calloc(size, sizeof(cnp.uint8_t))
    if rows == NULL or kept_back == NULL or norms == NULL or held == NULL:
        free(rows)
        free(kept_back)
        free(norms)
        free(held)
        raise MemoryError()
    try:
        with nogil:
            for j in range(lo, hi):
                if listed != NULL and j + AHEAD < hi:  # listed rows are scattered: fetch ahead
                    prefetch_row(&replica[listed[j + AHEAD], 0], width * sizeof(float))
                    prefetch_row(&base[listed[j + AHEAD], 0], width * sizeof(float))
                r = listed[j] if listed != NULL else j
                if width == 0 or memcmp(&replica[r, 0], &base[r, 0], width * sizeof(float)) == 0:
                    continue
                total = _sq_dist(&replica[r, 0], &base[r, 0], width)
                if total != 0.0:
                    rows[n] = <cnp.uint32_t>r
                    norms[n] = total
                    n += 1
            _hold_back(norms, n, hold_back, held)
            for i in range(n):  # the kept rows, in place; the held ones apart
                if held[i]:
                    if listed != NULL:  # (a range's caller finds them again by its next scan)
                        kept_back[k] = rows[i]
                        k += 1
                    continue
                rows[m] = rows[i]
                if not norms[i] < INFINITY:  # NaN or infinite
                    odd = True
                elif norms[i] > top:
                    top = norms[i]
                m += 1
        if kind == 1 and (odd or not top < HALF_LIMIT * HALF_LIMIT):
            kind = 0
        elif kind == 2 and odd:
            kind = 0
        rows_array = np.empty(m, dtype=np.uint32)
        if m:
            memcpy(<void *>cnp.PyArray_DATA(rows_array), rows, m * sizeof(cnp.uint32_t))
        held_array = np.empty(k, dtype=np.uint32)
        if k:
            memcpy(<void *>cnp.PyArray_DATA(held_array), kept_back, k * sizeof(cnp.uint32_t))
    finally:
        free(rows)
        free(kept_back)
        free(norms)
        free(held)
    # listed rows whose rounding stays in R - B (int8, float16) differ still: marked as they are sent
    differing = np.zeros(m, dtype=np.bool_) if listed != NULL and m else None
    values, row_scales = _send(replica, base, rows_array, kind, None if differing is None else differing.view(np.uint8))
    if differing is not None:
        held_array = np.concatenate([held_array, rows_array[differing]])
    return rows_array, values, row_scales, held_array
