"""The only module that imports Pyro4: daemons, proxies, the name server, serializers, HMAC.

Every daemon of this package accepts msgpack and nothing else (no pickle, no marshal): values
are plain data, arrays travel as raw bytes (see :mod:`gensim_distw2v.protocol`). Calls to the name
server use serpent (a safe, literal-only format that a stock ``python -m Pyro4.naming`` accepts).
Everything binds to 127.0.0.1 unless told otherwise, and binding another address requires an
HMAC key, which then signs every message of every daemon, proxy and name-server call.

Pyro4's process-wide configuration (``Pyro4.config``, the ``PYRO_*`` environment variables) and its
serializer registry are left as the process has them, so that other Pyro4 users of the same process
(gensim's distributed LDA/LSI want pickle) keep working; each daemon and proxy of this package carries
its own settings instead. A daemon (:class:`_Gated`) accepts only its serializer (Pyro4 reads
``SERIALIZERS_ACCEPTED`` and ``SERVERTYPE`` once, while the daemon is built: set for that moment,
under a lock), decodes calls itself within :data:`MSGPACK_LIMITS`, refuses data over its message size
before reading it, serves up to :data:`THREADPOOL_SIZE` connections and sends plain tracebacks. A proxy
(:class:`_Proxy`) speaks msgpack (serpent to the name server), decodes replies itself within the same
limits and never retries a call. Left to the process: ``COMPRESSION`` (our proxies compress requests if
it is on; our daemons inflate them to their message size at most and never compress replies), the
handshake's reply to a proxy (read by Pyro4, vouched for by the HMAC key), and what Pyro4 reads per
message that cannot be set per connection, checked instead by :func:`_check_config`. The traffic
counter (:func:`~gensim_distw2v.io.meter.traffic`) wraps Pyro4's connections from the first daemon or proxy on, not at
import.
"""
import contextlib
import logging
import signal
import socket
import ssl
import threading
import uuid
import zlib

import msgpack
import Pyro4
import Pyro4.errors
import Pyro4.constants
import Pyro4.message
import Pyro4.naming
import Pyro4.socketserver.threadpool
import Pyro4.socketutil
import Pyro4.util

from gensim_distw2v.io import meter
from gensim_distw2v.io.gate import THREADPOOL_SIZE, Gate, Limits
from gensim_distw2v.io.keys import DEFAULT_NS_PORT, as_key, check_bind, ns_settings
from gensim_distw2v.io.serving import _interrupt
from gensim_distw2v.protocol import errors
from gensim_distw2v.protocol.errors import ClusterError

logger = logging.getLogger(__name__)

# after the handshake: a merge part carries up to two matrices' parts of at most 64 MB each
MAX_MESSAGE_SIZE = 130 * 1024 * 1024
NS_MAX_MESSAGE_SIZE = 1024 * 1024  # the name server's messages are names and URIs
# the msgpack decoder's limits: a message cannot make its reader build millions of objects from a few
# bytes (msgpack checks each container's length before it allocates it)
MSGPACK_LIMITS = dict(max_str_len=1024 * 1024, max_bin_len=MAX_MESSAGE_SIZE, max_array_len=2 ** 20,
                      max_map_len=65536, max_ext_len=1024)


class _BoundedMsgpack(Pyro4.util.MsgpackSerializer):
    """Pyro4's msgpack serializer decoding within :data:`MSGPACK_LIMITS`. Our daemons and proxies use
    their own instance (:data:`_MSGPACK`); Pyro4's registry keeps its own for everyone else."""

    def loadsCall(self, data):  # noqa: N802 - Pyro4's name
        obj, method, vargs, kwargs = msgpack.unpackb(self._convertToBytes(data), raw=False,
                                                     object_hook=self.object_hook, **MSGPACK_LIMITS)
        return obj, method, vargs, kwargs

    def loads(self, data):
        return msgpack.unpackb(self._convertToBytes(data), raw=False, object_hook=self.object_hook,
                               ext_hook=self.ext_hook, **MSGPACK_LIMITS)


_MSGPACK = _BoundedMsgpack()


def _codec(name):
    """The serializer our daemons and proxies use for ``name`` (msgpack: the bounded one)."""
    return _MSGPACK if name == "msgpack" else Pyro4.util.get_serializer(name)


NS_SERIALIZER = "serpent"
_construct_lock = threading.Lock()  # see _config_while_constructing

PyroError = Pyro4.errors.PyroError
CommunicationError = Pyro4.errors.CommunicationError  # includes timeouts and closed connections
NamingError = Pyro4.errors.NamingError
ProtocolError = Pyro4.errors.ProtocolError


_ENVELOPE = Pyro4.message.Message.header_size + 65535  # a message's header and annotations, at most
# message flags for what this package never sends: batches, serialized blobs, oneway calls
_REFUSED_FLAGS = Pyro4.message.FLAGS_BATCH | Pyro4.message.FLAGS_KEEPSERIALIZED | Pyro4.message.FLAGS_ONEWAY


class _Wire(Pyro4.socketutil.SocketConnection):
    """A connection of our daemons and proxies: data over ``limit`` bytes is refused before it is read,
    and not sent (Pyro4's own check reads the process's ``MAX_MESSAGE_SIZE``, 0 -- no limit -- by default)."""

    limit = MAX_MESSAGE_SIZE

    @classmethod
    def adopt(cls, conn, limit):
        """Make Pyro4's ``conn`` one of ours, refusing data over ``limit`` bytes."""
        conn.__class__ = cls
        conn.limit = limit
        return conn

    def recv(self, size):
        if size > self.limit:  # Pyro4 reads a message as its header, annotations (< 64 KiB), data
            self.close()
            raise Pyro4.errors.MessageTooLargeError(f"max message size exceeded ({size} where max={self.limit})")
        return super().recv(size)

    def send(self, data):
        if len(data) > self.limit + _ENVELOPE:
            raise Pyro4.errors.MessageTooLargeError(f"max message size exceeded ({len(data)} bytes where "
                                                    f"max={self.limit})")
        super().send(data)


class _Pool(Pyro4.socketserver.threadpool.Pool):
    """Pyro4's thread pool holding up to :data:`THREADPOOL_SIZE` threads (Pyro4's reads the process's
    ``THREADPOOL_SIZE`` at every new connection)."""

    def process(self, job):
        if self.closed:
            raise Pyro4.socketserver.threadpool.PoolError("job queue is closed")
        if self.idle:
            worker = self.idle.pop()
        elif self.num_workers() < THREADPOOL_SIZE:
            worker = Pyro4.socketserver.threadpool.Worker(self)
            worker.start()
        else:
            raise Pyro4.socketserver.threadpool.NoFreeWorkersError("no free workers, increase thread pool size")
        self.busy.add(worker)
        worker.process(job)


@contextlib.contextmanager
def _config_while_constructing(**values):
    """Pyro4's config set to ``values`` while a daemon is built: ``Daemon.__init__`` reads ``SERVERTYPE``
    and ``SERIALIZERS_ACCEPTED`` there and nowhere else (but Flame), so the daemon keeps them. Under a
    lock (concurrent constructions would restore each other's values), restored at once: only a daemon
    of another Pyro4 user built in another thread at that very moment could see them."""
    with _construct_lock:
        saved = {name: getattr(Pyro4.config, name) for name in values}
        try:
            for name, value in values.items():
                setattr(Pyro4.config, name, value)
            yield
        finally:
            for name, value in saved.items():
                setattr(Pyro4.config, name, value)


def _check_config(limit, serving=False):
    """Refuse what Pyro4 reads from the process's config at every message, cannot be set per daemon
    or proxy, and would break or open up ours: a ``MAX_MESSAGE_SIZE`` below ``limit``, and (for
    daemons, ``serving``) ``REQUIRE_EXPOSE`` off."""
    size = Pyro4.config.MAX_MESSAGE_SIZE
    if 0 < size < limit:
        raise ClusterError(f"Pyro4's MAX_MESSAGE_SIZE (PYRO_MAX_MESSAGE_SIZE) is {size} bytes in this process, "
                           f"below the {limit} that gensim_distw2v's messages may take; set it to 0 (no limit: "
                           f"gensim_distw2v limits its own connections) or to at least {limit}")
    if serving and not Pyro4.config.REQUIRE_EXPOSE:
        raise ClusterError("Pyro4's REQUIRE_EXPOSE (PYRO_REQUIRE_EXPOSE) is off in this process: every public "
                           "method of a gensim_distw2v server would be callable from the network; leave it on")


def _inflated(msg, limit):
    """A message's data, decompressed if its sender compressed it (Pyro4 does where the sender's
    ``COMPRESSION`` is on), to at most ``limit`` bytes."""
    if not msg.flags & Pyro4.message.FLAGS_COMPRESSED:
        return msg.data
    inflate = zlib.decompressobj()
    data = inflate.decompress(msg.data, limit + 1)
    if len(data) > limit or inflate.unconsumed_tail:
        raise Pyro4.errors.MessageTooLargeError(f"max message size exceeded (decompressed, max={limit})")
    return data


class _PyroGate(Gate):
    """A :class:`~gensim_distw2v.io.gate.Gate` that reads Pyro4's handshake header."""

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
            self.refuse(f"no Pyro4 handshake ({err})", peer)
            return False
        if msg.data_size + msg.annotations_size > self.limits.max_handshake_bytes:
            self.refuse(f"a handshake larger than {self.limits.max_handshake_bytes} bytes", peer)
            return False
        return True


class _Gated:
    """Mixed into a Pyro4 daemon: its own serializer (``SERIALIZER``, the only one it accepts), message
    size (``LIMIT``) and thread pool whatever the process's Pyro4 config says, and the handshake under
    :class:`Limits` (see :class:`_PyroGate`)."""

    SERIALIZER = "msgpack"
    LIMIT = MAX_MESSAGE_SIZE
    gate = None
    on_disconnect = None

    def __init__(self, limits, **kwargs):
        _check_config(self.LIMIT, serving=True)
        first_use()
        self.gate = _PyroGate(limits)
        with _config_while_constructing(SERVERTYPE="thread", SERIALIZERS_ACCEPTED={self.SERIALIZER}):
            super().__init__(**kwargs)
        self.transportServer.pool.__class__ = _Pool

    @staticmethod
    def _peer(conn):
        try:
            return conn.sock.getpeername()[0]
        except (OSError, IndexError):
            return "?"

    def _handshake(self, conn, denied_reason=None):
        if denied_reason:  # every thread is busy: close without reading (reading could block the acceptor)
            self.gate.refuse(denied_reason, self._peer(conn))
            conn.close()
            return False
        peer = self._peer(conn)
        if not self.gate.admit(conn, peer):
            conn.close()
            return False
        conn.peer = peer
        _Wire.adopt(conn, self.gate.limits.max_handshake_bytes)  # also where TLS allows no peeking
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
        conn.limit = self.LIMIT
        return True

    @meter.whole_calls  # each call's whole CPU, counted under the name its handler gave it
    def handleRequest(self, conn):  # noqa: N802 - Pyro4's name
        """Pyro4's request handling for what this package sends: one call per message (no batches, blobs
        or oneway calls), decoded by this daemon's serializer within its limits, answered uncompressed
        and with a plain traceback whatever the process's Pyro4 config says."""
        msg = Pyro4.message.Message.recv(conn, [Pyro4.message.MSG_INVOKE, Pyro4.message.MSG_PING],
                                         hmac_key=self._pyroHmacKey)
        context = Pyro4.current_context
        context.correlation_id = uuid.UUID(bytes=msg.annotations["CORR"]) if "CORR" in msg.annotations \
            else uuid.uuid4()
        if msg.type == Pyro4.message.MSG_PING:
            self._reply(conn, Pyro4.message.MSG_PING, b"pong", msg.serializer_id, msg.seq)
            return
        codec = _codec(self.SERIALIZER)
        try:
            if msg.serializer_id != codec.serializer_id:
                raise Pyro4.errors.SerializeError(f"message used serializer that is not accepted: {msg.serializer_id}")
            if msg.flags & _REFUSED_FLAGS:
                raise ProtocolError(f"message flags {msg.flags:#x}: batches, blobs and oneway calls are not served")
            obj_id, method, vargs, kwargs = codec.loadsCall(_inflated(msg, self.LIMIT))
            context.client, context.seq, context.annotations = conn, msg.seq, msg.annotations
            context.msg_flags, context.serializer_id = msg.flags, msg.serializer_id
            try:
                context.client_sock_addr = conn.sock.getpeername()
            except OSError:
                context.client_sock_addr = None
            obj = self.objectsById.get(obj_id)
            if obj is None:
                raise Pyro4.errors.DaemonError("unknown object")
            data = codec.dumps(Pyro4.util.getAttribute(obj, method)(*vargs, **kwargs))
        except Exception as err:  # noqa: BLE001 - as Pyro4's: the caller gets the error, the daemon serves on
            if isinstance(err, Pyro4.errors.SerializeError) or not isinstance(err, CommunicationError):
                self._sendExceptionResponse(conn, msg.seq, msg.serializer_id, err, None)
            if isinstance(err, (CommunicationError, Pyro4.errors.SecurityError)):
                raise
            return
        self._reply(conn, Pyro4.message.MSG_RESULT, data, codec.serializer_id, msg.seq)

    def _reply(self, conn, msg_type, data, serializer_id, seq):
        context = Pyro4.current_context
        annotations = {**context.response_annotations, "CORR": context.correlation_id.bytes, **self.annotations()}
        context.response_annotations = {}
        conn.send(Pyro4.message.Message(msg_type, data, serializer_id, 0, seq, annotations=annotations,
                                        hmac_key=self._pyroHmacKey).to_bytes())

    def _sendExceptionResponse(self, connection, seq, serializer_id, exc_value, tbinfo, flags=0,  # noqa: N802
                               annotations=None):
        """Pyro4's, with a plain traceback (no local variables) whatever ``DETAILED_TRACEBACK`` says."""
        tbinfo = Pyro4.util.formatTraceback(type(exc_value), exc_value, exc_value.__traceback__, detailed=False)
        super()._sendExceptionResponse(connection, seq, serializer_id, exc_value, tbinfo, flags, annotations)

    def clientDisconnect(self, conn):  # noqa: N802 - Pyro4's hook
        self.gate.gone(getattr(conn, "peer", "?"))
        if self.on_disconnect is not None:
            self.on_disconnect(conn)


def expose(method):
    """Mark a method as callable remotely (Pyro4 serves nothing that is not exposed)."""
    return Pyro4.expose(method)


def locate_ns(ns_conf, timeout=10.0):
    """A proxy to the name server described by ``ns_conf`` (speaking serpent, as any name server accepts).

    Raises
    ------
    ClusterError
        No name server answers there; the message says how to start one.
    """
    host, port, broadcast, key = ns_settings(ns_conf)
    uri = f"PYRO:{Pyro4.constants.NAMESERVER_NAME}@{host}:{port}"
    try:
        try:
            return _ping_ns(uri, key, timeout)
        except CommunicationError:
            found = _broadcast_ns() if broadcast and not (ns_conf or {}).get("host") else None
            if found is None:
                raise
            return _ping_ns(found, key, timeout)
    except (CommunicationError, NamingError, ProtocolError) as err:
        if _refused_for_its_key(err):
            why = "it gave no HMAC key" if not key else "its HMAC key is not the cluster's"
            raise ClusterError(
                f"the name server at {host}:{port} refuses this client: {why}; pass the cluster's key, as "
                f"ns_conf['hmac_key'] in Python or --hmac-key-file on the command line",
                code=errors.Code.FORBIDDEN) from None
        raise ClusterError(
            f"no Pyro4 name server answers at {host}:{port} ({err}). Start one with: "
            f"python -m Pyro4.naming -n {host} -p {port}"
            + (" (with PYRO_HMAC_KEY set to the cluster's key)" if key else "")) from None


def _refused_for_its_key(err):
    """Whether ``err`` is a peer refusing this side's HMAC key or its lack: Pyro4 raises SecurityError on
    a message's HMAC, and a proxy's handshake wraps it in a CommunicationError (its cause)."""
    while err is not None and not isinstance(err, Pyro4.errors.SecurityError):
        err = err.__cause__ or err.__context__
    return err is not None


def _ping_ns(uri, key, timeout):
    ns = _NameServerProxy(uri)
    ns._pyroHmacKey = key
    ns._pyroTimeout = timeout
    ns.ping()
    return ns


def _broadcast_ns():
    """The URI a name server answers a broadcast look-up with (as ``Pyro4.locateNS`` asks: to the
    process's ``BROADCAST_ADDRS`` and ``NS_BCPORT``), or None."""
    sock = Pyro4.socketutil.createBroadcastSocket(reuseaddr=Pyro4.config.SOCK_REUSE, timeout=0.7)
    try:
        for _ in range(3):
            for address in Pyro4.config.parseAddressesString(Pyro4.config.BROADCAST_ADDRS):
                with contextlib.suppress(OSError):
                    sock.sendto(b"GET_NSURI", 0, (address, Pyro4.config.NS_BCPORT))
            with contextlib.suppress(socket.timeout):
                return sock.recvfrom(100)[0].decode("iso-8859-1")
        return None
    finally:
        sock.close()


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


class _Proxy(Pyro4.Proxy):
    """A Pyro4 proxy with its own serializer (``SERIALIZER``) and message size (``LIMIT``) whatever the
    process's Pyro4 config says, that never retries a call (``MAX_RETRIES``): the replies it reads are
    decoded here, msgpack within :data:`MSGPACK_LIMITS` (Pyro4's ``_pyroRawWireResponse`` hands them over
    undecoded). The handshake's reply is Pyro4's to read: the HMAC key (when there is one) vouches for it."""

    SERIALIZER = "msgpack"
    LIMIT = MAX_MESSAGE_SIZE

    def __init__(self, uri):
        _check_config(self.LIMIT)
        first_use()
        super().__init__(uri)
        self._pyroSerializer = self.SERIALIZER
        self._pyroRawWireResponse = True
        self._pyroMaxRetries = 0

    def __setstate__(self, state):  # (Pyro4's resets both from the process's config)
        super().__setstate__(state)
        self._pyroRawWireResponse, self._pyroMaxRetries = True, 0

    def _pyroValidateHandshake(self, response):  # noqa: N802 - Pyro4's hook, once connected
        _Wire.adopt(self._pyroConnection, self.LIMIT)

    def _pyroInvoke(self, methodname, vargs, kwargs, flags=0, objectId=None):  # noqa: N802, N803 - Pyro4's
        msg = super()._pyroInvoke(methodname, vargs, kwargs, flags, objectId)
        if msg is None:  # a oneway call
            return None
        if len(msg.data) > self.LIMIT or msg.flags & Pyro4.message.FLAGS_ITEMSTREAMRESULT:
            self._pyroRelease()
            raise ProtocolError(f"a reply of {len(msg.data)} bytes or a stream (flags {msg.flags:#x}) from "
                                f"{self._pyroUri}: this package's servers send neither")
        data = _codec(self.SERIALIZER).loads(msg.data)  # (Pyro4 checked it is our serializer's)
        if msg.flags & Pyro4.message.FLAGS_EXCEPTION:
            raise data
        return data


class _NameServerProxy(_Proxy):
    """A proxy to the name server: serpent, messages of at most 1 MB."""
    SERIALIZER, LIMIT = NS_SERIALIZER, NS_MAX_MESSAGE_SIZE


def connect(uri, hmac_key=None, timeout=None):
    """A msgpack proxy to ``uri`` (a proxy is for one thread at a time)."""
    proxy = _Proxy(uri)
    proxy._pyroHmacKey = as_key(hmac_key)
    if timeout:
        proxy._pyroTimeout = timeout
    return proxy


def uri_host(uri):
    """The host part of a Pyro4 URI (where the server behind it is reached)."""
    return Pyro4.URI(uri).host


def uses_tls():
    """Whether this process's Pyro4 speaks TLS (``PYRO_SSL``): merges then stay on it (no bulk channel)."""
    return bool(Pyro4.config.SSL)


def set_timeout(proxy, seconds):
    """Seconds a call on ``proxy`` may take (None: no limit)."""
    proxy._pyroTimeout = seconds


def timeout_of(proxy):
    """``proxy``'s call timeout (None: no limit)."""
    return proxy._pyroTimeout


def bind(proxy):
    """Connect ``proxy`` now (rather than at its first call); raises :data:`CommunicationError` if it cannot."""
    proxy._pyroBind()


def release(proxy):
    """Close a proxy's (or a :class:`~gensim_distw2v.io.endpoints.Link`'s) connection (harmless if it is already
    closed)."""
    try:
        getattr(proxy, "proxy", proxy)._pyroRelease()
    except Exception:  # noqa: BLE001 - releasing a broken connection must never raise
        pass


class _Daemon(_Gated, Pyro4.Daemon):
    """A msgpack daemon under :class:`Limits` that tells its owner when a client connection closes."""


class _NameServerDaemon(_Gated, Pyro4.naming.NameServerDaemon):
    """Pyro4's name server daemon under :class:`Limits`: serpent only, messages of at most 1 MB."""
    SERIALIZER, LIMIT = NS_SERIALIZER, NS_MAX_MESSAGE_SIZE


def caller():
    """The connection the current remote call came in on (pass it back to compare in ``on_disconnect``)."""
    return Pyro4.current_context.client


# A ClusterFault raised by a handler travels as plain data (errors.FAULT_CLASS) and is raised again,
# as the same class, by the caller.
_first_use_lock = threading.Lock()
_first_use_done = []


def first_use():
    """What this package adds to Pyro4, done when the process makes its first daemon or proxy (never
    at import): the traffic counter on Pyro4's connections, and the converters that carry our
    faults as plain data (for our fault classes only: other classes convert as they did)."""
    with _first_use_lock:
        if _first_use_done:
            return
        meter.TRAFFIC.install(Pyro4.socketutil.SocketConnection)
        Pyro4.util.SerializerBase.register_class_to_dict(errors.ClusterFault, errors.fault_to_dict, serpent_too=False)
        Pyro4.util.SerializerBase.register_dict_to_class(errors.FAULT_CLASS, errors.dict_to_fault)
        _first_use_done.append(True)


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


def accepted_serializers():
    """The serializers this package's daemons accept (a test asserts pickle and marshal are not among them)."""
    return {_Daemon.SERIALIZER}


def serve_name_server(host="127.0.0.1", port=DEFAULT_NS_PORT, hmac_key=None, limits=None):
    """Run a Pyro4 name server under :class:`Limits` until Ctrl-C or SIGTERM (serpent only, messages of
    at most 1 MB); :func:`check_bind`'s rule holds as for the daemons. Logs
    ``gensim_distw2v.nameserver ready at HOST:PORT`` once it serves."""
    hmac_key = as_key(hmac_key)
    check_bind(host, hmac_key)
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
