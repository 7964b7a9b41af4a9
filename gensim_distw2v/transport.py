"""The only module that imports Pyro4: daemons, proxies, the name server, serializers, HMAC.

Every daemon of this package accepts msgpack and nothing else (no pickle, no marshal): values
are plain data, arrays travel as raw bytes (see :mod:`gensim_distw2v.wire`). Calls to the name
server use serpent (a safe, literal-only format that a stock ``python -m Pyro4.naming`` accepts).
Everything binds to 127.0.0.1 unless told otherwise, and binding another address requires an
HMAC key, which then signs every message of every daemon, proxy and name-server call.
"""
import logging
import os
import signal
import socket
import threading

import Pyro4
import Pyro4.errors
import Pyro4.constants
import Pyro4.naming

logger = logging.getLogger(__name__)

Pyro4.config.SERIALIZER = "msgpack"
Pyro4.config.SERIALIZERS_ACCEPTED = {"msgpack"}
Pyro4.config.MAX_MESSAGE_SIZE = 256 * 1024 * 1024  # arrays move in chunks far below this
Pyro4.config.THREADPOOL_SIZE = 64
Pyro4.config.DETAILED_TRACEBACK = False

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


class _Daemon(Pyro4.Daemon):
    """A daemon that tells its owner when a client connection closes."""

    on_disconnect = None

    def clientDisconnect(self, conn):  # noqa: N802 - Pyro4's hook
        if self.on_disconnect is not None:
            self.on_disconnect(conn)


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
    """

    def __init__(self, obj, name, host="127.0.0.1", port=0, ns_conf=None, hmac_key=None, on_disconnect=None):
        hmac_key = as_key(hmac_key)
        check_bind(host, hmac_key)
        self.name, self.ns_conf = name, dict(ns_conf or {})
        if hmac_key and not self.ns_conf.get("hmac_key"):
            self.ns_conf["hmac_key"] = hmac_key
        self.daemon = _Daemon(host=host, port=port)
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
