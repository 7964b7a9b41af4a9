"""What a process of the cluster reports about itself (:class:`NodeMetrics`)."""
import dataclasses
import typing

from gensim_distw2v.protocol.constants import NODE_ROLES
from gensim_distw2v.protocol.records import Record, _non_negative


@dataclasses.dataclass
class NodeMetrics(Record):
    """What one process of the cluster reports about itself (on its heartbeats; the dispatcher
    adds its own): counters since ``session`` began on it (or since the process started, outside
    sessions).

    ``seconds`` of wall time they cover; raw ``words`` trained (workers); CPU seconds of the
    whole process (``cpu``) and of it, in the word2vec kernel (``kernel_cpu``: trainer threads'
    kernel calls) and in merges (``merge_cpu``: a worker's merge rounds, a shard's merge calls);
    resident memory now and the process's peak (bytes); bytes sent and received on all its
    connections (the wire's bytes, headers included); trainer ``threads`` (workers). The
    dispatcher fills ``silent`` (seconds since it heard the node) and ``words_per_second`` (its
    recent rate) when it passes them on."""

    WHAT: typing.ClassVar[str] = "node metrics"
    role: str
    session: typing.Optional[str]
    seconds: float
    words: int
    cpu: float
    kernel_cpu: float
    merge_cpu: float
    rss: int
    peak_rss: int
    bytes_sent: int
    bytes_received: int
    threads: typing.Optional[int] = None
    silent: float = 0.0
    words_per_second: float = 0.0

    def check(self):
        if self.role not in NODE_ROLES:
            raise ValueError(f"malformed {self.WHAT}: role must be one of {NODE_ROLES}, got {self.role!r}")
        if self.session is not None and len(self.session) > 64:
            raise ValueError(f"malformed {self.WHAT}: session must be a session id of at most 64 characters")
        _non_negative(self, "seconds", "words", "cpu", "kernel_cpu", "merge_cpu", "rss", "peak_rss", "bytes_sent",
                      "bytes_received", "silent", "words_per_second")
        if self.threads is not None and not 1 <= self.threads <= 4096:
            raise ValueError(f"malformed {self.WHAT}: threads must be in [1, 4096], got {self.threads}")

    @property
    def other_cpu(self):
        """CPU seconds neither in the kernel nor in merges (serving, messaging, waiting loops)."""
        return max(0.0, self.cpu - self.kernel_cpu - self.merge_cpu)
