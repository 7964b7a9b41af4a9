"""A session's config as it travels (client -> dispatcher -> workers): parameters, random state,
the corpus file, the settings."""
import dataclasses
import typing

import numpy as np

from gensim_distw2v.protocol.arrays import check_damp_rows, need
from gensim_distw2v.protocol.checkpoints import CheckpointSpec
from gensim_distw2v.protocol.constants import STATIC, WEIGHTS
from gensim_distw2v.protocol.errors import BadRequest
from gensim_distw2v.protocol.records import Record, _check_array, _non_negative
from gensim_distw2v.config.settings import Settings


MAX_CORPUS_FILES = 100_000  # files of one corpus (a PathLineSentences folder) at most
MAX_STREAMS = 65_536  # stretches a corpus file's ranges are handed out from at most (trainer threads)
# a byte range a worker reads into one buffer, to train or count it (the client cuts ranges of ~10,000 words
# to train and of at most 32 MiB to count)
MAX_READ_BYTES = 64 << 20

# ---------------------------------------------------------------------------------------------- session
@dataclasses.dataclass
class TrainParams(Record):
    """The hyper-parameters of the session's kernel (gensim's names) and of its vocabulary."""

    WHAT: typing.ClassVar[str] = "session params"
    sg: int
    hs: int
    negative: int
    window: int
    cbow_mean: int
    shrink_windows: bool
    sample: bool
    vector_size: int
    vocab_size: int
    seed: int

    def check(self):
        if not 1 <= self.vocab_size < 2 ** 32 or not 1 <= self.vector_size <= 100_000:
            raise ValueError(f"session params: vocab_size must be in [1, 2**32) and vector_size in [1, 100000], "
                             f"got {self.vocab_size} and {self.vector_size}")
        if self.sg not in (0, 1) or self.hs not in (0, 1) or self.cbow_mean not in (0, 1):
            raise ValueError(f"session params: sg, hs and cbow_mean must be 0 or 1, got {self.sg}, {self.hs}, "
                             f"{self.cbow_mean}")
        if not 0 <= self.negative <= 1000 or not 1 <= self.window <= 10_000 or self.seed < 0:
            raise ValueError(f"session params: negative must be in [0, 1000], window in [1, 10000] and seed >= 0, "
                             f"got {self.negative}, {self.window}, {self.seed}")
        if not self.hs and not self.negative:
            raise ValueError("session params: either hs=1 or negative > 0 is needed")

    def kernel(self):
        """The keyword arguments of :class:`gensim_distw2v._inner.JobTrainer` these give."""
        return dict(sg=self.sg, hs=self.hs, negative=self.negative, window=self.window, cbow_mean=self.cbow_mean,
                    shrink_windows=self.shrink_windows)


@dataclasses.dataclass
class RngState(Record):
    """A ``numpy.random.RandomState`` (MT19937) state: the client's random stream, which rank 0's
    first thread continues (so one worker with one thread reproduces gensim)."""

    WHAT: typing.ClassVar[str] = "rng_state"
    keys: dict
    pos: int
    has_gauss: int
    cached_gaussian: float

    def check(self):
        _check_array(self, "keys", "uint32", shape=(624,))
        if not 0 <= self.pos <= 624 or self.has_gauss not in (0, 1):
            raise ValueError(f"rng_state: pos must be in [0, 624] and has_gauss 0 or 1, got {self.pos} and "
                             f"{self.has_gauss}")

    @classmethod
    def of(cls, rng):
        """The state of ``rng`` (a ``RandomState``) as a record."""
        _name, keys, pos, has_gauss, cached = rng.get_state()
        return cls(keys=keys.astype(np.uint32), pos=int(pos), has_gauss=int(has_gauss),
                   cached_gaussian=float(cached))

    def state(self):
        """The tuple ``RandomState.set_state`` takes."""
        return ("MT19937", np.array(self.keys), self.pos, self.has_gauss, self.cached_gaussian)


@dataclasses.dataclass
class CorpusFileSpec(Record):
    """The corpus file of a ``corpus_file`` session: where it is, its fingerprint
    (:func:`gensim_distw2v.io.corpusfile.fingerprint`: ``size``, ``digest``), its words, the
    learning rate's schedule, and ``range_bytes``: the byte ranges the dispatcher cuts.

    ``files`` (a ``PathLineSentences`` of several files): ``[path, size, digest]`` of each, in
    order; the ranges are cut over them back to back (``size`` is their sum, ``path`` their folder,
    ``digest`` one over theirs), a file's end always ending its last line. None: ``path`` is the file.

    ``streams``: the ranges are handed out from this many evenly spaced stretches of the file in turn
    (the cluster's trainer threads, as gensim's ``corpus_file`` mode reads one stretch a thread), so
    that an ordered file (by topic, date, source) is trained stretch beside stretch, not front to back;
    1 (a ``LineSentence`` the workers read): front to back, as gensim's iterable mode reads it.

    ``rate_threads``: a range's learning rate takes the epoch's progress divided by this many (1:
    gensim's linear schedule; the cluster's trainer threads under ``corpus_file_rate='gensim'``, as
    gensim's ``corpus_file`` mode with as many threads decays an epoch's rate: ``docs/corpus_file.rst``).
    """

    WHAT: typing.ClassVar[str] = "corpus_file"
    path: str
    size: int
    digest: str
    range_bytes: int
    total_words: int
    start_alpha: float
    end_alpha: float
    files: typing.Optional[list] = None
    streams: int = 1
    rate_threads: int = 1

    def check(self):
        if self.size < 0 or self.range_bytes < 1 or self.total_words < 1:
            raise ValueError(f"corpus_file: size must be >= 0, range_bytes and total_words >= 1, got {self.size}, "
                             f"{self.range_bytes}, {self.total_words}")
        if self.range_bytes > MAX_READ_BYTES:
            raise ValueError(f"corpus_file: range_bytes must be at most {MAX_READ_BYTES} (a range is read into one "
                             f"buffer), got {self.range_bytes}: lower range_words")
        if not isinstance(self.streams, int) or isinstance(self.streams, bool) or not 1 <= self.streams <= MAX_STREAMS:
            raise ValueError(f"corpus_file: streams must be an int in [1, {MAX_STREAMS}], got {self.streams!r}"[:200])
        if not isinstance(self.rate_threads, int) or isinstance(self.rate_threads, bool) or \
                not 1 <= self.rate_threads <= MAX_STREAMS:
            raise ValueError(f"corpus_file: rate_threads must be an int in [1, {MAX_STREAMS}], "
                             f"got {self.rate_threads!r}"[:200])
        if self.files is not None:
            if not self.files or len(self.files) > MAX_CORPUS_FILES:
                raise ValueError(f"corpus_file: files must hold 1 to {MAX_CORPUS_FILES} files, got {len(self.files)}")
            for entry in self.files:
                if not (isinstance(entry, (list, tuple)) and len(entry) == 3 and isinstance(entry[1], int)
                        and not isinstance(entry[1], bool) and entry[1] >= 0 and isinstance(entry[2], str)):
                    raise ValueError(f"corpus_file: each of files must be [path, size >= 0, digest], got {entry!r}"[:300])
            if sum(entry[1] for entry in self.files) != self.size:
                raise ValueError("corpus_file: the files' sizes do not add up to size")
        for path in [self.path] + [part[0] for part in self.parts()]:
            if not isinstance(path, str) or not path or "\0" in path:
                raise ValueError("corpus_file: a path must be a non-empty str without NUL")

    def parts(self):
        """``[(path, size, digest)]``: the files read back to back (one: ``path`` itself)."""
        if self.files is None:
            return [(self.path, self.size, self.digest)]
        return [tuple(entry) for entry in self.files]

    def fingerprint(self):
        """What :func:`gensim_distw2v.io.corpusfile.fingerprint` gave the client."""
        return {"size": self.size, "digest": self.digest}


@dataclasses.dataclass
class SessionConfig(Record):
    """A training session, as the client opens it (client -> dispatcher -> workers).

    ``arrays`` declares every array of the session, ``{name: {"dtype", "shape"}}``: the trained
    matrices (:data:`WEIGHTS`, on the shards) and the static ones (:data:`STATIC`, on the
    dispatcher); ``settings`` is the model's :class:`gensim_distw2v.config.settings.Settings` whole, with
    ``sync_words`` resolved; ``damp_rows`` and ``hot_rows`` are the merge rule's row counts;
    ``workers`` is how many workers the client saw (``sync="bsp"`` deals the jobs to that many ranks);
    ``corpus_file`` is set for ``corpus_file`` training (the vocabulary then travels as the arrays
    ``vocab_bytes`` and ``vocab_offsets``).
    """

    WHAT: typing.ClassVar[str] = "session config"
    versions: dict
    params: TrainParams
    arrays: dict
    settings: Settings  # a dict on the wire, checked by Settings.from_wire
    damp_rows: dict
    hot_rows: int
    compute_loss: bool
    epochs: int
    rng_state: RngState
    workers: int
    corpus_file: typing.Optional[CorpusFileSpec] = None
    tree_hot_rows: int = 0  # with hs: syn1's hot rows (tree nodes, busiest first; merge.tree_hot_rows)
    checkpoint: typing.Optional["CheckpointSpec"] = None  # with checkpoint_dir: where and how often
    total_words: int = 0  # raw words per epoch, as the client expects them (0: unknown): progress and ETA
    output_hot_rows: int = 0  # syn1neg's hot rows where more than hot_rows (schedule.output_hot_rows); 0: as hot_rows

    def check(self):
        _non_negative(self, "total_words")
        vocab, size = self.params.vocab_size, self.params.vector_size
        params = self.params
        wanted = {"syn0", "lockf"} | ({"syn1neg", "cum_table"} if params.negative else set()) \
            | ({"sample_int"} if params.sample else set()) \
            | ({"syn1", "points", "codes", "code_offsets"} if params.hs else set()) \
            | ({"vocab_bytes", "vocab_offsets"} if self.corpus_file is not None else set())
        if set(self.arrays) != wanted:
            raise ValueError(f"session config: arrays must be exactly {sorted(wanted)}, got "
                             f"{sorted(map(str, self.arrays))}")
        for name, spec in self.arrays.items():
            dtype = need(spec, "dtype", str, f"array {name}")
            dims = need(spec, "shape", (list, tuple), f"array {name}")
            if name in WEIGHTS:
                if dtype != "float32" or list(dims) != [vocab, size]:
                    raise ValueError(f"array {name} must be float32 of shape ({vocab}, {size}), got {dtype} {dims}")
            elif dtype != STATIC[name] or len(dims) != 1 or not isinstance(dims[0], int) or dims[0] < 0:
                raise ValueError(f"array {name} must be 1-dimensional {STATIC[name]}, got {dtype} {dims}")
        if self.corpus_file is not None and list(self.arrays["vocab_offsets"]["shape"]) != [vocab + 1]:
            raise ValueError(f"array vocab_offsets must have vocab_size + 1 = {vocab + 1} entries")
        if self.settings.sync_words is None:
            raise ValueError("session settings: sync_words must be set (the client derives it from the workers)")
        self.damp_rows = check_damp_rows(self.damp_rows)
        if not 0 <= self.hot_rows <= vocab:
            raise ValueError(f"hot_rows must be in [0, vocab_size={vocab}], got {self.hot_rows}")
        if not 0 <= self.tree_hot_rows <= vocab:
            raise ValueError(f"tree_hot_rows must be in [0, vocab_size={vocab}], got {self.tree_hot_rows}")
        if not 0 <= self.output_hot_rows <= vocab:
            raise ValueError(f"output_hot_rows must be in [0, vocab_size={vocab}], got {self.output_hot_rows}")
        if not 1 <= self.epochs <= 1_000_000:
            raise ValueError(f"session config: epochs must be in [1, 1000000], got {self.epochs}")
        if not 1 <= self.workers <= 65_536:
            raise ValueError(f"session config: workers must be in [1, 65536], got {self.workers}")


# ---------------------------------------------------------------------------------------------- a client's calls
@dataclasses.dataclass
class SessionRef(Record):
    """A call about session ``session`` (``start``, ``checkpoint``), with the owner's secret
    (:attr:`Opened.owner`) where the call needs it."""

    WHAT: typing.ClassVar[str] = "session call"
    session: str
    token: typing.Optional[str] = None


@dataclasses.dataclass
class Close(Record):
    """The client ends session ``session`` (with its ``token``)."""

    WHAT: typing.ClassVar[str] = "close"
    session: str
    token: str


@dataclasses.dataclass
class EpochCall(Record):
    """A call about ``epoch`` of session ``session`` (``end_epoch``, ``open_file_epoch``)."""

    WHAT: typing.ClassVar[str] = "epoch call"
    session: str
    epoch: int
    token: typing.Optional[str] = None  # the owner's secret (Opened.owner)

    def check(self):
        if self.epoch < 0:
            raise BadRequest("epoch must be an int >= 0")


@dataclasses.dataclass
class Upload(Record):
    """Rows ``[lo, lo + len)`` of array ``name`` (an array message), in order, in chunks, with the
    session's ``token``."""

    WHAT: typing.ClassVar[str] = "upload"
    session: str
    name: str
    lo: int
    array: dict
    token: str

    def check(self):
        _non_negative(self, "lo")
        if not self.array.get("data"):
            raise BadRequest("upload: an empty chunk (it would only keep the session alive)")


@dataclasses.dataclass
class Download(Record):
    """Rows ``[lo, hi)`` of array ``name`` of session ``session``, with the session's ``token``
    (its workers')."""

    WHAT: typing.ClassVar[str] = "download"
    session: str
    name: str
    lo: int
    hi: int
    token: typing.Optional[str] = None


@dataclasses.dataclass
class PutJobs(Record):
    """Jobs (job messages, checked on arrival against the session) for session ``session``'s queue."""

    WHAT: typing.ClassVar[str] = "put_jobs"
    session: str
    jobs: list
    token: typing.Optional[str] = None  # the owner's secret (Opened.owner)
