"""Merge rounds: what a shard holds and hands out, a worker's parts and the shard's replies, the round's report."""
import dataclasses
import typing

from gensim_distw2v.protocol.arrays import MAX_SCALE, check_damp_rows, check_turn, unpack_deltas, unpack_wanted
from gensim_distw2v.protocol.checkpoints import RestoreSpec
from gensim_distw2v.config.choices import COLD_OUTPUT_DOWN, DELTA_DTYPES, MERGE_RULES
from gensim_distw2v.protocol.constants import WEIGHTS
from gensim_distw2v.protocol.nodes import NodeMetrics
from gensim_distw2v.protocol.records import Record, _non_negative

MAX_RANK = 2 ** 31  # a worker's rank in a session is below it
# bounds on what a worker reports of a round (a member holding the key is not trusted beyond them):
# gensim's loss is -log(sigmoid) of a clipped dot (at most about 6) per context pair and sample, some
# tens of pairs and samples per word; 10,000 a word is far above any real run, and keeps the
# session's total finite (two reports of 1.7e308 made it infinite, and every progress reply after it fail)
MAX_LOSS_PER_WORD = 1e4
MAX_REPORT_WORDS = 2 ** 40  # words of one report's job at most
MAX_REPORT_BYTES = 2 ** 50  # bytes of one report at most
MAX_REPORT_SECONDS = 1e9  # CPU or wall seconds a worker can have spent (totals so far)


@dataclasses.dataclass
class ShardSpec(Record):
    """What a shard holds of a session (client -> shard): rows ``index, index + count, ...`` of
    each trained matrix (:class:`gensim_distw2v.core.layout.ShardLayout`), and how it merges them.
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
    token: str  # the session's secret (Opened.token): the workers' merges and downloads need it
    tree_hot_rows: int = 0  # with hs: syn1's hot rows (tree nodes, busiest first; merge.tree_hot_rows)
    restore: typing.Optional["RestoreSpec"] = None  # a resumed session: the rows come from a checkpoint
    max_delta: float = 64.0  # the largest change a merge may make to one weight (max_delta_for)
    owner: str = ""  # the client's secret (Opened.owner): opening, uploads, start and close need it
    # which rare syn1neg rows a cold round's reply carries: "all" the worker lacks, or "held" (those it wants;
    # "with_up": held, but every one in the rounds whose part asks for it, MergePart.output_down)
    cold_output_down: str = "held"
    # syn1neg's hot rows (replies carry them as deltas) where more than hot_rows (schedule.output_hot_rows); 0: as hot_rows
    output_hot_rows: int = 0

    def check(self):
        if self.cold_output_down not in COLD_OUTPUT_DOWN:
            raise ValueError(f"shard spec: cold_output_down must be one of {COLD_OUTPUT_DOWN}, "
                             f"got {self.cold_output_down!r}")
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
        if not all(0 <= n <= self.vocab_size for n in (self.hot_rows, self.tree_hot_rows, self.output_hot_rows)):
            raise ValueError(f"shard spec: hot_rows, tree_hot_rows and output_hot_rows must be in [0, vocab_size="
                             f"{self.vocab_size}], got {self.hot_rows}, {self.tree_hot_rows} and {self.output_hot_rows}")
        self.weights = list(self.weights)


@dataclasses.dataclass
class ShardDownload(Record):
    """Rows ``[lo, hi)`` of a shard's part of matrix ``name`` of session ``session``. A worker of
    the session names itself by its ``rank`` and shows the session's ``token``: the rows become its
    view of them for the merges, and its first download takes it a slot on the shard; the client
    (the trained weights) gives no rank, and the token too."""

    WHAT: typing.ClassVar[str] = "shard download"
    session: str
    name: str
    lo: int
    hi: int
    rank: typing.Optional[int] = None
    token: typing.Optional[str] = None

    def check(self):
        if self.rank is not None and not 0 <= self.rank < MAX_RANK:
            raise ValueError(f"shard download: rank must be the downloading worker's rank (an int in [0, {MAX_RANK})) "
                             f"or None, got {self.rank}")


@dataclasses.dataclass
class MergePart(Record):
    """One part of a worker's merge round with one shard (worker -> shard), in the shard's own rows.

    ``matrices`` maps a matrix to its deltas (:func:`pack_deltas`) for rows in ``[lo, hi)``;
    ``hold_back`` shapes the reply, ``exact`` asks for float32,
    ``hot_rows`` (-1: every row) limits a routine round's ``syn0`` and ``syn1neg`` to the rows
    below it (``syn1neg`` to those below ``output_hot_rows`` if that is given and more). ``wanted`` (None:
    every row) names the rows of ``syn0`` and ``syn1neg`` beyond the
    hot ones whose values the worker wants now (those of the jobs it holds: :func:`pack_wanted`);
    the others it lacks wait on the shard (the hot rows come as deltas, always); ``output_down`` asks for
    every ``syn1neg`` row it lacks whatever it wants (``cold_output_down='with_up'``). The shard answers
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
    output_hot_rows: typing.Optional[int] = None  # syn1neg's rows in a routine round, if more than hot_rows
    output_down: bool = False  # every syn1neg row the worker lacks, not only those it wants

    def check(self, n_rows=None, vector_size=None, weights=(), max_delta=None):
        """What a part is on its own (it arrives so, as the shard's ``merge`` call: its arrays stay
        messages); with the session's ``n_rows``, also :meth:`fit`."""
        if not 0 <= self.lo <= self.hi:
            raise ValueError(f"merge part: row range [{self.lo}, {self.hi}) is not a range of rows")
        _non_negative(self, "rank")
        if not 0.0 <= self.hold_back < 1.0:
            raise ValueError(f"merge part: hold_back must be in [0, 1), got {self.hold_back}")
        if self.hot_rows < -1 or self.tree_hot_rows < -1:
            raise ValueError(f"merge part: hot_rows and tree_hot_rows must be >= 0, or -1 (every row), got "
                             f"{self.hot_rows} and {self.tree_hot_rows}")
        if self.output_hot_rows is not None and self.output_hot_rows < 0:
            raise ValueError(f"merge part: output_hot_rows must be >= 0 or None (as hot_rows), got {self.output_hot_rows}")
        if n_rows is not None:
            self.fit(n_rows, vector_size, weights, max_delta)

    def fit(self, n_rows, vector_size=None, weights=(), max_delta=None):
        """Check the part against the session the shard holds (``n_rows`` of it, the matrices
        ``weights``) and unpack its deltas in place (the shard folds arrays, not messages).

        Raises
        ------
        ValueError
            Rows beyond the shard's, an unknown matrix, malformed deltas.
        gensim_distw2v.protocol.errors.Poisoned
            A delta beyond ``max_delta`` (or not finite).
        """
        if self.hi > n_rows:
            raise ValueError(f"merge part: row range [{self.lo}, {self.hi}) is outside [0, {n_rows})")
        if self.wanted is not None:  # (a mask over [lo, hi): only once the range is known to be the shard's)
            self.wanted = unpack_wanted(self.wanted, self.lo, self.hi)
        unknown = set(self.matrices) - set(weights)
        if unknown:
            raise ValueError(f"merge part: unknown matrices {sorted(map(str, unknown))}; this session trains "
                             f"{sorted(weights)}")
        if vector_size is not None:
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
    bytes are this round's, to and from the shards (``exact``: an epoch flush, in float32). A
    report may cover several routine rounds (``rounds``): a worker reports a few times a second,
    not every round (:data:`gensim_distw2v.worker.merger.REPORT_EVERY`), so that the dispatcher is
    off the per-round path; its jobs, loss and bytes are then those rounds' together.
    """

    WHAT: typing.ClassVar[str] = "round report"
    #: the worker's totals so far, in seconds: a later report's replace an earlier's
    TOTALS: typing.ClassVar[tuple] = ("merge_seconds", "merge_cpu", "kernel_cpu", "stall_seconds", "flush_cpu",
                                      "setup_cpu", "routine_nogil_cpu", "take_cpu")
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
    rounds: int = 1  # the merge rounds this report covers (routine rounds are reported in batches)
    flush_cpu: float = 0.0  # of merge_cpu, the epoch flushes' (a total so far): per epoch, not per interval
    setup_cpu: float = 0.0  # the worker's process CPU joining the session (join, downloads): per session
    routine_nogil_cpu: float = 0.0  # of merge_cpu, the routine rounds' compiled calls' (a total so far): no GIL
    take_cpu: float = 0.0  # of merge_cpu, the routine rounds' taking of their pieces (a total so far)
    overlapped: int = 0  # of the rounds, those taken while the round before was still in flight (rounds_in_flight)
    # of the routine rounds, the words this worker trained between taking a round and taking its replies in,
    # summed: how old the other workers' changes are when it sees them, beyond the interval (the lag)
    lag_words: int = 0

    def check(self):
        if self.flush < -1:
            raise ValueError(f"round report: flush must be an epoch or -1, got {self.flush}")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"round report: rounds must be an int >= 1, got {self.rounds!r}")
        if isinstance(self.overlapped, bool) or not isinstance(self.overlapped, int) \
                or not 0 <= self.overlapped <= self.rounds:
            raise ValueError(f"round report: overlapped must be an int from 0 to rounds, got {self.overlapped!r}")
        if isinstance(self.lag_words, bool) or not isinstance(self.lag_words, int) \
                or not 0 <= self.lag_words < MAX_REPORT_WORDS:
            raise ValueError(f"round report: lag_words must be an int in [0, 2**40), got {self.lag_words!r}")
        self.turn = check_turn(self.turn, "round report")
        if self.node is not None and self.node.role != "worker":
            raise ValueError(f"round report: node must be a worker's metrics, got role {self.node.role!r}")
        _non_negative(self, "bytes_up", "bytes_down", *self.TOTALS)
        for entry in self.jobs:
            if (not isinstance(entry, (list, tuple)) or len(entry) not in (2, 4)
                    or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < MAX_REPORT_WORDS
                               for x in entry)):
                raise ValueError(f"round report: jobs must be [id, effective_words] or [id, effective_words, "
                                 f"raw_words, examples], ints in [0, 2**40), got {entry!r}"[:300])
        for name in self.TOTALS:
            if getattr(self, name) > MAX_REPORT_SECONDS:
                raise ValueError(f"round report: {name} must be at most {MAX_REPORT_SECONDS:g} s, got "
                                 f"{getattr(self, name)}")
        if self.bytes_up > MAX_REPORT_BYTES or self.bytes_down > MAX_REPORT_BYTES or self.rounds > MAX_REPORT_WORDS:
            raise ValueError("round report: bytes must be below 2**50 and rounds below 2**40")
        # (a round may carry the loss of pieces of jobs it does not list yet: at most an interval's words,
        # counted generously)
        words = sum(entry[1] for entry in self.jobs)
        if not 0.0 <= self.loss <= MAX_LOSS_PER_WORD * max(words, 1_000_000):
            raise ValueError(f"round report: loss must be in [0, {MAX_LOSS_PER_WORD:g} a word] for its {words} "
                             f"effective words, got {self.loss:.6g}")
