"""Jobs: sentences (client -> dispatcher -> worker), byte ranges of a corpus file, batches of them,
and an epoch's counts of them."""
import dataclasses
import typing

import numpy as np

from gensim_distw2v.protocol.arrays import pack_array
from gensim_distw2v.protocol.constants import MAX_JOB_WORDS
from gensim_distw2v.protocol.records import Record, _check_array, _non_negative


# ---------------------------------------------------------------------------------------------- jobs
@dataclasses.dataclass
class Job(Record):
    """Sentences to train (client -> dispatcher -> worker): word ``indices`` (uint32), sentence
    ``offsets`` into them (int64, from 0 to ``len(indices)``), the learning rate, and the raw
    words and examples they stand for (gensim's progress counts)."""

    WHAT: typing.ClassVar[str] = "job"
    id: int
    epoch: int
    alpha: float
    indices: dict
    offsets: dict
    raw_words: int
    examples: int

    def check(self, vocab_size):
        """Everything the kernel relies on (dtype, index range, offsets that fit): a bad job is
        refused where it arrives."""
        _non_negative(self, "id", "epoch", "raw_words", "examples")
        if not 0 <= self.alpha < 10:
            raise ValueError(f"job: alpha must be in [0, 10), got {self.alpha}")
        indices = _check_array(self, "indices", "uint32", ndim=1)
        offsets = _check_array(self, "offsets", "int64", ndim=1)
        if len(indices) > MAX_JOB_WORDS:
            raise ValueError(f"job has {len(indices)} words, more than the {MAX_JOB_WORDS} allowed")
        if len(indices) and int(indices.max()) >= vocab_size:
            raise ValueError(f"job has a word index {int(indices.max())} >= vocab_size {vocab_size}")
        if (len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(indices)
                or (len(offsets) > 1 and np.any(np.diff(offsets) < 0))):
            raise ValueError(f"job offsets must run non-decreasing from 0 to {len(indices)}")

    @classmethod
    def of(cls, job_id, epoch, job):
        """A :class:`gensim_distw2v.core.jobs.Job` as a record (its arrays packed for the wire)."""
        return cls(id=job_id, epoch=epoch, alpha=float(job.alpha), indices=pack_array(job.indices),
                   offsets=pack_array(job.offsets), raw_words=int(job.raw_words), examples=int(job.examples))


@dataclasses.dataclass
class RangeJob(Record):
    """A byte range of the corpus file to train (dispatcher -> worker, ``corpus_file`` sessions):
    the lines that start in bytes ``[lo, hi)``."""

    WHAT: typing.ClassVar[str] = "range job"
    id: int
    epoch: int
    alpha: float
    lo: int
    hi: int

    def check(self, size):
        if self.id < 0 or self.epoch < 0 or not 0 <= self.alpha < 10 or not 0 <= self.lo < self.hi <= size:
            raise ValueError(f"range job: id and epoch must be >= 0, alpha in [0, 10) and 0 <= lo < hi <= {size}, "
                             f"got {self.id}, {self.epoch}, {self.alpha}, {self.lo}, {self.hi}")


@dataclasses.dataclass
class JobBatch(Record):
    """The dispatcher's answer to ``get_jobs``: job messages (checked when trained), and
    ``drained``: the last epoch the client closed when nothing is left to hand out (time to
    flush), else None."""

    WHAT: typing.ClassVar[str] = "get_jobs reply"
    jobs: list
    drained: typing.Optional[int]

    def check(self):
        if self.drained is not None and self.drained < 0:
            raise ValueError(f"get_jobs reply: drained must be an epoch >= 0 or None, got {self.drained}")


@dataclasses.dataclass
class EpochCounts(Record):
    """One epoch's progress: jobs put (ranges, for a corpus file) and done, and what the done ones
    trained."""

    WHAT: typing.ClassVar[str] = "epoch progress"
    put: int = 0
    done: int = 0
    raw_words: int = 0
    effective_words: int = 0
    examples: int = 0

    def check(self):
        _non_negative(self, "put", "done", "raw_words", "effective_words", "examples")
