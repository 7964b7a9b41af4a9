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
    recent rate) when it passes them on. ``calls`` (the dispatcher's and shards' own): per call they served,
    ``[calls, CPU seconds, CPU seconds]``: how many, the serving thread's CPU handling them and in the
    whole calls, transport included (see :class:`gensim_distw2v.io.meter.CallCounts`). ``thread_cpu``:
    CPU seconds of its threads by what they are for (``trainers``, ``session``, ``merger``,
    ``heartbeat``, ``serving``, ``main``, ``other``, and ``ended``: threads gone since; see
    :data:`gensim_distw2v.io.meter.THREAD_GROUPS`)."""

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
    thread_cpu: typing.Optional[dict] = None  # {group: CPU seconds} (gensim_distw2v.io.meter.THREAD_GROUPS)

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
        if self.thread_cpu is not None:
            self.thread_cpu = _thread_cpu(self, self.thread_cpu)

    @property
    def other_cpu(self):
        """CPU seconds neither in the kernel nor in merges (serving, messaging, waiting loops)."""
        return max(0.0, self.cpu - self.kernel_cpu - self.merge_cpu)


MAX_CALL_KINDS = 64  # calls a node's ``calls`` may list (the largest table has 24)


def _named_map(record, value, field, most, chars, what):
    """``value`` checked to be a map of at most ``most`` entries keyed by names of 1 to ``chars``
    characters (``what`` names a key in the message); returns its items."""
    if not isinstance(value, dict) or len(value) > most:
        raise ValueError(f"malformed {record.WHAT}: {field} must be a map of at most {most} {what}s")
    for name in value:
        if not isinstance(name, str) or not 0 < len(name) <= chars:
            raise ValueError(f"malformed {record.WHAT}: a {what}'s name must be a string of 1-{chars} characters")
    return value.items()


def _seconds(value):
    """Whether ``value`` is a finite number of seconds >= 0 (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")


def _call_counts(record, calls):
    """``calls`` checked: ``{op: [calls, CPU seconds handling them, CPU seconds in the whole calls]}``
    (the last is missing from older nodes), op names of at most 64 characters."""
    out = {}
    for op, value in _named_map(record, calls, "calls", MAX_CALL_KINDS, 64, "call"):
        if (not isinstance(value, (list, tuple)) or len(value) not in (2, 3) or isinstance(value[0], bool)
                or not isinstance(value[0], int) or value[0] < 0 or not all(map(_seconds, value[1:]))):
            raise ValueError(f"malformed {record.WHAT}: calls[{op!r}] must be [calls, CPU seconds handling them, "
                             f"CPU seconds in the whole calls], all >= 0")
        out[op] = [int(value[0])] + [float(v) for v in value[1:]]
    return out


MAX_THREAD_GROUPS = 16  # groups a node's ``thread_cpu`` may list (gensim_distw2v.io.meter's: 9, "ended" among them)


def _thread_cpu(record, groups):
    """``thread_cpu`` checked: ``{group: CPU seconds >= 0}``, group names of at most 32 characters."""
    out = {}
    for group, seconds in _named_map(record, groups, "thread_cpu", MAX_THREAD_GROUPS, 32, "thread group"):
        if not _seconds(seconds):
            raise ValueError(f"malformed {record.WHAT}: thread_cpu[{group!r}] must be CPU seconds >= 0")
        out[group] = float(seconds)
    return out
