"""Merge rules and their bookkeeping: numpy and compiled row arithmetic (``_rows``), no network.

Each parameter shard holds its rows of the global weights ``G`` (:class:`GlobalWeights`); every
worker holds a replica ``R`` and a base ``B``, the global values it last knew (:class:`Replica`).
Invariant on a worker: ``R = B + what this worker trained and has not sent yet``. A merge round
goes through the rows in ranges ``[lo, hi)``; for each range the worker sends the rows it changed
with their delta ``R - B`` (and advances ``B`` by exactly what it sent), the server folds the
delta into ``G`` with the session's rule and answers with what the worker lacks of the range:
for the rows the ``damp`` rule damps, the change other workers made since it last received them
(deltas, from a per-worker snapshot of those rows); for every other row, the current value of
those changed since (from one bit per worker and row). The server's work per row and its memory
do not grow with the number of workers (:class:`GlobalWeights`). Up, the rows that changed least
may be held back for a later round (error feedback: nothing is lost, it only arrives later);
down, the damped rows likewise. The rows of rare words (:func:`hot_rows`) merge only in every
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
    several times per merge interval, at most 1,000 output rows) and of hs's ``syn1`` (the tree
    nodes a worker passes as often: :func:`damped_rows`):
    there a worker's delta is first reduced by what it repeats of the change it missed
    (:func:`damp_agreeing`, AdaSum's pairwise rule per row, against ``G`` less the server's
    snapshot of the worker's base: the change the worker missed): updates of a frequent word that several workers
    made alike count once, updates that differ all count. Summing counts a frequent word's
    common drift K times, which is where summed deltas lose quality (``docs/merge_rule.rst`` has
    the measurements).
``mean``
    ``G += delta / K``: plain model averaging (Spark's rule). Trains like 1/K of the data
    whatever the interval; kept as an option for comparison, never the default.
"""
import math
import threading

import numpy as np

from gensim_distw2v._rows import (CODECS, HALF_LIMIT, HAS_F16C, add_rows, changed_rows, fold_part, from_half,
                                  kept_rows, row_diff, send_rows, take_rows, to_half)
from gensim_distw2v.wire import MERGE_RULES, all_finite, check_cold_every, check_damp_rows

__all__ = ["CODECS", "HOLD_BACK", "MERGE_DTYPE", "RULES", "check_codec", "check_cold_every",
           "damped_rows", "default_sync_words", "GlobalWeights", "hot_rows", "Replica", "row_bytes", "row_limits",
           "row_ranges", "tree_hot_rows"]

RULES = MERGE_RULES
# Routine merges' values on the wire, by default: int8 levels with a float32 scale per row (d + 8
# bytes a row of d values with its index; float16: 2 d + 4, on request). With hot rows every round
# and error feedback, int8 holds quality at K = 2 to 8 (docs/schedule.rst). What rounding loses waits
# for the next round, as held-back rows do.
MERGE_DTYPE = "int8"


# The ``damp`` rule damps the first rows (vocabulary order: most frequent first) of ``syn0`` and
# ``syn1neg`` (not ``syn1``, hs's tree nodes): those whose word a worker sees at least DAMP_OCCURRENCES
# times per merge interval on average, and at most OUTPUT_DAMP_MOST output rows; chosen by
# measurement (docs/merge_rule.rst)
DAMP_OCCURRENCES = 1.5
OUTPUT_DAMP_MOST = 1000
# The merge schedule (docs/schedule.rst): every SYNC_SHARE of an epoch's words (at least SYNC_WORDS,
# at most ONE_WORKER_SYNC_WORDS) per worker, whatever the number of workers, a routine round merges
# the *hot* rows of ``syn0`` and ``syn1neg`` (the words a worker sees at least HOT_SIGHTINGS times
# per interval: about the 1,000 most frequent of devmix); every
# COLD_EVERY-th round merges every row, and epoch ends flush exactly. Down, a routine reply carries the
# hot rows a worker lacks and, of the others, those of the jobs it holds. Measured in
# benchmarks/clustersim.py and through the cluster at K = 2, 4, 8 (docs/schedule.rst).
SYNC_WORDS = 2_200
# The interval a corpus tolerates grows with the corpus: at K=8 (CBOW, simulated) one round per
# 5,400th of an epoch's words cost 0.68, 0.45 and 0.64 analogy points on 3 M, 6 M and 12 M words,
# four times that interval 2.47 (3 M) and 2.10 (12 M) points (docs/schedule.rst, "The interval").
SYNC_SHARE = 1 / 5_400
ONE_WORKER_SYNC_WORDS = 1_000_000
HOT_SIGHTINGS = 0.25
COLD_EVERY = 6
# Up, a routine round holds back the rows that changed least, together HOLD_BACK of the squared change
# (error feedback: they go once grown, or at the epoch's exact flush); down, the hot rows' deltas alike.
# Measured at K=8 (CBOW, seeds 1-2, docs/schedule.rst): 0.1 -> 0.3 cuts the bytes up from 144 to 110
# per word for about 0.1 analogy points; 0.5 (87 B) cost 0.3 more.
HOLD_BACK = 0.3
# the matrices whose rows are words in vocabulary order (most frequent first); hs's syn1 is tree nodes,
# busiest first as the cluster trains them (kernel.reverse_tree), with counts of their own
BY_FREQUENCY = ("syn0", "syn1neg")


def damped_rows(counts, sync_words, occurrences=DAMP_OCCURRENCES, tree_counts=None):
    """How many of the first rows the ``damp`` rule damps, per matrix: the words a worker sees at
    least ``occurrences`` times in ``sync_words`` trained words (expected from their counts); of
    the output vectors at most :data:`OUTPUT_DAMP_MOST`.

    Only rows that get several updates on every worker within one interval overshoot when the
    workers' updates are summed; damping rows that get one update or none slows their learning
    (measured at K=8, 2.2 k words: damping 1,000 rows of each matrix cost ws353 0.04 against the
    ~160 this gives). Output vectors are capped: the negatives push all mid-frequency output rows
    alike, which is not overshoot (measured at K=4: damping every output row cost ws353 0.11).
    The rows counted are a prefix: with an unsorted vocabulary (``sorted_vocab=0``) it stops at
    the first word below the threshold.

    Parameters
    ----------
    counts : array_like
        Word counts in vocabulary order.
    sync_words : int
        Words each worker trains between merges.
    occurrences : float
        Expected sightings per interval that make a row hot.
    tree_counts : array_like, optional
        With hs: per ``syn1`` row (tree node, busiest first: :func:`gensim_distw2v.kernel.reverse_tree`),
        how often it is on a trained word's path (:func:`gensim_distw2v.kernel.node_counts`). The
        nodes near the root are on nearly every word's path: every worker moves them many times
        per interval, and summed they overshoot as the frequent words' rows do (measured at K=8,
        skip-gram: docs/schedule.rst), so they are damped by the same rule and threshold.

    Returns
    -------
    dict of (str, int)
        ``{"syn0": n, "syn1neg": min(n, OUTPUT_DAMP_MOST)}``, and ``"syn1"``'s count of such nodes
        when ``tree_counts`` is given.
    """
    seen = _seen(counts, sync_words, occurrences)
    out = {"syn0": _prefix(seen), "syn1neg": min(_prefix(seen), OUTPUT_DAMP_MOST)}
    if tree_counts is not None:
        out["syn1"] = _prefix(_seen(tree_counts, sync_words, occurrences, total=np.sum(counts, dtype=np.float64)))
    return out


def _prefix(seen):
    """How many first rows are seen (0 when nothing is known)."""
    return 0 if seen is None else len(seen) if seen.all() else int(np.argmin(seen))


def _seen(counts, words, times, total=None):
    """Per row, whether a worker training ``words`` words expects to see its word at least
    ``times`` times (from the counts, of ``total`` words: default their sum); None when there are
    no counts."""
    counts = np.asarray(counts, dtype=np.float64)
    total = float(counts.sum()) if total is None else float(total)
    return None if total <= 0 else counts * float(words) >= times * total


def tree_hot_rows(tree_counts, words_total, sync_words, sightings=HOT_SIGHTINGS):
    """How many first rows of hs's ``syn1`` (tree nodes, busiest first:
    :func:`gensim_distw2v.kernel.reverse_tree`) merge in every round: the nodes a worker expects
    to pass at least ``sightings`` times in ``sync_words`` words, as :func:`hot_rows` counts the
    words (``tree_counts``: :func:`gensim_distw2v.kernel.node_counts`; ``words_total``: the
    words' count)."""
    return _prefix(_seen(tree_counts, sync_words, sightings, total=words_total))


def hot_rows(counts, sync_words, sightings=HOT_SIGHTINGS):
    """How many first rows of ``syn0`` and ``syn1neg`` merge in every round: the words a worker
    expects to see at least ``sightings`` times in ``sync_words`` words (from their counts). The
    rows after them (rarer words) are *cold*: they merge every ``cold_every``-th round and at
    epoch ends, and their change waits in ``R - B`` (and in the server's stale bits) meanwhile,
    as held-back rows do. The count depends on the interval, not on the number of workers, so
    neither does the traffic of a routine round.

    Measured (docs/schedule.rst): at K=8, merging the first 1,000 rows of devmix (a quarter of a
    sighting per worker and interval of 2,209 words) every round and the rest every 6th cost 0.21
    analogy points against 0.35 for every row in every round; the quality a long interval loses is
    the frequent rows'.

    Parameters
    ----------
    counts : array_like
        Word counts in vocabulary order.
    sync_words : int
        Words each worker trains between merges.
    sightings : float
        Expected sightings per worker and interval that make a row hot.

    Returns
    -------
    int
        Rows up to the last hot one (with an unsorted vocabulary, ``sorted_vocab=0``, every hot
        row is below it, with cold ones among them); every row when there are no counts.
    """
    seen = _seen(counts, sync_words, sightings)
    if seen is None:  # no counts (a vocabulary built by hand): no row is known to be cold
        return len(counts)
    hot = np.flatnonzero(seen)
    return int(hot[-1]) + 1 if len(hot) else 0


def default_sync_words(n_workers, corpus_words=0):
    """Words each worker trains between merges, by default: for two workers or more, whatever their
    number (so the merges per trained word, and their bytes and CPU, do not grow with it),
    :data:`SYNC_SHARE` of the corpus's words per epoch, at least :data:`SYNC_WORDS` (2,200) and at
    most 1 M; one worker merges every 1 M words (its merges only make progress durable).

    The interval is the hot rows' clock (:func:`hot_rows`): quality hangs on how often the
    frequent words' rows merge, and on how long the run is: at K=8 the same share of the corpus
    cost the same quality on 3 M, 6 M and 12 M words, while a fixed 2,200 words cost 0.64 analogy
    points on 12 M words and 2.47 on 3 M (docs/schedule.rst). So the interval grows with the
    corpus, which is what lets large corpora merge rarely (a 1 G-word corpus: 185 k words). Beyond
    12 M words that is an extrapolation of the measured range: pass ``sync_words`` to choose.
    (Before, the interval shrank with K as ``400 k / K**2.5``, merging every row: quality held,
    the cost per word grew 16-fold from K=2 to K=8.) Skip-gram and CBOW take the same interval.

    Parameters
    ----------
    n_workers : int
        Workers in the session.
    corpus_words : int, optional
        Raw words per epoch (0: unknown, the floor).
    """
    if n_workers <= 1:
        return ONE_WORKER_SYNC_WORDS
    return int(min(ONE_WORKER_SYNC_WORDS, max(SYNC_WORDS, round(SYNC_SHARE * max(0, int(corpus_words or 0))))))


def check_codec(codec):
    """``codec`` (a name or numpy dtype of :data:`CODECS`) as its name; a clear error otherwise."""
    try:
        name = np.dtype(codec).name
    except TypeError:
        name = None
    if name not in CODECS:
        raise ValueError(f"merge_dtype must be one of {CODECS} (routine merges' values on the wire), got {codec!r}")
    return name


def row_bytes(codec, vector_size):
    """Bytes a row of deltas takes on the wire: its values, int8's float32 scale and a uint32 index."""
    codec = check_codec(codec)
    return vector_size * np.dtype(codec).itemsize + (4 if codec == "int8" else 0) + 4


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


def row_ranges(n_rows, row_bytes, max_bytes=16 * 1024 * 1024):
    """Split ``[0, n_rows)`` into ranges of at most ``max_bytes`` worth of full rows."""
    step = max(1, max_bytes // max(1, row_bytes))
    return [(lo, min(n_rows, lo + step)) for lo in range(0, n_rows, step)]


def row_limits(hot_rows, tree_hot_rows=-1):
    """What a routine round reads of each matrix, for :meth:`GlobalWeights.apply` and
    :meth:`Replica.take_delta`: None (every row) if ``hot_rows`` is negative; else the words' hot
    rows (``syn0``, ``syn1neg``) and, if ``tree_hot_rows`` is not negative, hs's ``syn1`` below
    that (otherwise every ``syn1`` row)."""
    if hot_rows is None or hot_rows < 0:
        return None
    if tree_hot_rows is None or tree_hot_rows < 0:
        return int(hot_rows)
    return {"syn0": int(hot_rows), "syn1neg": int(hot_rows), "syn1": int(tree_hot_rows)}


def _row_end(name, lo, hi, hot_rows):
    """Where a merge part's rows ``[lo, hi)`` of matrix ``name`` end in a round that skips cold rows:
    ``hot_rows`` is the words' count (for ``syn0`` and ``syn1neg``) or a count per matrix (with
    hs's ``syn1``, whose rows are tree nodes); None or negative: every row."""
    hot = hot_rows.get(name) if isinstance(hot_rows, dict) else hot_rows if name in BY_FREQUENCY else None
    if hot is None or hot < 0:
        return hi
    return min(hi, max(lo, hot))


class GlobalWeights:
    """The global weights, and what each worker lacks of them, in memory and work per row that do
    not grow with the number of workers.

    What a worker lacks is kept two ways, by row:

    * The rows the ``damp`` rule damps (:func:`damped_rows`: a few hundred of the most frequent
      words) need the change the worker missed, which the rule compares its delta with; the hot
      rows (``delta_rows``, about a thousand) are sent often, and a delta costs half the bytes of a
      value in int8. For those rows the server keeps a *snapshot* per worker: the worker's base ``B`` as the
      server knows it (set when the worker downloads the row, advanced by every delta it sends and
      every delta it is sent). What it missed is ``G - snapshot``, computed when needed; a reply
      sends it as deltas (``codec`` in routine rounds, the smallest held back; rounding and
      hold-back stay in ``G - snapshot``: error feedback, as :meth:`Replica.take_delta` does on the
      way up).
    * Every other row has one bit per worker (a *stale* bit): set for every other worker when a
      worker's delta is folded into the row (for every worker, its writer included, when the rule
      changed what was sent: ``mean``), cleared when the row's value is sent. A reply sends the
      stale rows' *values* (in ``value_codec`` in routine rounds, float32 in exact ones): the
      worker sets its base to them and keeps in its replica what it has not sent yet
      (:meth:`Replica.take_in`). A float16 value is off by at most 2**-11 of itself, an int8 one
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
        (:func:`damped_rows`). Default: every ``syn0`` row, 1,000 ``syn1neg`` rows.
    codec : {'float16', 'int8', 'float32'}
        Deltas of routine replies (exact ones are float32).
    value_codec : {'float16', 'int8', 'float32'}, optional
        Values of the stale rows in routine replies; default: ``codec``. (Measured at K=8, CBOW,
        seeds 1-2: int8 values against float16 cost -0.27 and +0.07 analogy points, and cut the
        bytes down from 153 to 104 per word: docs/schedule.rst.)
    delta_rows : int or dict of (str, int)
        The first rows of ``syn0`` and ``syn1neg`` (the hot rows, :func:`hot_rows`), or of each
        matrix named (hs's ``syn1``: :func:`tree_hot_rows`), also get a snapshot per worker,
        undamped (summed, or averaged under ``mean``): replies carry what the
        worker missed of them as deltas, in ``codec`` (int8 deltas: half the bytes of float16
        values), the rounding waiting in ``G - snapshot``.
    """

    def __init__(self, weights, rule="sum", damp_rows=None, codec="float16", delta_rows=0, value_codec=None):
        self.codec = check_codec(codec)
        self.value_codec = check_codec(value_codec or self.codec)
        if rule not in RULES:
            raise ValueError(f"unknown merge rule {rule!r}; choose one of {RULES}")
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
        self.rounded = {name: np.zeros((n_rows, 1), dtype=np.uint64) for name in weights}  # sent as float16
        self.slots = {}  # worker rank -> its bit (slot) in the stale words
        self.members = np.zeros(1, dtype=np.uint64)  # every member's bit: what a write marks stale
        self.snapshots = {}  # worker rank -> {matrix name: float32 (snap_rows, dim)}
        self.merges = 0
        self.damped = 0  # rows the damp rule took part of
        self.lock = threading.Lock()

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

    def add_worker(self, worker):
        """A worker joined: it takes a free slot, and its view is what it downloads
        (:meth:`download`); until then it is taken to hold the weights as they are now."""
        with self.lock:
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
        with self.lock:
            if worker in self.slots:
                word, mask = self._bit(worker)
                self.members[word] &= ~mask
            self.slots.pop(worker, None)
            self.snapshots.pop(worker, None)

    def download(self, name, lo, hi, worker=None):
        """Rows ``[lo, hi)`` of matrix ``name``, a copy; a member's download also becomes its view of
        them (its snapshot, its stale bits cleared), at the same instant."""
        with self.lock:
            rows = np.array(self.weights[name][lo:hi])
            if worker is not None and worker in self.slots:
                top = min(hi, self.snap_rows[name])
                if lo < top:
                    self.snapshots[worker][name][lo:top] = rows[:top - lo]
                word, mask = self._bit(worker)
                self.stale[name][lo:hi, word] &= ~mask
                self.rounded[name][lo:hi, word] &= ~mask
            return rows

    def apply(self, worker, lo, hi, deltas, hold_back=0.0, exact=True, hot_rows=None, wanted=None):
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
            A routine round of cold-row skipping (:func:`hot_rows`): reply with rows of ``syn0``
            and ``syn1neg`` below this only, or of each matrix below its count (the others wait).
            Default: every row.
        wanted : numpy.ndarray of bool, optional
            Over ``[lo, hi)``: of the rows of ``syn0`` and ``syn1neg`` sent as values (those beyond
            the snapshot's: the hot rows come as deltas), reply with these only (the rows of the
            jobs the worker holds); the others it lacks wait (their stale bits stay set). Default:
            every row it lacks.

        Returns
        -------
        (dict, dict)
            Per matrix, ``(rows, values, row scales or None)``: first the damped rows' missed
            change as deltas (:meth:`Replica.take_in`), then the stale rows' global values
            (``take_in(..., absolute=True)``).
        """
        deltas_out, values_out = {}, {}
        with self.lock:
            if worker not in self.slots:
                raise ValueError(f"worker rank {worker} is not part of this session's merges")
            scale = 1.0 / len(self.slots) if self.rule == "mean" else 1.0
            marks = self._marks(worker, own_too=self.rule == "mean")
            word, mask = self._bit(worker)
            for name, weights in self.weights.items():
                top_rows, snap = self.snap_rows[name], self.snapshots[worker][name]
                rows, values, row_scales = deltas.get(name, (None, None, None))
                if rows is not None and len(rows):
                    rows = np.ascontiguousarray(rows, dtype=np.uint32)
                    top = int(np.searchsorted(rows, top_rows))  # rows are increasing
                    if values.dtype == np.float16 and not HAS_F16C:
                        values = _as_float32(values)
                    self.damped += fold_part(weights, rows, values, top, snap, self.stale[name], marks, scale,
                                             row_scales, self.damp_below[name])
                end = _row_end(name, lo, hi, hot_rows)
                # damped rows: what the worker missed, as deltas (hold-back and rounding wait: error feedback)
                if lo < min(end, top_rows):
                    deltas_out[name] = _take(weights[:top_rows], snap, lo, min(end, top_rows),
                                             "float32" if exact else self.codec, hold_back)
                else:
                    deltas_out[name] = (np.zeros(0, np.uint32), np.zeros((0, weights.shape[1]), np.float32), None)
                # every other row: the values of those changed since the worker last had them (and, in an
                # exact reply, of those it has as float16 only)
                a = max(lo, top_rows)
                if a < end:
                    bits = self.stale[name][a:end, word] | self.rounded[name][a:end, word] if exact \
                        else self.stale[name][a:end, word]
                    stale = np.flatnonzero(bits & mask).astype(np.uint32) + np.uint32(a)
                else:
                    stale = np.zeros(0, np.uint32)
                if wanted is not None and name in BY_FREQUENCY:
                    stale = stale[wanted[stale.astype(np.int64) - lo]]
                values_out[name] = (stale,) + _values(weights, stale, "float32" if exact else self.value_codec)
                self.stale[name][stale, word] &= ~mask
                if values_out[name][1].dtype != np.float32:
                    self.rounded[name][stale, word] |= mask
                else:
                    self.rounded[name][stale, word] &= ~mask
            self.merges += 1
        return deltas_out, values_out


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


def _take(replica, base, lo, hi, codec, hold_back=0.0):
    """Rows of ``[lo, hi)`` where ``replica`` differs from ``base`` and their deltas, as
    :meth:`Replica.take_delta` sends them (``base`` advances by exactly what is sent)."""
    changed, norms = changed_rows(replica, base, lo, hi)
    kept = kept_rows(norms, hold_back)  # the smallest wait: error feedback (compiled, linear time)
    changed = changed[kept]
    part_codec = _part_codec(codec, norms[kept])
    if HAS_F16C or part_codec != "float16":  # one pass: difference, rounding, advancing the base
        delta, row_scales = send_rows(replica, base, changed, part_codec)
    else:
        (delta, sent), row_scales = _compact(row_diff(replica, base, changed), half=True), None
        add_rows(base, changed, sent)
    return changed, delta, row_scales


def damp_agreeing(delta, missed, missed_sq):
    """A worker's delta, less what it repeats of the change it missed (AdaSum's pairwise rule, per row).

    ``missed`` is what the other workers changed in these rows since this worker last received them:
    both updates started from (about) the same weights. Where they agree (``missed . delta > 0``)
    the result is ``AdaSum(missed, delta) - missed``: two equal updates count once, orthogonal ones
    both, partly aligned ones in between; where they disagree or nothing was missed, ``delta`` as is.

    Parameters
    ----------
    delta : numpy.ndarray
        float32 (rows, dim): what the worker sends.
    missed : numpy.ndarray
        float32 (rows, dim): the others' change it has not received.
    missed_sq : numpy.ndarray
        float32 (rows,): squared norms of ``missed``.

    Returns
    -------
    numpy.ndarray
        float32 (rows, dim): what to add to the global weights.
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


class Replica:
    """A worker's replica ``R`` of the trained matrices and its base ``B``.

    Parameters
    ----------
    weights : dict of (str, numpy.ndarray)
        The global weights as fetched at join time; copied into ``R`` (trained in place by the
        kernel) and ``B``.
    """

    def __init__(self, weights):
        self.replica = {name: np.array(w, dtype=np.float32, order="C") for name, w in weights.items()}
        self.base = {name: w.copy() for name, w in self.replica.items()}

    def take_delta(self, lo, hi, codec="float32", hold_back=0.0, hot_rows=None):
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
            (a routine round that skips the cold rows, :func:`hot_rows`); the others wait in
            ``R - B``. Default: every row.

        Returns
        -------
        dict of (str, (numpy.ndarray, numpy.ndarray, numpy.ndarray or None))
            Per matrix: uint32 rows, their delta values, and int8's float32 row scales (else None).
        """
        codec = check_codec(codec)
        # B advances by exactly what the server adds to G (so B == G bit for bit on rows no one else
        # touched); the rounding of the delta stays in R - B for the next round.
        return {name: _take(replica, self.base[name], lo, _row_end(name, lo, hi, hot_rows), codec, hold_back)
                for name, replica in self.replica.items()}

    def take_in(self, missed, values=None):
        """Take in what the server sent (:meth:`GlobalWeights.apply`'s pair): deltas of the rows
        it keeps a snapshot of (``R += delta; B += delta``) and the global values of other rows
        (``R += value - B; B = value``: what this worker has not sent stays in ``R - B``).

        Both map matrix names to ``(rows, values, row scales or None)``.
        """
        for reply, absolute in ((missed, False), (values or {}, True)):
            for name, (rows, got, row_scales) in reply.items():
                if not len(rows):
                    continue
                rows = np.ascontiguousarray(rows, dtype=np.uint32)
                if not HAS_F16C and got.dtype == np.float16:
                    got = _as_float32(got)
                take_rows(self.replica[name], self.base[name], rows, got, row_scales, absolute)
