"""The only module that imports Pyro4: daemons, proxies, the name server, serializers, HMAC.

Every daemon of this package accepts msgpack and nothing else (no pickle, no marshal): values
are plain data, arrays travel as raw bytes (see :mod:`gensim_distw2v.protocol`). Calls to the name
server use serpent (a safe, literal-only format that a stock ``python -m Pyro4.naming`` accepts).
Everything binds to 127.0.0.1 unless told otherwise, and binding another address requires an
HMAC key, which then signs every message of every daemon, proxy and name-server call.
"""
import collections
import dataclasses
import logging
import os
import signal
import socket
import ssl
import threading
import time

import msgpack
import Pyro4
import Pyro4.errors
import Pyro4.constants
import Pyro4.message
import Pyro4.naming
import Pyro4.socketutil
import Pyro4.util

logger = logging.getLogger(__name__)

Pyro4.config.SERIALIZER = "msgpack"
Pyro4.config.SERIALIZERS_ACCEPTED = {"msgpack"}
# after the handshake: a merge part carries up to two matrices' parts of at most 64 MB each
Pyro4.config.MAX_MESSAGE_SIZE = 130 * 1024 * 1024
Pyro4.config.THREADPOOL_SIZE = 256  # one thread per open connection; see Limits for who may hold one
Pyro4.config.DETAILED_TRACEBACK = False



class _BoundedMsgpack(Pyro4.util.MsgpackSerializer):
    """Pyro4's msgpack serializer with the decoder's size limits: a message cannot make its reader
    build millions of objects from a few bytes (msgpack checks each container's length before it
    allocates it)."""

    LIMITS = dict(max_str_len=1024 * 1024, max_bin_len=Pyro4.config.MAX_MESSAGE_SIZE, max_array_len=2 ** 20,
                  max_map_len=65536, max_ext_len=1024)

    def loadsCall(self, data):  # noqa: N802 - Pyro4's name
        obj, method, vargs, kwargs = msgpack.unpackb(self._convertToBytes(data), raw=False,
                                                     object_hook=self.object_hook, **self.LIMITS)
        return obj, method, vargs, kwargs

    def loads(self, data):
        return msgpack.unpackb(self._convertToBytes(data), raw=False, object_hook=self.object_hook,
                               ext_hook=self.ext_hook, **self.LIMITS)


_msgpack = _BoundedMsgpack()
Pyro4.util._serializers["msgpack"] = _msgpack
Pyro4.util._serializers_by_id[_msgpack.serializer_id] = _msgpack

DISPATCHER_NAME = "gensim_distw2v.dispatcher"
WORKER_PREFIX = "gensim_distw2v.worker."
SHARD_PREFIX = "gensim_distw2v.shard."
NS_SERIALIZER = "serpent"
HMAC_ENV = "GENSIM_DISTW2V_HMAC_KEY"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_NS_PORT = 9090
_broadcast_lock = threading.Lock()

PyroError = Pyro4.errors.PyroError
CommunicationError = Pyro4.errors.CommunicationError  # includes timeouts and closed connections
NamingError = Pyro4.errors.NamingError
ProtocolError = Pyro4.errors.ProtocolError


class ClusterError(RuntimeError):
    """The cluster is not there, not reachable, or refused us: the message says which and what to do."""


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
        if self.max_pending >= Pyro4.config.THREADPOOL_SIZE // 2:
            raise ValueError(f"max_pending must be below {Pyro4.config.THREADPOOL_SIZE // 2} (half the daemon's "
                             f"threads), got {self.max_pending}")


class _Gate:
    """Keeps :class:`Limits` for one daemon: the connections in their handshake (oldest first, each
    with a deadline), the open connections per peer address, and what was refused."""

    def __init__(self, limits):
        self.limits = limits
        self.lock = threading.Lock()
        self.pending = collections.OrderedDict()  # connection -> deadline timer
        self.peers = collections.Counter()
        self.refused = collections.Counter()  # reason -> connections dropped (read by tests and logs)
        self._logged = {}  # reason -> when it was last logged

    def _refuse(self, reason, peer):
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
                self._refuse(f"more than {self.limits.max_per_peer} connections from one address", peer)
                return False
            self.peers[peer] += 1
            while len(self.pending) >= self.limits.max_pending:
                oldest, timer = self.pending.popitem(last=False)
                timer.cancel()
                self._refuse(f"more than {self.limits.max_pending} connections in their handshake "
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
            self._refuse(f"no handshake within {self.limits.handshake_timeout:g} s", peer)
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

    def header_fits(self, conn, peer):
        """Read (without consuming) the handshake's header; False if the message is too large or not Pyro's."""
        if isinstance(conn.sock, ssl.SSLSocket):
            return True  # TLS allows no peeking; the deadline still holds
        try:
            head = conn.sock.recv(Pyro4.message.Message.header_size, socket.MSG_PEEK | socket.MSG_WAITALL)
            if len(head) < Pyro4.message.Message.header_size:
                return False
            msg = Pyro4.message.Message.from_header(head)
        except (OSError, ProtocolError) as err:
            self._refuse(f"no Pyro4 handshake ({err})", peer)
            return False
        if msg.data_size + msg.annotations_size > self.limits.max_handshake_bytes:
            self._refuse(f"a handshake larger than {self.limits.max_handshake_bytes} bytes", peer)
            return False
        return True


class _Gated:
    """Mixed into a Pyro4 daemon: the handshake under :class:`Limits` (see :class:`_Gate`)."""

    gate = None
    on_disconnect = None

    @staticmethod
    def _peer(conn):
        try:
            return conn.sock.getpeername()[0]
        except (OSError, IndexError):
            return "?"

    def _handshake(self, conn, denied_reason=None):
        if denied_reason:  # every thread is busy: close without reading (reading could block the acceptor)
            self.gate._refuse(denied_reason, self._peer(conn))
            conn.close()
            return False
        peer = self._peer(conn)
        if not self.gate.admit(conn, peer):
            conn.close()
            return False
        conn.peer = peer
        try:
            conn.timeout = self.gate.limits.handshake_timeout
            done = self.gate.header_fits(conn, peer) and super()._handshake(conn)
        except Exception:  # noqa: BLE001 - a failed handshake closes the connection, nothing more
            done = False
        finally:
            self.gate.handshaken(conn)
        if not done:
            self.gate.gone(peer)
            conn.close()
            return False
        conn.timeout = Pyro4.config.COMMTIMEOUT or None
        return True

    def clientDisconnect(self, conn):  # noqa: N802 - Pyro4's hook
        self.gate.gone(getattr(conn, "peer", "?"))
        if self.on_disconnect is not None:
            self.on_disconnect(conn)


def expose(method):
    """Mark a method as callable remotely (Pyro4 serves nothing that is not exposed)."""
    return Pyro4.expose(method)


def read_hmac_key(path=None):
    """The HMAC key from ``path`` (a file) or the environment variable ``GENSIM_DISTW2V_HMAC_KEY``.

    Returns
    -------
    bytes or None
    """
    if path:
        with open(path, "rb") as fin:
            key = fin.read().strip()
        if not key:
            raise ValueError(f"the HMAC key file {path!r} is empty")
        return key
    key = os.environ.get(HMAC_ENV)
    return key.encode("utf8") if key else None


def as_key(key):
    """Normalise an HMAC key given as str or bytes (or None)."""
    if key is None or isinstance(key, bytes):
        return key or None
    return str(key).encode("utf8") or None


def check_bind(host, hmac_key):
    """Refuse to bind a non-loopback address without an HMAC key."""
    if host not in LOOPBACK and not hmac_key:
        raise ClusterError(
            f"refusing to listen on {host} without an HMAC key: anyone who can reach the port could drive "
            f"the cluster. Pass --hmac-key-file FILE (the same key on every node and for the name server: "
            f"PYRO_HMAC_KEY) or set {HMAC_ENV}.")


def ns_settings(ns_conf):
    """``(host, port, broadcast, hmac_key)`` from a gensim-style ``ns_conf`` dict."""
    ns_conf = dict(ns_conf or {})
    unknown = set(ns_conf) - {"host", "port", "broadcast", "hmac_key"}
    if unknown:
        raise ValueError(f"unknown ns_conf keys {sorted(unknown)}; known: host, port, broadcast, hmac_key")
    return (ns_conf.get("host") or "127.0.0.1", int(ns_conf.get("port") or DEFAULT_NS_PORT),
            bool(ns_conf.get("broadcast", False)), as_key(ns_conf.get("hmac_key")))


def locate_ns(ns_conf, timeout=10.0):
    """A proxy to the name server described by ``ns_conf`` (speaking serpent, as any name server accepts).

    Raises
    ------
    ClusterError
        No name server answers there; the message says how to start one.
    """
    host, port, broadcast, key = ns_settings(ns_conf)
    try:
        if broadcast and not ns_conf.get("host"):
            with _broadcast_lock:  # Pyro4's broadcast look-up pings with the global serializer
                Pyro4.config.SERIALIZER = NS_SERIALIZER
                try:
                    uri = Pyro4.locateNS(broadcast=True, hmac_key=key)._pyroUri
                finally:
                    Pyro4.config.SERIALIZER = "msgpack"
        else:
            uri = f"PYRO:{Pyro4.constants.NAMESERVER_NAME}@{host}:{port}"
        ns = Pyro4.Proxy(uri)
        ns._pyroSerializer = NS_SERIALIZER
        ns._pyroHmacKey = key
        ns._pyroTimeout = timeout
        ns.ping()
        return ns
    except (CommunicationError, NamingError, ProtocolError) as err:
        if "hmac" in str(err).lower():
            why = "it gave no HMAC key" if not key else "its HMAC key is not the cluster's"
            raise ClusterError(
                f"the name server at {host}:{port} refuses this client: {why}; pass the cluster's key, as "
                f"ns_conf['hmac_key'] in Python or --hmac-key-file on the command line") from None
        raise ClusterError(
            f"no Pyro4 name server answers at {host}:{port} ({err}). Start one with: "
            f"python -m Pyro4.naming -n {host} -p {port}"
            + (" (with PYRO_HMAC_KEY set to the cluster's key)" if key else "")) from None


def list_names(ns_conf, prefix):
    """``{name: uri}`` of everything registered under ``prefix``."""
    ns = locate_ns(ns_conf)
    try:
        return {name: str(uri) for name, uri in ns.list(prefix=prefix).items()}
    finally:
        ns._pyroRelease()


def lookup(ns_conf, name):
    """The URI registered as ``name``, or None."""
    ns = locate_ns(ns_conf)
    try:
        return str(ns.lookup(name))
    except NamingError:
        return None
    finally:
        ns._pyroRelease()


def connect(uri, hmac_key=None, timeout=None):
    """A msgpack proxy to ``uri`` (a proxy is for one thread at a time)."""
    proxy = Pyro4.Proxy(uri)
    proxy._pyroSerializer = "msgpack"
    proxy._pyroHmacKey = as_key(hmac_key)
    if timeout:
        proxy._pyroTimeout = timeout
    return proxy


def release(proxy):
    """Close a proxy's connection (harmless if it is already closed)."""
    try:
        proxy._pyroRelease()
    except Exception:  # noqa: BLE001 - releasing a broken connection must never raise
        pass


class _Daemon(_Gated, Pyro4.Daemon):
    """A daemon under :class:`Limits` that tells its owner when a client connection closes."""

    def __init__(self, limits, **kwargs):
        self.gate = _Gate(limits)
        super().__init__(**kwargs)


class _NameServerDaemon(_Gated, Pyro4.naming.NameServerDaemon):
    """Pyro4's name server daemon under :class:`Limits`."""

    def __init__(self, limits, **kwargs):
        self.gate = _Gate(limits)
        super().__init__(**kwargs)


class _Traffic:
    """Bytes this process sent and received on all its Pyro4 connections, headers included: every
    daemon's and every proxy's socket goes through :class:`Pyro4.socketutil.SocketConnection`,
    whose ``send`` and ``recv`` are counted here (installed once, at import)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = self.received = 0

    def install(self, connection_class):
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


_TRAFFIC = _Traffic()
_TRAFFIC.install(Pyro4.socketutil.SocketConnection)


def traffic():
    """``(sent, received)``: bytes this process moved on all its connections since it started."""
    with _TRAFFIC.lock:
        return _TRAFFIC.sent, _TRAFFIC.received


def caller():
    """The connection the current remote call came in on (pass it back to compare in ``on_disconnect``)."""
    return Pyro4.current_context.client


class Server:
    """A Pyro4 daemon serving one object under one name in the name server.

    Parameters
    ----------
    obj : object
        The object to serve (its exposed methods become remote methods).
    name : str
        Registration name in the name server.
    host : str
        Address to bind; anything but loopback needs ``hmac_key``.
    port : int
        Port to bind (0: any free port).
    ns_conf : dict
        Where the name server is.
    hmac_key : bytes, optional
        Key signing every message.
    on_disconnect : callable, optional
        Called with the connection (as :func:`caller` returned it during its calls) when a client
        connection closes, for whatever reason: the client released it, died, or the network broke.
    limits : Limits, optional
        What a connection may do before its handshake is through (default: :class:`Limits`'s).
    """

    def __init__(self, obj, name, host="127.0.0.1", port=0, ns_conf=None, hmac_key=None, on_disconnect=None,
                 limits=None):
        hmac_key = as_key(hmac_key)
        check_bind(host, hmac_key)
        self.name, self.ns_conf = name, dict(ns_conf or {})
        if hmac_key and not self.ns_conf.get("hmac_key"):
            self.ns_conf["hmac_key"] = hmac_key
        self.daemon = _Daemon(limits or Limits(), host=host, port=port)
        self.daemon.on_disconnect = on_disconnect
        self.daemon._pyroHmacKey = hmac_key
        self.uri = str(self.daemon.register(obj, objectId=name))
        ns = locate_ns(self.ns_conf)
        try:
            ns.register(name, self.uri, safe=False)
        finally:
            ns._pyroRelease()

    def serve(self, until=None):
        """Serve requests until ``until()`` is true (checked about once a second) or :meth:`shutdown`."""
        self.daemon.requestLoop(loopCondition=(lambda: not until()) if until else (lambda: True))

    def shutdown(self):
        """Unregister from the name server (best effort) and stop the daemon."""
        try:
            ns = locate_ns(self.ns_conf, timeout=2.0)
            try:
                ns.remove(self.name)
            finally:
                ns._pyroRelease()
        except (ClusterError, PyroError):
            pass
        self.daemon.shutdown()


def free_port(host="127.0.0.1"):
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def accepted_serializers():
    """The serializers this process's daemons accept (a test asserts pickle and marshal are not among them)."""
    return set(Pyro4.config.SERIALIZERS_ACCEPTED)


def add_server_arguments(parser):
    """The options every server process takes: where the name server is, what to bind, the key."""
    parser.add_argument("--ns-host", default="127.0.0.1", help="name server host (default 127.0.0.1)")
    parser.add_argument("--ns-port", type=int, default=DEFAULT_NS_PORT, help=f"name server port (default {DEFAULT_NS_PORT})")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need a key)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free port)")
    parser.add_argument("--hmac-key-file", help=f"file holding the cluster's HMAC key (or set {HMAC_ENV})")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    add_limit_arguments(parser)


def add_limit_arguments(parser):
    """The :class:`Limits` options (every daemon and the name server take them)."""
    defaults = Limits()
    parser.add_argument("--handshake-timeout", type=float, default=defaults.handshake_timeout,
                        help="seconds a new connection has to complete its handshake")
    parser.add_argument("--max-connections-per-peer", type=int, default=defaults.max_per_peer,
                        help="open connections allowed from one address")


def limits_from_args(args):
    """The :class:`Limits` that :func:`add_limit_arguments`'s options give."""
    return Limits(handshake_timeout=args.handshake_timeout, max_per_peer=args.max_connections_per_peer)


NS_MAX_MESSAGE_SIZE = 1024 * 1024  # the name server's messages are names and URIs


def serve_name_server(host="127.0.0.1", port=DEFAULT_NS_PORT, hmac_key=None, limits=None):
    """Run a Pyro4 name server under :class:`Limits` until Ctrl-C or SIGTERM (serpent only, messages of
    at most 1 MB); :func:`check_bind`'s rule holds as for the daemons. Logs
    ``gensim_distw2v.nameserver ready at HOST:PORT`` once it serves."""
    hmac_key = as_key(hmac_key)
    check_bind(host, hmac_key)
    Pyro4.config.SERIALIZERS_ACCEPTED = {NS_SERIALIZER}
    Pyro4.config.MAX_MESSAGE_SIZE = NS_MAX_MESSAGE_SIZE
    daemon = _NameServerDaemon(limits or Limits(), host=host, port=port)
    daemon._pyroHmacKey = hmac_key
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        logger.info("gensim_distw2v.nameserver ready at %s (%s)", daemon.locationStr,
                    "keyed" if hmac_key else "no HMAC key")
        daemon.requestLoop()
    except KeyboardInterrupt:
        pass
    finally:
        daemon.close()


def serve_member(server, member, ready_message, *args):
    """Serve a worker or a shard until stopped: its ``heartbeat_loop`` starts once ``ready_message``
    (the line supervisors wait on, ``%`` arguments ``*args``) is logged; on stop ``member.stopped``
    is set and the heartbeat thread gets 5 s to say goodbye."""
    beat = threading.Thread(target=member.heartbeat_loop, name="heartbeat", daemon=True)

    def ready():
        logger.info(ready_message, *args)
        beat.start()

    def stop():
        member.stopped.set()
        if beat.is_alive():
            beat.join(timeout=5)

    serve_until_stopped(server, stop, on_ready=ready)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def serve_until_stopped(server, on_stop=None, on_ready=None):
    """Serve until Ctrl-C or SIGTERM, then run ``on_stop`` and unregister (a clean stop either way).

    ``on_ready`` runs first (it logs the "ready" line that supervisors wait on): the SIGTERM handler is
    installed before it, so a SIGTERM sent as soon as that line appears still unregisters the server.
    """
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if on_ready is not None:
            on_ready()
        server.serve()
    except KeyboardInterrupt:
        pass
    finally:
        if on_stop is not None:
            on_stop()
        server.shutdown()
