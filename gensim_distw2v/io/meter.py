"""What each process measures of itself: CPU (kernel, merge, other), memory, traffic, words.

A :class:`Meter` makes a :class:`gensim_distw2v.protocol.NodeMetrics` in the node; every worker and
shard sends one on each heartbeat (about once a second); the dispatcher measures itself the same way.
"""
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

    def mark(self, session):
        """Count from now on, for ``session`` (an id, or None: outside sessions)."""
        sent, received = traffic()
        served = CALLS.snapshot() if self.calls else {}
        with self.lock:
            self.session = session
            self._base = (time.monotonic(), time.process_time(), sent, received)
            self._calls = served

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
            session, base = self.session, self._calls
        served = None
        if self.calls:
            served = {op: [n - base.get(op, (0, 0.0))[0], max(0.0, seconds - base.get(op, (0, 0.0))[1])]
                      for op, (n, seconds) in CALLS.snapshot().items() if n > base.get(op, (0, 0.0))[0]}
        total = max(0.0, time.process_time() - cpu)
        rss = rss_bytes()
        return protocol.NodeMetrics(
            role=self.role, session=session, seconds=max(0.0, time.monotonic() - wall), words=int(words),
            cpu=total, kernel_cpu=min(float(kernel_cpu), total), merge_cpu=min(float(merge_cpu), total),
            rss=rss, peak_rss=max(rss, peak_rss_bytes()), bytes_sent=max(0, sent - sent0),
            bytes_received=max(0, received - received0), threads=self.threads, calls=served)


class CallCounts:
    """Calls this process served, per call of its table: how many, and the CPU seconds of the
    serving thread in them (checking the request, the handler, building the reply; a long poll's
    wait is not CPU). Pyro4's own work around a call (the socket, msgpack, its thread pool) is not
    in it: it is the rest of the process's CPU. One per process (:data:`CALLS`), like the traffic
    counter below (:data:`TRAFFIC`); :class:`gensim_distw2v.io.endpoints.Endpoint` counts."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}  # op -> [calls, cpu seconds]

    def add(self, op, cpu):
        with self.lock:
            entry = self.counts.get(op)
            if entry is None:
                self.counts[op] = [1, cpu]
            else:
                entry[0] += 1
                entry[1] += cpu

    def snapshot(self):
        """``{op: (calls, cpu seconds)}`` since the process started."""
        with self.lock:
            return {op: (n, cpu) for op, (n, cpu) in self.counts.items()}


CALLS = CallCounts()


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


TRAFFIC = _Traffic()


def traffic():
    """``(sent, received)``: bytes this process moved on all its connections since it started."""
    with TRAFFIC.lock:
        return TRAFFIC.sent, TRAFFIC.received
