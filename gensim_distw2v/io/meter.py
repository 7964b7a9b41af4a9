"""What each process measures of itself: CPU (kernel, merge, other), memory, traffic, words.

A :class:`Meter` makes a :class:`gensim_distw2v.protocol.NodeMetrics` in the node; every worker and
shard sends one on each heartbeat (about once a second); the dispatcher measures itself the same way.
"""
import functools
import os
import resource
import sys
import threading
import time

from gensim_distw2v import protocol


def rss_bytes():
    """This process's resident memory now (bytes; 0 where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def peak_rss_bytes():
    """This process's peak resident memory since it started (bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux counts KiB, macOS bytes


# what a process's threads are for, by the start of their names: per trained word (trainers, a
# worker's session thread fetching and reading jobs, its merger and shard links), or per second
# whatever the speed (heartbeats, Pyro4's serving and housekeeping, the main thread); the rest "other"
THREAD_GROUPS = (("trainer-", "trainers"), ("session", "session"), ("merger", "merger"),
                 ("shard-link", "merger"), ("heartbeat", "heartbeat"), ("Pyro-", "serving"),
                 ("channel-", "serving"),
                 ("housekeeper", "housekeeping"), ("MainThread", "main"))


def thread_group(name):
    """The group of :data:`THREAD_GROUPS` a thread of this name counts in (``other`` if none)."""
    for prefix, group in THREAD_GROUPS:
        if name.startswith(prefix):
            return group
    return "other"


def threads_cpu():
    """``{thread ident: (group, CPU seconds)}`` of this process's live Python threads (where the
    platform gives a thread's CPU clock; else empty)."""
    out = {}
    for thread in threading.enumerate():
        try:
            out[thread.ident] = (thread_group(thread.name),
                                 time.clock_gettime(time.pthread_getcpuclockid(thread.ident)))
        except (AttributeError, OSError, TypeError):  # no such clock here, or the thread just ended
            continue
    return out


class Meter:
    """A process's own counters, since :meth:`mark` (a session began on it) or since it started.

    Parameters
    ----------
    role : str
        ``worker``, ``shard`` or ``dispatcher``.
    threads : int, optional
        Trainer threads (workers).
    calls : bool
        Report the calls this process served (:data:`CALLS`) in its samples (the dispatcher's:
        what its CPU went to, call by call).
    """

    def __init__(self, role, threads=None, calls=False):
        if role not in protocol.NODE_ROLES:
            raise ValueError(f"role must be one of {protocol.NODE_ROLES}, got {role!r}")
        self.role, self.threads, self.calls = role, threads, calls
        self.lock = threading.Lock()
        self.session = None
        self._base = (time.monotonic(), 0.0, 0, 0)  # wall, CPU, bytes sent, bytes received
        self._calls = {}  # CALLS at the mark
        self._threads = {}  # each live thread's CPU at the mark
        self._seen = {}  # each thread's group and CPU at the last sample (a thread that ends keeps its group)
        self._gone = {}  # group -> CPU since the mark of the threads that ended (as last seen)

    def mark(self, session):
        """Count from now on, for ``session`` (an id, or None: outside sessions)."""
        sent, received = traffic()
        served = CALLS.snapshot() if self.calls else {}
        threads = {ident: cpu for ident, (_group, cpu) in threads_cpu().items()}
        with self.lock:
            self.session = session
            self._base = (time.monotonic(), time.process_time(), sent, received)
            self._calls, self._threads, self._seen, self._gone = served, threads, {}, {}

    def sample(self, words=0, kernel_cpu=0.0, merge_cpu=0.0):
        """The node's :class:`gensim_distw2v.protocol.NodeMetrics` now.

        Parameters
        ----------
        words : int
            Raw words trained since the mark (the role's own count).
        kernel_cpu, merge_cpu : float
            CPU seconds in the kernel and in merges since the mark (the role's own counts).
        """
        sent, received = traffic()
        with self.lock:
            wall, cpu, sent0, received0 = self._base
            session, base, threads0 = self.session, self._calls, self._threads
        served = None
        if self.calls:
            zero = (0, 0.0, 0.0)
            served = {op: [n - base.get(op, zero)[0], max(0.0, seconds - base.get(op, zero)[1]),
                           max(0.0, whole - base.get(op, zero)[2])]
                      for op, (n, seconds, whole) in CALLS.snapshot().items() if n > base.get(op, zero)[0]}
        total = max(0.0, time.process_time() - cpu)
        live = threads_cpu()
        with self.lock:  # threads that ended since the last sample count in their group, as last seen
            for ident, (group, seconds) in self._seen.items():
                if ident not in live or live[ident][0] != group:
                    self._gone[group] = self._gone.get(group, 0.0) + max(0.0, seconds - threads0.get(ident, 0.0))
                    threads0.pop(ident, None)
            self._seen = live
            by_group = dict(self._gone)
        for ident, (group, seconds) in live.items():  # the live threads' CPU since the mark, by group
            by_group[group] = by_group.get(group, 0.0) + max(0.0, seconds - threads0.get(ident, 0.0))
        by_group["ended"] = max(0.0, total - sum(by_group.values()))  # the rest: threads ended between samples
        rss = rss_bytes()
        return protocol.NodeMetrics(
            role=self.role, session=session, seconds=max(0.0, time.monotonic() - wall), words=int(words),
            cpu=total, kernel_cpu=min(float(kernel_cpu), total), merge_cpu=min(float(merge_cpu), total),
            rss=rss, peak_rss=max(rss, peak_rss_bytes()), bytes_sent=max(0, sent - sent0),
            bytes_received=max(0, received - received0), threads=self.threads, calls=served, thread_cpu=by_group)


class CallCounts:
    """Calls this process served, per call of its table: how many, the CPU seconds of the serving
    thread in the call's handling (checking the request, the handler, building the reply; a long
    poll's wait is not CPU), and in the whole call (that and the transport's work around it:
    reading, verifying and decoding the request, encoding, signing and sending the reply). The
    rest of the process's CPU is its own threads' (heartbeats, checkpoints) and Pyro4's accepting.
    One per process (:data:`CALLS`), like the traffic counter below (:data:`TRAFFIC`);
    :class:`gensim_distw2v.io.endpoints.Endpoint` counts the handling, the transport the whole.

    A handler may name its call more finely than its operation (:meth:`name`: a shard's merge of
    an epoch's flush counts as ``merge_flush``, a cost per epoch rather than per interval)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}  # op -> [calls, handling CPU seconds, whole-call CPU seconds]
        self._current = threading.local()  # the call this thread serves: its name, once handled

    def name(self, op):
        """Count the call this thread is serving as ``op``: its operation's name when its handling
        begins (:class:`~gensim_distw2v.io.endpoints.Endpoint`), a finer one from its handler."""
        self._current.op = op

    def add(self, op, cpu):
        """This thread handled call ``op`` (or the name its handler gave it) in ``cpu`` seconds."""
        op = getattr(self._current, "op", None) or op
        with self.lock:
            entry = self.counts.get(op)
            if entry is None:
                self.counts[op] = [1, cpu, 0.0]
            else:
                entry[0] += 1
                entry[1] += cpu

    def record(self, op, cpu):
        """Count one ``op`` that is not a call of the table (a connection's hello) and took ``cpu``
        seconds, handling and whole alike."""
        with self.lock:
            entry = self.counts.setdefault(op, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += cpu
            entry[2] += cpu

    def served(self, cpu):
        """This thread's call took ``cpu`` seconds in all (the transport's count); a message that
        reached no handler (refused, a ping, a closed connection) is not a call and not counted."""
        op = getattr(self._current, "op", None)
        if op is None:
            return
        self._current.op = None
        with self.lock:
            entry = self.counts.get(op)
            if entry is not None:
                entry[2] += cpu

    def forget(self):
        """This thread's call is not counted (refused before its handler ran)."""
        self._current.op = None

    def snapshot(self):
        """``{op: (calls, handling CPU seconds, whole-call CPU seconds)}`` since the process started."""
        with self.lock:
            return {op: tuple(entry) for op, entry in self.counts.items()}


CALLS = CallCounts()


def whole_calls(handle):
    """Wrap a transport's handling of one request (``handle(...)``): the call's whole CPU on this
    thread is counted (:meth:`CallCounts.served`) under the name its handler gave it."""
    @functools.wraps(handle)
    def counted(*args, **kwargs):
        began = time.thread_time()
        try:
            return handle(*args, **kwargs)
        finally:
            CALLS.served(time.thread_time() - began)
    return counted


def model_bytes_limit(given=None):
    """``given``, else half this machine's memory (1 TiB if unknown): the most a session may take
    on a dispatcher or a shard (their ``--max-model-bytes``)."""
    if given:
        return given
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 2 ** 40


class _Traffic:
    """Bytes this process sent and received on all its Pyro4 connections, headers included: every
    daemon's and every proxy's socket goes through Pyro4's ``SocketConnection`` (:mod:`gensim_distw2v.io.transport` installs it),
    whose ``send`` and ``recv`` are counted here (installed once, when this process makes its first
    daemon or proxy: importing the package leaves Pyro4 as it was)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = self.received = 0
        self.installed = False

    def install(self, connection_class):
        with self.lock:
            if self.installed:
                return
            self.installed = True
        send, recv = connection_class.send, connection_class.recv
        traffic = self

        def counted_send(conn, data):
            send(conn, data)
            with traffic.lock:
                traffic.sent += len(data)

        def counted_recv(conn, size):
            data = recv(conn, size)
            with traffic.lock:
                traffic.received += len(data)
            return data

        connection_class.send, connection_class.recv = counted_send, counted_recv

    def add(self, sent, received):
        """Count a message's bytes moved on a connection of this package's own (the bulk channel's)."""
        with self.lock:
            self.sent += sent
            self.received += received


TRAFFIC = _Traffic()


def traffic():
    """``(sent, received)``: bytes this process moved on all its connections since it started."""
    with TRAFFIC.lock:
        return TRAFFIC.sent, TRAFFIC.received
