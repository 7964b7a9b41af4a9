"""A worker's replica ``R`` of the trained matrices and its base ``B``, and the threads that take and apply
a merge part's rows (the shards' side, and the rules, are :mod:`gensim_distw2v.core.merge`'s).

Invariant: ``R = B + what this worker trained and has not sent yet``. A round takes the rows of a
range that changed with their delta ``R - B`` (advancing ``B`` by exactly what it sends) and takes in
the shard's reply: deltas of the rows it keeps a snapshot of, values of the others.
"""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gensim_distw2v._rows import take_listed, take_rows
from gensim_distw2v.core.merge import compiled_call, row_end, take_range
from gensim_distw2v.config.settings import check_codec

__all__ = ["Replica", "SPLIT_ROWS", "TOUCHED", "WAITING", "merge_threads"]

#: a listed matrix's marks (:class:`Replica`): trained since a round took the row; differs still, for an
#: exact round or the row's next training
TOUCHED, WAITING = 1, 2

#: the fewest rows a merge thread takes of a part (fewer: the part is not split; 4,096 rows of 100
#: values are 1.6 MB, a millisecond of work, against a few microseconds to hand it to a thread)
SPLIT_ROWS = 4096
_HELPERS = {"pool": None, "size": 0, "lock": threading.Lock()}


def _helpers(size):
    """This process's pool of ``size`` merge helper threads (named ``merger-helper``: their CPU counts
    with the merger's), grown when asked for more."""
    with _HELPERS["lock"]:
        if _HELPERS["size"] < size:
            old = _HELPERS["pool"]
            _HELPERS["pool"] = ThreadPoolExecutor(size, thread_name_prefix="merger-helper")
            _HELPERS["size"] = size
            if old is not None:  # its threads end once their work is done
                old.shutdown(wait=False)
        return _HELPERS["pool"]


def merge_threads(trainers):
    """A worker's merge threads by default: one per four trainer threads, from one to four (the merger
    is one thread against T trainers: at a large vocabulary its round outlasts the interval, and its
    compiled work releases the GIL)."""
    return max(1, min(4, int(trainers) // 4))


def _timed(fn, *args):
    """``(fn(*args), the CPU seconds this thread spent in it)``."""
    began = time.thread_time()
    out = fn(*args)
    return out, time.thread_time() - began


def _pieces(lo, hi, threads):
    """``[lo, hi)`` cut into at most ``threads`` ranges of at least :data:`SPLIT_ROWS` rows."""
    n = max(1, min(threads, (hi - lo) // SPLIT_ROWS))
    if n == 1:
        return [(lo, hi)]
    cuts = [lo + (hi - lo) * i // n for i in range(n + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def joined_parts(parts):
    """One matrix's ``(rows, values, row scales or None)`` from its pieces', in row order: as they came
    if they went in one codec, else every piece as the float32 it stands for (what the base advanced by)."""
    parts = [p for p in parts if len(p[0])] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    rows = np.concatenate([p[0] for p in parts])
    kinds = {(p[1].dtype, p[2] is None) for p in parts if len(p[0])}
    if len(kinds) <= 1:
        scales = None if all(p[2] is None for p in parts) else np.concatenate(
            [p[2] if p[2] is not None else np.zeros(0, np.float32) for p in parts])
        return rows, np.concatenate([p[1] for p in parts]), scales
    return rows, np.ascontiguousarray(np.concatenate([dequantised(p[1], p[2]) for p in parts])), None


def dequantised(values, row_scales):
    """Wire values as the float32 they stand for, exactly as the compiled rows compute them (int8: level
    times the row's float32 scale; float16: widened)."""
    values = np.asarray(values, dtype=np.float32)
    return values if row_scales is None else values * row_scales[:, None]


class Replica:
    """A worker's replica ``R`` of the trained matrices and its base ``B``.

    Parameters
    ----------
    weights : dict of (str, numpy.ndarray)
        The global weights as fetched at join time; copied into ``R`` (trained in place by the
        kernel) and ``B``.
    threads : int
        Threads that take and apply a merge part's rows: the caller's and ``threads - 1`` helpers,
        each on rows of its own (the compiled work releases the GIL; at least :data:`SPLIT_ROWS` rows
        each). Measured on this 2-core machine at 1.07 M rows of 100 values in two matrices
        (``benchmarks/merge_threads.py``, 2026-11-28): a routine round's 100 k rows taken in 18.0 ->
        11.3 ms with two threads and applied in 8.8 -> 4.8, an every-row round's 630 k in 246 -> 218
        and 85 -> 49 (memory-bound, not twice as fast). Each thread holds back (``hold_back``) its
        own rows' share.
    listed : dict of (str, int), optional
        Matrices whose changed rows are only those the trainers name (:meth:`touched`), each with the
        first of its rows that may wait (its hot rows' count): a round reads the rows named since,
        not every row of its range (at a vocabulary of a million words a cold round's ``syn0`` read
        800 MB of ``R`` and ``B`` to find the rows of the words it had trained). Only for a matrix
        that nothing but the trainers' named rows changes (``syn0``: the input rows of a job's words;
        not ``syn1neg``, which every negative drawn changes). A row that still differs after a round
        (held back, or its rounding waiting) is read again by the next round below the first that
        may wait, and beyond it once its word trains again or at an exact round (an epoch's flush):
        untrained, it is as the round left it (a scan would read it again each round, and send it only
        when the part's other changes are smaller).

    Attributes
    ----------
    helper_cpu : float
        CPU seconds the helper threads have spent so far (the caller's own is its thread's).
    """

    def __init__(self, weights, threads=1, listed=None):
        self.replica = {name: np.array(w, dtype=np.float32, order="C") for name, w in weights.items()}
        self.base = {name: w.copy() for name, w in self.replica.items()}
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {threads!r}")
        listed = dict(listed or {})
        unknown = sorted(set(listed) - set(self.replica))
        if unknown:
            raise ValueError(f"listed matrices {unknown} are not among the replica's {sorted(self.replica)}")
        self.threads = int(threads)
        self.helper_cpu = 0.0
        # per listed matrix, a mark per row (TOUCHED: trained since a round last took it; WAITING: differs,
        # for an exact round or its next training), and the first row that may wait
        self.marks = {name: np.zeros(len(self.replica[name]), dtype=np.uint8) for name in listed}
        self.wait_from = {name: int(first) for name, first in listed.items()}

    def touched(self, name, rows):
        """The trainers have changed (at most) these rows of a listed matrix, and are done with them: the
        next round that reaches them takes them. Call it *after* the writes (a round clears the marks
        it lists before it reads the rows: a write it misses was marked after that, so the next round
        takes it). A matrix not listed: nothing to do."""
        marks = self.marks.get(name)
        if marks is not None:
            marks[rows] = TOUCHED

    def _take_listed(self, name, lo, end, codec, hold_back, exact):
        """A listed matrix's part ``[lo, end)``: the rows marked there (with ``exact``, waiting too), their
        marks cleared before they are read; those that still differ from the base marked again (below
        :attr:`wait_from` as touched, beyond it as waiting, unless touched meanwhile)."""
        marks = self.marks[name]
        rows = (np.flatnonzero(marks[lo:end] if exact else marks[lo:end] == TOUCHED) + lo).astype(np.uint32)
        marks[rows] = 0
        # the range's pieces (each holds back its own share, as a scan's would: the same rows go)
        cuts = np.searchsorted(rows, [a for a, _ in _pieces(lo, end, self.threads)] + [end])
        parts = self._run([(compiled_call, take_listed, self.replica[name], self.base[name], rows[a:b], codec, hold_back)
                           for a, b in zip(cuts[:-1], cuts[1:])])
        first = self.wait_from[name]
        for part in parts:
            differ = np.sort(part[3])  # (held back, then rounded: each in order)
            split = int(np.searchsorted(differ, first))
            marks[differ[:split]] = TOUCHED
            waiting = differ[split:]
            marks[waiting[marks[waiting] == 0]] = WAITING
        return joined_parts([part[:3] for part in parts])

    def _run(self, tasks):
        """``[fn(*args) for fn, *args in tasks]``, the first in this thread, the others on helpers."""
        if len(tasks) == 1:
            fn, *args = tasks[0]
            return [fn(*args)]
        futures = [_helpers(self.threads - 1).submit(_timed, *task) for task in tasks[1:]]
        fn, *args = tasks[0]
        first = fn(*args)
        done = [future.result() for future in futures]
        self.helper_cpu += sum(cpu for _, cpu in done)
        return [first] + [out for out, _ in done]

    def take_delta(self, lo, hi, codec="float32", hold_back=0.0, hot_rows=None, exact=False):
        """Rows of ``[lo, hi)`` changed since the last merge and their deltas; marks them sent.

        Training threads may go on writing ``R`` meanwhile (Hogwild): what they add after the
        delta is taken stays in ``R - B`` for the next round.

        Parameters
        ----------
        lo, hi : int
            Row range.
        codec : {'float32', 'float16', 'int8'} or numpy dtype
            float32; float16 to halve the bytes (a matrix whose delta would overflow float16
            goes as float32); int8 levels with a float32 scale per row to quarter them (a
            matrix with values that are not finite goes as float32). What rounding loses stays in
            ``R - B`` for the next round.
        hold_back : float
            Keep back the rows with the smallest changes that together carry up to this share of
            the squared delta (per matrix): they stay in ``R - B`` and go in a later round, once
            grown (error feedback). 0 sends every changed row.
        hot_rows : int or dict of (str, int), optional
            Of ``syn0`` and ``syn1neg`` (or of each matrix named), look at the rows below this only
            (a routine round that skips the cold rows, :func:`~gensim_distw2v.core.schedule.hot_rows`); the others wait
            in
            ``R - B``. Default: every row.
        exact : bool
            An epoch's flush: of a listed matrix, also the rows that wait (every row that differs).

        Returns
        -------
        dict of (str, (numpy.ndarray, numpy.ndarray, numpy.ndarray or None))
            Per matrix: uint32 rows, their delta values, and int8's float32 row scales (else None).
        """
        codec = check_codec(codec)
        # B advances by exactly what the server adds to G (so B == G bit for bit on rows no one else
        # touched); the rounding of the delta stays in R - B for the next round.
        out = {}
        for name, replica in self.replica.items():
            end = row_end(name, lo, hi, hot_rows)
            if name in self.marks:
                out[name] = self._take_listed(name, lo, end, codec, hold_back, exact)
                continue
            pieces = _pieces(lo, end, self.threads)
            if len(pieces) == 1:  # one thread, or too few rows to split: as it always was
                out[name] = take_range(replica, self.base[name], lo, end, codec, hold_back)
                continue
            out[name] = joined_parts(self._run([(take_range, replica, self.base[name], a, b, codec, hold_back)
                                           for a, b in pieces]))
        return out

    def take_in(self, missed, values=None, sent_since=None):
        """Take in what the server sent (:meth:`~gensim_distw2v.core.merge.GlobalWeights.apply`'s pair): deltas of the
        rows
        it keeps a snapshot of (``R += delta; B += delta``) and the global values of other rows
        (``R += value - B; B = value``: what this worker has not sent stays in ``R - B``).

        Both map matrix names to ``(rows, values, row scales or None)``. ``sent_since`` (the same form,
        :meth:`take_delta`'s) is what this worker took after the reply's request went, still on its way
        (a round taken while the one before was in flight): a value does not hold it yet, so those rows'
        values are taken as ``value + sent``, which the server holds once it folds them (``B`` as the
        server's, ``R - B`` what is not sent). Deltas need nothing: they add.
        """
        for reply, absolute in ((missed, False), (values or {}, True)):
            for name, (rows, got, row_scales) in reply.items():
                if not len(rows):
                    continue
                rows = np.ascontiguousarray(rows, dtype=np.uint32)
                since = _overlap(sent_since.get(name), rows) if absolute and sent_since else None
                if since is not None:  # (the values as float32, those rows' with what went since added)
                    got, row_scales = np.array(dequantised(got, row_scales)), None
                    got[since[0]] += since[1]
                self._take_rows(name, rows, got, row_scales, absolute)

    def _take_rows(self, name, rows, got, row_scales, absolute):
        """One matrix's reply taken in (:func:`take_rows`), split among the merge threads."""
        pieces = _pieces(0, len(rows), self.threads)
        if len(pieces) == 1:
            compiled_call(take_rows, self.replica[name], self.base[name], rows, got, row_scales, absolute)
            return
        self._run([(compiled_call, take_rows, self.replica[name], self.base[name], rows[a:b], got[a:b],
                    None if row_scales is None else row_scales[a:b], absolute) for a, b in pieces])


def _overlap(sent, rows):
    """Of ``sent`` (one matrix's ``(rows, values, row scales or None)`` as
    :meth:`~gensim_distw2v.core.replica.Replica.take_delta`
    took it), where in ``rows`` (increasing) its rows are and the float32 values the base advanced by for
    them, exactly (int8: level times scale, float16: widened); None when none is there."""
    if sent is None or not len(sent[0]) or not len(rows):
        return None
    common, where, at = np.intersect1d(rows, sent[0], assume_unique=True, return_indices=True)
    if not len(common):
        return None
    return where, dequantised(sent[1][at], None if sent[2] is None else sent[2][at])
