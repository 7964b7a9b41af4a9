"""The distributed settings of a model: one validated object, built once and passed whole.

:class:`Settings` holds what ``Word2Vec(distributed=True, ...)`` takes beyond gensim's arguments.
It is validated where it is built (a bad value raises a ``ValueError`` naming the setting, what is
wrong and what is allowed), and then passed whole: from the model to the client, whose session
config carries it to the dispatcher, the shards and the workers. ``Word2Vec``'s keyword arguments
and attributes stay as they were (each attribute reads and, validated, replaces its setting).
"""
import dataclasses
import math
import os
import typing

import numpy as np

from gensim_distw2v.protocol.constants import DELTA_DTYPES, MAX_ARRAY_BYTES, MERGE_RULES, SYNC_MODES

__all__ = ["CHECKPOINT_EVERY", "COLD_EVERY", "HOLD_BACK", "MERGE_DTYPE", "PART_BYTES", "TENSORBOARD_WORDS", "Settings",
           "check_codec", "check_cold_every"]

PART_BYTES = 16 * 1024 * 1024  # arrays and merge rounds move in parts of at most this many bytes
CHECKPOINT_EVERY = 300.0  # seconds between timed checkpoints (with checkpoint_dir)
TENSORBOARD_WORDS = 10_000  # the embedding projector's most frequent words (with tensorboard_dir)
# Routine merges' values on the wire, by default: int8 levels with a float32 scale per row (d + 8
# bytes a row of d values with its index; float16: 2 d + 4, on request). With hot rows every round
# and error feedback, int8 holds quality at K = 2 to 8 (docs/schedule.rst). What rounding loses waits
# for the next round, as held-back rows do.
MERGE_DTYPE = "int8"
# The rows of rare words merge every COLD_EVERY-th round (docs/schedule.rst)
COLD_EVERY = 6
# Up, a routine round holds back the rows that changed least, together HOLD_BACK of the squared change
# (error feedback: they go once grown, or at the epoch's exact flush); down, the hot rows' deltas alike.
# Measured at K=8 (CBOW, seeds 1-2, docs/schedule.rst): 0.1 -> 0.3 cuts the bytes up from 144 to 110
# per word for about 0.1 analogy points; 0.5 (87 B) cost 0.3 more.
HOLD_BACK = 0.3


def check_codec(codec):
    """``codec`` (a name or numpy dtype of :data:`DELTA_DTYPES`) as its name; a clear error otherwise."""
    try:
        name = np.dtype(codec).name
    except TypeError:
        name = None
    if name not in DELTA_DTYPES:
        raise ValueError(f"merge_dtype must be one of {DELTA_DTYPES} (routine merges' values on the wire), got {codec!r}")
    return name


def check_cold_every(cold_every, what=None):
    """``cold_every`` (merge the rows of rare words every n-th round) as an int in [1, 1000];
    ValueError naming the problem otherwise."""
    if isinstance(cold_every, bool) or not isinstance(cold_every, (int, np.integer)) or not 1 <= cold_every <= 1000:
        where = f"{what}: " if what else ""
        raise ValueError(f"{where}cold_every must be an int in [1, 1000] (merge the rows of rare words every "
                         f"n-th round; 1: in every round), got {cold_every!r}")
    return int(cold_every)


def _positive_int(value, name, what):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int ({what}), got {value!r}")
    return int(value)


def _folder(value, name):
    """``value`` (None, or a folder's path) made absolute; ValueError naming ``name`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(f"{name} must be a folder (a str or path), got {value!r}")
    path = os.path.abspath(os.fspath(value))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{name} {path} exists and is not a folder")
    return path


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a model trains on a cluster (see :class:`gensim_distw2v.Word2Vec` for each setting).

    Parameters
    ----------
    sync_words : int, optional
        Words each worker trains between merges (None: derived from the corpus's length,
        :func:`gensim_distw2v.core.merge.default_sync_words`).
    merge : {'damp', 'sum', 'mean'}
        The merge rule.
    sync : {'ssp', 'bsp', 'asp', 'local'}
        How merge rounds are ordered: bounded staleness (a worker trains on while its round is in
        flight, at most one interval), a barrier per round (rounds in a fixed order; runs with the
        same seed and workers of one thread are bit-identical), no bound, or no merges within an
        epoch (replicas merged at epoch ends).
    hold_back : float
        Share of its squared change a worker may keep back in a routine merge, in [0, 1).
    cold_every : int
        The rows of rare words merge every ``cold_every``-th round, in [1, 1000].
    merge_dtype : {'float16', 'int8', 'float32'}
        Values of routine merges on the protocol.
    cluster_timeout : float
        Seconds to wait for a first worker and shard, and without any worker during training.
    part_bytes : int
        Arrays and merge rounds move in messages of at most this many bytes.
    checkpoint_dir : str, optional
        A folder the dispatcher and the shards write checkpoints to (the same path on every node
        that runs one, as ``corpus_file``); None: no checkpoints. Made absolute.
    checkpoint_every : float
        Seconds between timed checkpoints (besides one at every epoch end).
    tensorboard_dir : str, optional
        A folder the client writes TensorBoard event files to (:mod:`gensim_distw2v.io.board`); None:
        none. Made absolute.
    tensorboard_words : int
        The embedding projector gets the vectors of this many most frequent words at the end
        (0: no projector files).
    tensorboard_quality : bool
        Also evaluate the model at every epoch end (analogies, WordSim353, SimLex-999 from gensim's
        test data) and write the scores; each costs a download of the weights.
    """

    sync_words: typing.Optional[int] = None
    merge: str = "damp"
    sync: str = "ssp"
    hold_back: float = HOLD_BACK
    cold_every: int = COLD_EVERY
    merge_dtype: str = MERGE_DTYPE
    cluster_timeout: float = 30.0
    part_bytes: int = PART_BYTES
    checkpoint_dir: typing.Optional[str] = None
    checkpoint_every: float = CHECKPOINT_EVERY
    tensorboard_dir: typing.Optional[str] = None
    tensorboard_words: int = TENSORBOARD_WORDS
    tensorboard_quality: bool = False

    def __post_init__(self):
        fix = object.__setattr__  # frozen: the validated, normalised values replace the given ones
        if self.sync_words is not None:
            fix(self, "sync_words", _positive_int(self.sync_words, "sync_words", "words per worker between merges"))
        if self.merge not in MERGE_RULES:
            raise ValueError(f"unknown merge rule {self.merge!r}; choose one of {MERGE_RULES}")
        if self.sync not in SYNC_MODES:
            raise ValueError(f"unknown sync mode {self.sync!r}; choose one of {SYNC_MODES} (ssp: bounded staleness, "
                             f"bsp: a barrier per round, reproducible; asp: no bound; local: merges at epoch ends)")
        if isinstance(self.hold_back, bool) or not isinstance(self.hold_back, (int, float, np.floating)) \
                or not 0.0 <= self.hold_back < 1.0:
            raise ValueError(f"hold_back must be in [0, 1), got {self.hold_back!r}")
        fix(self, "hold_back", float(self.hold_back))
        fix(self, "cold_every", check_cold_every(self.cold_every))
        fix(self, "merge_dtype", check_codec(self.merge_dtype))
        if isinstance(self.cluster_timeout, bool) or not isinstance(self.cluster_timeout, (int, float, np.number)) \
                or not 0 < self.cluster_timeout < math.inf:
            raise ValueError(f"cluster_timeout must be a positive number of seconds, got {self.cluster_timeout!r}")
        fix(self, "cluster_timeout", float(self.cluster_timeout))
        part_bytes = _positive_int(self.part_bytes, "part_bytes", "bytes per message part")
        if not 1024 <= part_bytes <= MAX_ARRAY_BYTES // 2:
            raise ValueError(f"part_bytes must be in [1024, {MAX_ARRAY_BYTES // 2}], got {part_bytes}")
        fix(self, "part_bytes", part_bytes)
        fix(self, "checkpoint_dir", _folder(self.checkpoint_dir, "checkpoint_dir"))
        if isinstance(self.checkpoint_every, bool) or not isinstance(self.checkpoint_every, (int, float, np.number)) \
                or not 0 < self.checkpoint_every <= 1e7:
            raise ValueError(f"checkpoint_every must be a number of seconds in (0, 1e7], got {self.checkpoint_every!r}")
        fix(self, "checkpoint_every", float(self.checkpoint_every))
        fix(self, "tensorboard_dir", _folder(self.tensorboard_dir, "tensorboard_dir"))
        if isinstance(self.tensorboard_words, bool) or not isinstance(self.tensorboard_words, (int, np.integer)) \
                or not 0 <= self.tensorboard_words <= 1_000_000:
            raise ValueError(f"tensorboard_words must be an int in [0, 1000000] (words in the embedding projector), "
                             f"got {self.tensorboard_words!r}")
        fix(self, "tensorboard_words", int(self.tensorboard_words))
        if not isinstance(self.tensorboard_quality, (bool, np.bool_)):
            raise ValueError(f"tensorboard_quality must be True or False, got {self.tensorboard_quality!r}")
        fix(self, "tensorboard_quality", bool(self.tensorboard_quality))

    def replace(self, **changes):
        """A copy with ``changes``, validated."""
        return dataclasses.replace(self, **changes)

    def to_wire(self):
        """The settings as plain data (they travel whole in the session config)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, msg, what="session settings"):
        """Settings from plain data, every field present and validated as where they were built.

        Raises
        ------
        ValueError
            Not a dict, a missing or unknown field, or a value the constructor refuses.
        """
        if not isinstance(msg, dict):
            raise ValueError(f"malformed {what}: expected a dict, got {type(msg).__name__}")
        missing, unknown = set(cls.names()) - set(msg), set(msg) - set(cls.names())
        if missing or unknown:
            raise ValueError(f"malformed {what}: missing fields {sorted(missing)}, unknown fields "
                             f"{sorted(map(str, unknown))}")
        return cls(**msg)

    @classmethod
    def names(cls):
        """The settings' names."""
        return tuple(field.name for field in dataclasses.fields(cls))
