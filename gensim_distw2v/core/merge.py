"""Merge rules and their bookkeeping: numpy and compiled row arithmetic (``_rows``), no network.

Each parameter shard holds its rows of the global weights ``G`` (:class:`GlobalWeights`); every
worker holds a replica ``R`` and a base ``B``, the global values it last knew
(:class:`~gensim_distw2v.core.replica.Replica`).
Invariant on a worker: ``R = B + what this worker trained and has not sent yet``. A merge round
goes through the rows in ranges ``[lo, hi)``; for each range the worker sends the rows it changed
with their delta ``R - B`` (and advances ``B`` by exactly what it sent), the server folds the
delta into ``G`` with the session's rule and answers with what the worker lacks of the range:
for the rows the ``damp`` rule damps, the change other workers made since it last received them
(deltas, from a per-worker snapshot of those rows); for every other row, the current value of
those changed since (from one bit per worker and row). The server's work per row and its memory
do not grow with the number of workers (:class:`GlobalWeights`). Up, the rows that changed least
may be held back for a later round (error feedback: nothing is lost, it only arrives later);
down, the damped rows likewise. The rows of rare words (:func:`~gensim_distw2v.core.schedule.hot_rows`) merge only in
every
``cold_every``-th round and at epoch ends: a routine round reads and moves the frequent words'
rows only.

Rules (``merge=``):

``sum``
    ``G += delta``: every worker's update is applied, as a parameter server applying every
    push (Hogwild across nodes). It matches gensim's quality only while merges are frequent; on
    devmix at K=4 it loses simlex at 10 k words per worker between merges
    (``docs/merge_rule.rst``). Routine rounds carry deltas as int8 levels with a float32 scale
    per row (``merge_dtype``; float16 or float32 on request); the part lost to rounding stays in
    ``R - B`` (and, on the way down, in the snapshot's difference) and goes with the next round,
    so nothing is lost; every row is sent again, exactly, at epoch ends.
``damp`` (the default)
    As ``sum``, except on the hottest rows of ``syn0`` and ``syn1neg`` (those a worker sees
    several times per merge interval, or per 2,200 words if that is shorter: ``schedule.damp_words``;
    at most ``damp_output_rows`` output rows, 1,000 by default) and of hs's ``syn1`` (the tree
    nodes a worker passes as often: :func:`~gensim_distw2v.core.schedule.damped_rows`):
    there a worker's delta is first reduced by what it repeats of the change it missed
    (AdaSum's pairwise rule per row, compiled in :func:`gensim_distw2v._rows.fold_part`: where the
    delta ``d`` agrees with the missed change ``m``, ``d - (d.m / 2|m|^2) m - (d.m / 2|d|^2) d``;
    ``m`` is ``G`` less the server's snapshot of the worker's base, the change the worker missed):
    updates of a frequent word that several workers made alike count once, updates that differ all
    count. Summing counts a frequent word's
    common drift K times, which is where summed deltas lose quality (``docs/merge_rule.rst`` has
    the measurements).
``mean``
    ``G += delta / K``: plain model averaging (Spark's rule). Trains like 1/K of the data
    whatever the interval; kept as an option for comparison, never the default.
"""
import contextlib
import threading
import time

import numpy as np

from gensim_distw2v._rows import fold_part, stale_reply, take_part
from gensim_distw2v.core.schedule import BY_FREQUENCY, OUTPUT_DAMP_MOST
from gensim_distw2v.protocol.arrays import check_damp_rows
from gensim_distw2v.config.choices import MERGE_RULES
from gensim_distw2v.config.settings import check_codec

_COMPILED = threading.local()  # per thread: CPU seconds in the merge's compiled calls (they release the GIL)


def compiled_cpu():
    """CPU seconds this thread has spent in the merge's compiled calls so far (folding, taking and
    applying parts, the stale replies): work that releases the GIL, so that a node's merges and folds
    can tell their GIL-held share (the rest, Python and the transport, is counted as held)."""
    return getattr(_COMPILED, "cpu", 0.0)


def compiled_call(fn, *args):
    """``fn(*args)`` (a compiled call that releases the GIL), its CPU counted in :func:`compiled_cpu`."""
    began = time.thread_time()
    try:
        return fn(*args)
    finally:
        _COMPILED.cpu = getattr(_COMPILED, "cpu", 0.0) + time.thread_time() - began

__all__ = ["GlobalWeights", "RowRanges", "compiled_call", "compiled_cpu", "wire_row_bytes",
           "row_end", "take_range"]


def wire_row_bytes(codec, vector_size):
    """Bytes a row of deltas takes on the wire: its values, int8's float32 scale and a uint32 index."""
    codec = check_codec(codec)
    return vector_size * np.dtype(codec).itemsize + (4 if codec == "int8" else 0) + 4


def row_end(name, lo, hi, hot_rows):
    """Where a merge part's rows ``[lo, hi)`` of matrix ``name`` end in a round that skips cold rows:
    ``hot_rows`` is the words' count (for ``syn0`` and ``syn1neg``) or a count per matrix (with
    hs's ``syn1``, whose rows are tree nodes); None or negative: every row."""
    hot = hot_rows.get(name) if isinstance(hot_rows, dict) else hot_rows if name in BY_FREQUENCY else None
    if hot is None or hot < 0:
        return hi
    return min(hi, max(lo, hot))


class RowRanges:
    """Ranges of rows held by threads: :meth:`holding` ``[lo, hi)`` waits until no thread holds a row of it.

    A lock by rows, not by stripe: a part holds exactly its rows, in one pass, so parts of different
    rows go on at once and a part costs one acquisition whatever its size. First come, first served
    where rows overlap: a range also waits for the overlapping ranges that asked before it, so a
    request for every row (a member joining, a checkpoint's copy) is not passed for ever by parts
    that keep arriving.

    Parameters
    ----------
    n_rows : int
        The rows (``holding(0, n_rows)`` holds them all).
    """

    def __init__(self, n_rows):
        self.n_rows = int(n_rows)
        self.busy = []  # [lo, hi) held
        self.queue = []  # (ticket, [lo, hi)) asked for and not yet held, in the order asked
        self.tickets = 0
        self.changed = threading.Condition(threading.Lock())

    @contextlib.contextmanager
    def holding(self, lo, hi):
        """Hold rows ``[lo, hi)`` (an empty range holds the row ``lo``, so that it still waits for a
        part under way there) for the ``with`` block."""
        span = (lo, max(hi, lo + 1))
        with self.changed:
            self.tickets += 1
            ask = (self.tickets, span)
            self.queue.append(ask)
            try:
                while any(a < span[1] and span[0] < b for a, b in self.busy) or any(
                        a < span[1] and span[0] < b for ticket, (a, b) in self.queue if ticket < ask[0]):
                    self.changed.wait()
            finally:
                self.queue.remove(ask)
                self.changed.notify_all()  # (those behind it that it no longer blocks)
            self.busy.append(span)
        try:
            yield
        finally:
            with self.changed:
                self.busy.remove(span)
                self.changed.notify_all()


class GlobalWeights:
    """The global weights, and what each worker lacks of them, in memory and work per row that do
    not grow with the number of workers.

    What a worker lacks is kept two ways, by row:

    * The rows the ``damp`` rule damps (:func:`~gensim_distw2v.core.schedule.damped_rows`: a few hundred of the most
      frequent
      words) need the change the worker missed, which the rule compares its delta with; the hot
      rows (``delta_rows``, about a thousand) are sent often, and a delta costs half the bytes of a
      value in int8. For those rows the server keeps a *snapshot* per worker: the worker's base ``B`` as the
      server knows it (set when the worker downloads the row, advanced by every delta it sends and
      every delta it is sent). What it missed is ``G - snapshot``, computed when needed; a reply
      sends it as deltas (``codec`` in routine rounds, the smallest held back; rounding and
      hold-back stay in ``G - snapshot``: error feedback, as :meth:`~gensim_distw2v.core.replica.Replica.take_delta`
      does on the
      way up).
    * Every other row has one bit per worker (a *stale* bit): set for every other worker when a
      worker's delta is folded into the row (for every worker, its writer included, when the rule
      changed what was sent: ``mean``), cleared when the row's value is sent. A reply sends the
      stale rows' *values* (in ``value_codec`` in routine rounds, float32 in exact ones): the
      worker sets its base to them and keeps in its replica what it has not sent yet
      (:meth:`~gensim_distw2v.core.replica.Replica.take_in`). A float16 value is off by at most 2**-11 of itself, an
      int8 one
      by half a level (1/254 of the row's largest value); that error stays on the worker (the
      server's ``G`` takes only the workers' deltas) and is gone with the next value sent: a
      second bit per worker marks the rows it has rounded only, and an exact reply (epoch ends)
      sends those too.

    Folding a delta touches the row once whatever the number of workers (setting the bits is one
    64-bit OR per 64 workers); a reply costs the rows it sends plus a scan of the range's bits.
    Memory: ``G``, 16 bytes a row per 64 workers, and per worker the snapshot of the damped and
    hot rows (800 kB per worker for 1,000 rows of 100 dimensions in two matrices).

    Parameters
    ----------
    weights : dict of (str, numpy.ndarray)
        The trained matrices (``syn0``, ``syn1neg`` and/or ``syn1``), float32, all the same shape;
        owned (and updated in place) from now on.
    rule : {'damp', 'sum', 'mean'}
        How a worker's delta enters the global weights.
    damp_rows : dict of (str, int), optional
        Under ``damp``, how many of the first rows of ``syn0`` and ``syn1neg`` are damped
        (:func:`~gensim_distw2v.core.schedule.damped_rows`). Default: every ``syn0`` row, 1,000 ``syn1neg`` rows.
    codec : {'float16', 'int8', 'float32'}
        Deltas of routine replies (exact ones are float32).
    value_codec : {'float16', 'int8', 'float32'}, optional
        Values of the stale rows in routine replies; default: ``codec``. (Measured at K=8, CBOW,
        seeds 1-2: int8 values against float16 cost -0.27 and +0.07 analogy points, and cut the
        bytes down from 153 to 104 per word: docs/schedule.rst.)
    delta_rows : int or dict of (str, int)
        The first rows of ``syn0`` and ``syn1neg`` (the hot rows, :func:`~gensim_distw2v.core.schedule.hot_rows`), or
        of each
        matrix named (hs's ``syn1``: :func:`~gensim_distw2v.core.schedule.tree_hot_rows`), also get a snapshot per
        worker,
        undamped (summed, or averaged under ``mean``): replies carry what the
        worker missed of them as deltas, in ``codec`` (int8 deltas: half the bytes of float16
        values), the rounding waiting in ``G - snapshot``.
    wanted_only : tuple of str
        Of ``syn0`` and ``syn1neg``, those whose other rows a reply carries only where the worker wants
        them (:meth:`apply`'s ``wanted``); the rest it carries wherever the worker lacks them. Default:
        both. Skip-gram's rounds that merge the rare rows bring every ``syn1neg`` row down
        (``settings.cold_output_down``): the negatives a worker draws come from every word.

    Parts of several workers fold at once where their rows differ (:class:`RowRanges`): a shard serves
    each worker's link on a thread of its own, and a worker's pieces in flight
    (:func:`gensim_distw2v.core.schedule.round_pieces`) keep the workers' parts on different rows.
    """

    def __init__(self, weights, rule="sum", damp_rows=None, codec="float16", delta_rows=0, value_codec=None,
                 wanted_only=BY_FREQUENCY):
        self.codec = check_codec(codec)
        self.value_codec = check_codec(value_codec or self.codec)
        if rule not in MERGE_RULES:
            raise ValueError(f"unknown merge rule {rule!r}; choose one of {MERGE_RULES}")
        n_rows = len(next(iter(weights.values()))) if weights else 0
        self.damp_rows = check_damp_rows(damp_rows if damp_rows is not None else
                                         {"syn0": n_rows, "syn1neg": min(n_rows, OUTPUT_DAMP_MOST)}, "GlobalWeights")
        self.weights, self.rule = weights, rule
        # the damped rows (none under sum and mean); rows with a per-worker snapshot: those, and the
        # first delta_rows of each matrix (the hot rows: replies carry them as deltas)
        self.damp_below = {name: min(n_rows, self.damp_rows.get(name, 0)) if rule == "damp" else 0
                           for name in weights}
        per_matrix = delta_rows if isinstance(delta_rows, dict) else {name: delta_rows for name in BY_FREQUENCY}
        if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in per_matrix.values()):
            raise ValueError(f"delta_rows must be an int >= 0 (or one per matrix), got {delta_rows!r}")
        self.snap_rows = {name: max(self.damp_below[name], min(n_rows, int(per_matrix.get(name, 0))))
                          for name in weights}
        self.stale = {name: np.zeros((n_rows, 1), dtype=np.uint64) for name in weights}
        self.rounded = {name: np.zeros((n_rows, 1), dtype=np.uint64) for name in weights}  # sent rounded (float16 or int8)
        self.slots = {}  # worker rank -> its bit (slot) in the stale words
        self.members = np.zeros(1, dtype=np.uint64)  # every member's bit: what a write marks stale
        self.snapshots = {}  # worker rank -> {matrix name: float32 (snap_rows, dim)}
        self.merges = 0
        self.damped = 0  # rows the damp rule took part of
        self.lock = threading.Lock()  # the counters (merges, damped)
        # the rows being folded: parts of several workers fold at once where their rows differ (workers'
        # pieces in flight keep their parts apart); membership, and copies of everything, hold every row
        self.held = RowRanges(n_rows)
        unknown = sorted(set(wanted_only) - set(BY_FREQUENCY))
        if unknown:
            raise ValueError(f"wanted_only names matrices whose rows are not words: {unknown}; "
                             f"choose among {list(BY_FREQUENCY)}")
        self.wanted_only = tuple(wanted_only)

    def _bit(self, worker):
        """``(word, mask)`` of a worker's stale bit."""
        slot = self.slots[worker]
        return slot // 64, np.uint64(1) << np.uint64(slot % 64)

    def _marks(self, worker, own_too):
        """The stale bits a write by ``worker`` sets: every member's but its own (unless ``own_too``)."""
        marks = self.members.copy()
        if not own_too:
            word, mask = self._bit(worker)
            marks[word] &= ~mask
        return marks

    def exclusive(self):
        """No merge folds meanwhile (every row held): to copy the weights whole, or change who is a
        member; a context manager."""
        return self.held.holding(0, self.held.n_rows)

    def add_worker(self, worker):
        """A worker joined: it takes a free slot, and its view is what it downloads
        (:meth:`download`); until then it is taken to hold the weights as they are now."""
        with self.exclusive():
            used = set(self.slots.values())
            slot = next(i for i in range(len(used) + 1) if i not in used)
            if slot // 64 >= len(self.members):  # a 65th worker: one more word per row
                self.members = np.append(self.members, np.uint64(0))
            self.slots[worker] = slot
            word, mask = self._bit(worker)
            self.members[word] |= mask
            for bits in (self.stale, self.rounded):
                for name, words in bits.items():
                    if word >= words.shape[1]:
                        bits[name] = words = np.ascontiguousarray(
                            np.concatenate([words, np.zeros((len(words), 1), np.uint64)], axis=1))
                    words[:, word] &= ~mask
            self.snapshots[worker] = {name: np.array(w[:self.snap_rows[name]], dtype=np.float32, order="C")
                                      for name, w in self.weights.items()}

    def remove_worker(self, worker):
        """A worker left: free its slot and snapshot."""
        with self.exclusive():
            if worker in self.slots:
                word, mask = self._bit(worker)
                self.members[word] &= ~mask
            self.slots.pop(worker, None)
            self.snapshots.pop(worker, None)

    def download(self, name, lo, hi, worker=None):
        """Rows ``[lo, hi)`` of matrix ``name``, a copy; a member's download also becomes its view of
        them (its snapshot, its stale bits cleared), at the same instant."""
        with self.held.holding(lo, hi):
            rows = np.array(self.weights[name][lo:hi])
            if worker is not None and worker in self.slots:
                top = min(hi, self.snap_rows[name])
                if lo < top:
                    self.snapshots[worker][name][lo:top] = rows[:top - lo]
                word, mask = self._bit(worker)
                self.stale[name][lo:hi, word] &= ~mask
                self.rounded[name][lo:hi, word] &= ~mask
            return rows

    def apply(self, worker, lo, hi, deltas, hold_back=0.0, exact=True, hot_rows=None, wanted=None, output_down=False):
        """Fold one worker's deltas for rows ``[lo, hi)`` into the weights; return what it lacks there.

        Parameters
        ----------
        worker : int
            The worker's rank (added with :meth:`add_worker`).
        lo, hi : int
            The row range of this part of the merge round.
        deltas : dict of (str, (numpy.ndarray, numpy.ndarray, numpy.ndarray or None))
            Per matrix: increasing uint32 rows in ``[lo, hi)``, their ``R - B`` values (float32,
            float16 or int8) and int8's float32 row scales (else None).
        hold_back : float
            Keep back the damped rows of the reply with the smallest missed change, together up to
            this share of the range's missed change on those rows.
        exact : bool
            Reply in float32 (else in :attr:`codec`, whose rounding waits: error feedback).
        hot_rows : int or dict of (str, int), optional
            A routine round of cold-row skipping (:func:`~gensim_distw2v.core.schedule.hot_rows`): reply with rows of
            ``syn0``
            and ``syn1neg`` below this only, or of each matrix below its count (the others wait).
            Default: every row.
        wanted : numpy.ndarray of bool, optional
            Over ``[lo, hi)``: of the rows of the matrices :attr:`wanted_only` names sent as values (those beyond
            the snapshot's: the hot rows come as deltas), reply with these only (the rows of the
            jobs the worker holds); the others it lacks wait (their stale bits stay set). Default:
            every row it lacks.
        output_down : bool
            Reply with every ``syn1neg`` row the worker lacks, whatever ``wanted`` says (as if :attr:`wanted_only`
            did not name it: ``cold_output_down='with_up'``'s rounds that send those rows up).

        Returns
        -------
        (dict, dict)
            Per matrix, ``(rows, values, row scales or None)``: first the damped rows' missed
            change as deltas (:meth:`~gensim_distw2v.core.replica.Replica.take_in`), then the stale rows' global values
            (``take_in(..., absolute=True)``).
        """
        deltas_out, values_out = {}, {}
        with self.held.holding(lo, hi):  # (parts of other rows fold meanwhile)
            if worker not in self.slots:
                raise ValueError(f"worker rank {worker} is not part of this session's merges")
            scale = 1.0 / len(self.slots) if self.rule == "mean" else 1.0
            marks = self._marks(worker, own_too=self.rule == "mean")
            word, mask = self._bit(worker)
            damped = 0
            for name, weights in self.weights.items():
                top_rows, snap = self.snap_rows[name], self.snapshots[worker][name]
                rows, values, row_scales = deltas.get(name, (None, None, None))
                if rows is not None and len(rows):
                    rows = np.ascontiguousarray(rows, dtype=np.uint32)
                    top = int(np.searchsorted(rows, top_rows))  # rows are increasing
                    damped += compiled_call(fold_part, weights, rows, values, top, snap, self.stale[name], marks,
                                            scale, row_scales, self.damp_below[name])
                end = row_end(name, lo, hi, hot_rows)
                # damped rows: what the worker missed, as deltas (hold-back and rounding wait: error feedback)
                if lo < min(end, top_rows):
                    deltas_out[name] = take_range(weights[:top_rows], snap, lo, min(end, top_rows),
                                                  "float32" if exact else self.codec, hold_back)
                else:
                    deltas_out[name] = (np.zeros(0, np.uint32), np.zeros((0, weights.shape[1]), np.float32), None)
                # every other row: the values of those changed since the worker last had them (and, in an
                # exact reply, of those it has as float16 only)
                a = max(lo, top_rows)
                codec = "float32" if exact else self.value_codec
                want = wanted if wanted is not None and name in self.wanted_only and not (
                    output_down and name == "syn1neg") else None
                # one compiled pass: the bits, the values, the bits again
                values_out[name] = compiled_call(stale_reply, weights, self.stale[name], self.rounded[name], word,
                                                 mask, a, max(a, end), exact, want, lo, codec)
        with self.lock:
            self.damped += damped
            self.merges += 1
        return deltas_out, values_out


def take_range(replica, base, lo, hi, codec, hold_back=0.0):
    """Rows of ``[lo, hi)`` where ``replica`` differs from ``base`` and their deltas, as
    :meth:`~gensim_distw2v.core.replica.Replica.take_delta` sends them (``base`` advances by exactly what is sent)."""
    # one compiled call: which rows, which go (the smallest wait: error feedback), their deltas, the base
    return compiled_call(take_part, replica, base, lo, hi, codec, hold_back)
