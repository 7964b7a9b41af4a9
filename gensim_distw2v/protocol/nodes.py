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
    recent rate) when it passes them on. ``calls`` (the dispatcher's own): per call it served,
    ``[calls, CPU seconds]`` of the serving thread in them (see :class:`gensim_distw2v.io.meter.CallCounts`)."""

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
    calls: typing.Optional[dict] = None

    def check(self):
        if self.role not in NODE_ROLES:
            raise ValueError(f"malformed {self.WHAT}: role must be one of {NODE_ROLES}, got {self.role!r}")
        if self.session is not None and len(self.session) > 64:
            raise ValueError(f"malformed {self.WHAT}: session must be a session id of at most 64 characters")
        _non_negative(self, "seconds", "words", "cpu", "kernel_cpu", "merge_cpu", "rss", "peak_rss", "bytes_sent",
                      "bytes_received", "silent", "words_per_second")
        if self.threads is not None and not 1 <= self.threads <= 4096:
            raise ValueError(f"malformed {self.WHAT}: threads must be in [1, 4096], got {self.threads}")
        if self.calls is not None:
            self.calls = _call_counts(self, self.calls)

    @property
    def other_cpu(self):
        """CPU seconds neither in the kernel nor in merges (serving, messaging, waiting loops)."""
        return max(0.0, self.cpu - self.kernel_cpu - self.merge_cpu)


MAX_CALL_KINDS = 64  # calls a node's ``calls`` may list (the largest table has 24)


def _call_counts(record, calls):
    """``calls`` checked: ``{op: [calls, CPU seconds]}``, op names of at most 64 characters."""
    if not isinstance(calls, dict) or len(calls) > MAX_CALL_KINDS:
        raise ValueError(f"malformed {record.WHAT}: calls must be a map of at most {MAX_CALL_KINDS} calls")
    out = {}
    for op, value in calls.items():
        if not isinstance(op, str) or not 0 < len(op) <= 64:
            raise ValueError(f"malformed {record.WHAT}: a call's name must be a string of 1-64 characters")
        if (not isinstance(value, (list, tuple)) or len(value) != 2 or isinstance(value[0], bool)
                or not isinstance(value[0], int) or not isinstance(value[1], (int, float)) or isinstance(value[1], bool)
                or value[0] < 0 or not 0 <= value[1] < float("inf")):
            raise ValueError(f"malformed {record.WHAT}: calls[{op!r}] must be [calls, CPU seconds], both >= 0")
        out[op] = [int(value[0]), float(value[1])]
    return out

