"""What a connection may do before it has shown the cluster's HMAC key: :class:`Limits`, kept per
daemon by a :class:`Gate` (no Pyro4 here: :mod:`gensim_distw2v.io.transport` reads Pyro4's
handshake header and asks the gate).
"""
import collections
import dataclasses
import logging
import socket
import threading
import time

logger = logging.getLogger("gensim_distw2v.io.transport")

__all__ = ["Gate", "Limits", "THREADPOOL_SIZE"]


THREADPOOL_SIZE = 256  # threads per daemon, one per open connection; see Limits for who may hold one


@dataclasses.dataclass(frozen=True)
class Limits:
    """What a connection may do before it has shown the cluster's HMAC key (every daemon and the
    name server of this package apply them; on an unkeyed cluster the handshake proves nothing).

    Parameters
    ----------
    handshake_timeout : float
        Seconds a new connection has, in all, to complete Pyro4's handshake; then it is dropped.
    max_handshake_bytes : int
        Largest handshake message (its header is read first: a larger one is dropped unread).
    max_pending : int
        Connections in their handshake at once; beyond it the oldest is dropped (a real client's
        handshake takes milliseconds, so the oldest pending connection is the one idling).
    max_per_peer : int
        Open connections from one address (handshaking or not); more are closed at once.
    """

    handshake_timeout: float = 5.0
    max_handshake_bytes: int = 64 * 1024
    max_pending: int = 16
    max_per_peer: int = 128

    def __post_init__(self):
        if not 0 < self.handshake_timeout <= 600:
            raise ValueError(f"handshake_timeout must be in (0, 600] seconds, got {self.handshake_timeout}")
        for name in ("max_handshake_bytes", "max_pending", "max_per_peer"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_pending >= THREADPOOL_SIZE // 2:
            raise ValueError(f"max_pending must be below {THREADPOOL_SIZE // 2} (half the daemon's "
                             f"threads), got {self.max_pending}")


class Gate:
    """Keeps :class:`Limits` for one daemon: the connections in their handshake (oldest first, each
    with a deadline), the open connections per peer address, and what was refused."""

    def __init__(self, limits):
        self.limits = limits
        self.lock = threading.Lock()
        self.pending = collections.OrderedDict()  # connection -> deadline timer
        self.peers = collections.Counter()
        self.refused = collections.Counter()  # reason -> connections dropped (read by tests and logs)
        self._logged = {}  # reason -> when it was last logged

    def refuse(self, reason, peer):
        self.refused[reason] += 1
        now = time.monotonic()
        if now - self._logged.get(reason, -60.0) >= 60.0:  # a flood logs once a minute
            self._logged[reason] = now
            logger.warning("dropped a connection from %s: %s (%i so far; logged once a minute)", peer, reason,
                           self.refused[reason])

    @staticmethod
    def _cut(conn):
        try:
            conn.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked reading it
        except OSError:
            pass

    def admit(self, conn, peer):
        """Count ``conn`` in; False (and counted as refused) if its peer has too many connections."""
        with self.lock:
            if self.peers[peer] >= self.limits.max_per_peer:
                self.refuse(f"more than {self.limits.max_per_peer} connections from one address", peer)
                return False
            self.peers[peer] += 1
            while len(self.pending) >= self.limits.max_pending:
                oldest, timer = self.pending.popitem(last=False)
                timer.cancel()
                self.refuse(f"more than {self.limits.max_pending} connections in their handshake "
                             f"(the oldest goes)", peer)
                self._cut(oldest)
            timer = threading.Timer(self.limits.handshake_timeout, self._expire, (conn, peer))
            timer.daemon = True
            self.pending[conn] = timer
            timer.start()
        return True

    def _expire(self, conn, peer):
        with self.lock:
            if self.pending.pop(conn, None) is None:
                return
            self.refuse(f"no handshake within {self.limits.handshake_timeout:g} s", peer)
            self._cut(conn)

    def handshaken(self, conn):
        """``conn``'s handshake is over (either way): no deadline any more."""
        with self.lock:
            timer = self.pending.pop(conn, None)
        if timer is not None:
            timer.cancel()

    def gone(self, peer):
        """A connection from ``peer`` closed."""
        with self.lock:
            self.peers[peer] -= 1
            if self.peers[peer] <= 0:
                del self.peers[peer]
