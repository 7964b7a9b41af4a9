"""The bulk channel: merge parts and their replies as raw buffers on a socket beside Pyro4.

A merge part carries a few hundred kB of rows at a long interval. Through Pyro4 each message is
copied four or five times on the way (msgpack, the message's concatenation, Pyro4's reads) and
signed with HMAC-SHA1: measured on loopback, about 1 ns of server CPU per byte without a key and
1.5-2 with one (``benchmarks/transport_cost.py``). Here a message is a fixed header, its buffers'
lengths, a small msgpack *meta* (the request record with every array's bytes taken out) and the
buffers themselves, sent from the arrays in place (``sendmsg``) and read into one buffer that the
receiver's arrays view (``recv_into``): one copy each way, the kernel's, a quarter to a fifth of
Pyro4's server CPU per byte for parts of 600 kB and more (``docs/scaling.rst`` has the figures,
and what that changes in a cluster on two cores: little, where per-message work dominates).

Only calls a server names (a shard: ``merge``) are served here, through the same
:class:`~gensim_distw2v.io.endpoints.Endpoint` (the same records, checks, handlers and counts) as
on Pyro4; the rest of the protocol stays on Pyro4. Nothing is pickled; the meta is msgpack within
:data:`gensim_distw2v.io.transport.MSGPACK_LIMITS`.

Keys. With the cluster's HMAC key every message carries a tag over its header and body and over
both ends' random nonces (exchanged at connect), the direction and the message's sequence number:
keyed BLAKE2b for a message under :data:`POLY_FROM` bytes (a microsecond or two), else Poly1305
(``cryptography``'s: about 0.14 ns a byte here against HMAC-SHA1's 0.5) under a one-time key that
keyed BLAKE2b derives from the same; a receiver takes the next number only, so that a message
cannot be replayed, reordered or moved to another connection. A connection's first message each way (``hello``)
proves the key before anything else is read; until then the :class:`~gensim_distw2v.io.gate.Limits`
of a Pyro4 connection hold (a deadline, connections pending and per peer, the hello's size).
Without a key (loopback only, as for Pyro4) nothing is signed.
"""
import contextlib
import hashlib
import hmac
import logging
import secrets
import select
import socket
import struct
import threading
import time

import msgpack
import numpy as np

from gensim_distw2v.io import meter
from gensim_distw2v.io.gate import Gate, Limits
from gensim_distw2v.io.keys import as_key, check_bind
from gensim_distw2v.io.transport import MAX_MESSAGE_SIZE, MSGPACK_LIMITS
from gensim_distw2v.protocol import calls, errors

try:
    from cryptography.hazmat.primitives.poly1305 import Poly1305
except ImportError:  # pragma: no cover - a declared dependency; the channel is then off (Pyro4 carries merges)
    Poly1305 = None

logger = logging.getLogger(__name__)

__all__ = ["ChannelLink", "ChannelServer", "LinkBroken", "available"]

MAGIC, VERSION = b"GDWC", 1
HELLO, CALL, REPLY, FAULT = 1, 2, 3, 4  # a message's kind
_KINDS = (HELLO, CALL, REPLY, FAULT)
_HEAD = struct.Struct("<4sBBHQII")  # magic, version, kind, 0, sequence, meta bytes, buffers
_GREETING = struct.Struct("<4sBB2x16s")  # magic, version, keyed, the sender's nonce
TAG_BYTES = 16
POLY_FROM = 16384  # messages of this many bytes or more are tagged by Poly1305, smaller ones by BLAKE2b
MAX_META = 1024 * 1024  # a message's meta (the record less its arrays' bytes)
MAX_BUFFERS = 256
INLINE = 256  # bytes below this stay in the meta
ALIGN = 16  # every buffer starts on this boundary in the message (the receiver's arrays are aligned)
_BUFFER = 1  # msgpack ext code: "the i-th buffer"
_UP, _DOWN = 0, 1  # directions: caller -> server, server -> caller


CONNECT_TIMEOUT = 10.0  # seconds a worker waits for a shard's channel to answer before merging by Pyro4
KEEPALIVE = (60, 10, 6)  # a served connection's TCP keepalive: idle seconds, interval, probes (a vanished peer)


class LinkBroken(ConnectionError):
    """The channel's connection failed: closed, timed out, or a message that is not the protocol's
    (unsigned, wrongly signed, out of sequence, over the size limit)."""


class LinkClosed(LinkBroken):
    """The other end closed the connection between messages."""


_AVAILABLE = []


def available():
    """Whether this process can run the channel: ``cryptography``'s Poly1305 is there and this
    OpenSSL has it (checked once)."""
    if not _AVAILABLE:
        try:
            _AVAILABLE.append(Poly1305 is not None and len(Poly1305.generate_tag(bytes(32), b"")) == TAG_BYTES)
        except Exception:  # noqa: BLE001 - an OpenSSL without Poly1305 (FIPS builds): no channel
            _AVAILABLE.append(False)
    return _AVAILABLE[0]


def _pad(n):
    return -n % ALIGN


class _Seal:
    """The tags of one connection's messages (no key: none)."""

    def __init__(self, key, server_nonce, caller_nonce):
        self.key = key and hashlib.blake2b(b"gensim_distw2v channel key" + key).digest()  # 64 bytes, BLAKE2b's key
        self.salt = server_nonce + caller_nonce

    def tag(self, direction, seq, parts, size):
        """The tag of a message of ``size`` bytes, ``parts`` (no key: empty)."""
        if not self.key:
            return b""
        prefix = self.salt + bytes((direction,)) + seq.to_bytes(8, "little")
        if size < POLY_FROM:
            mac = hashlib.blake2b(prefix, key=self.key, digest_size=TAG_BYTES)
        else:
            mac = Poly1305(hashlib.blake2b(prefix, key=self.key, digest_size=32, person=b"poly1305 key").digest())
        for part in parts:
            mac.update(part)
        return mac.digest() if size < POLY_FROM else mac.finalize()


_LEAVES = frozenset((int, float, str, bool, type(None)))
_BYTES = frozenset((bytes, bytearray, memoryview))
_ZEROS = memoryview(bytes(ALIGN))


def _take_out(value, buffers):
    """``value`` (plain data) with every bytes-like of :data:`INLINE` bytes or more replaced by a
    reference to ``buffers`` (where it is appended, uncopied)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _LEAVES else _take_out(v, buffers) for k, v in value.items()}
    if kind in _BYTES:
        view = memoryview(value).cast("B") if kind is not memoryview or value.format != "B" else value
        if view.nbytes >= INLINE:
            buffers.append(view)
            return msgpack.ExtType(_BUFFER, struct.pack("<I", len(buffers) - 1))
        return value
    if kind is list or kind is tuple:
        return [v if type(v) in _LEAVES else _take_out(v, buffers) for v in value]
    return value


def _send(sock, seal, direction, seq, kind, body, limit):
    """Send one message; returns its bytes."""
    return _send_all(sock, _frame(seal, direction, seq, kind, body, limit))


def _frame(seal, direction, seq, kind, body, limit):
    """One message's parts, tag last; ValueError (nothing sent) if it exceeds what a receiver takes."""
    buffers = []
    meta = msgpack.packb(_take_out(body, buffers), use_bin_type=True)
    lengths = struct.pack(f"<{len(buffers)}Q", *(b.nbytes for b in buffers))
    head = _HEAD.pack(MAGIC, VERSION, kind, 0, seq, len(meta), len(buffers))
    parts = [head, lengths, meta, _ZEROS[:_pad(len(meta))]]
    for buf in buffers:
        parts += [buf, _ZEROS[:_pad(buf.nbytes)]]
    parts = [p for p in parts if len(p)]
    size = sum(memoryview(p).nbytes for p in parts)
    if size - _HEAD.size - len(lengths) > limit or len(meta) > MAX_META or len(buffers) > MAX_BUFFERS:
        raise ValueError(f"a channel message of {size} bytes ({len(meta)} of meta, {len(buffers)} buffers) is over "
                         f"what a receiver takes ({limit} bytes, {MAX_META} of meta, {MAX_BUFFERS} buffers)")
    parts.append(seal.tag(direction, seq, parts, size))
    return parts


def _send_all(sock, parts):
    views = [memoryview(p) for p in parts if len(p)]
    total = sum(v.nbytes for v in views)
    while views:
        sent = sock.sendmsg(views[:512])
        while sent:
            if sent >= views[0].nbytes:
                sent -= views.pop(0).nbytes
            else:
                views[0], sent = views[0][sent:], 0
    return total


def _read(sock, view):
    while view.nbytes:
        got = sock.recv_into(view)
        if not got:
            raise LinkClosed("the connection was closed")
        view = view[got:]


def _recv(sock, seal, direction, seq, limit):
    """Read one message (its size checked before its body is read, its tag and sequence before it is
    decoded); returns ``(kind, body, bytes)``."""
    head = bytearray(_HEAD.size)
    _read(sock, memoryview(head))
    magic, version, kind, _zero, got_seq, meta_len, count = _HEAD.unpack(head)
    if magic != MAGIC or version != VERSION or kind not in _KINDS:
        raise LinkBroken(f"not a message of this channel (magic {bytes(magic)!r}, version {version}, kind {kind})")
    if got_seq != seq:
        raise LinkBroken(f"message {got_seq} where {seq} was due (replayed or reordered)")
    if meta_len > MAX_META or count > MAX_BUFFERS:
        raise LinkBroken(f"a message of {meta_len} bytes of meta and {count} buffers (at most {MAX_META} and "
                         f"{MAX_BUFFERS})")
    lengths = bytearray(8 * count)
    _read(sock, memoryview(lengths))
    sizes = struct.unpack(f"<{count}Q", lengths)
    spans, at = [], meta_len + _pad(meta_len)
    for size in sizes:
        spans.append((at, at + size))
        at += size + _pad(size)
    if at > limit:
        raise LinkBroken(f"a message of {at} bytes, over this connection's limit of {limit}")
    tag_bytes = TAG_BYTES if seal.key else 0
    body = np.empty(at + tag_bytes, dtype=np.uint8)
    view = memoryview(body)
    _read(sock, view)
    if seal.key:
        parts = [head] + ([lengths] if count else []) + ([view[:at]] if at else [])
        if not hmac.compare_digest(seal.tag(direction, seq, parts, _HEAD.size + len(lengths) + at), view[at:]):
            raise LinkBroken("a message whose tag does not verify: not signed with the cluster's key")
    view = view[:at].toreadonly()
    buffers = [view[lo:hi] for lo, hi in spans]

    def ext(code, data):
        if code != _BUFFER or len(data) != 4 or struct.unpack("<I", data)[0] >= len(buffers):
            raise ValueError(f"a reference to buffer {data!r} (code {code}) of {len(buffers)}")
        return buffers[struct.unpack("<I", data)[0]]
    try:
        decoded = msgpack.unpackb(view[:meta_len], raw=False, ext_hook=ext, **MSGPACK_LIMITS)
    except (ValueError, TypeError, msgpack.UnpackException) as err:
        raise LinkBroken(f"a malformed message: {err}") from None
    return kind, decoded, _HEAD.size + len(lengths) + at + tag_bytes


def _greet(sock, key):
    """Exchange nonces (both ends at once); returns the other end's."""
    nonce = secrets.token_bytes(16)
    sock.sendall(_GREETING.pack(MAGIC, VERSION, bool(key), nonce))
    theirs = bytearray(_GREETING.size)
    _read(sock, memoryview(theirs))
    magic, version, keyed, other = _GREETING.unpack(theirs)
    if magic != MAGIC or version != VERSION:
        raise LinkBroken(f"not this channel's greeting (magic {bytes(magic)!r}, version {version})")
    if bool(keyed) != bool(key):
        raise LinkBroken("one end has the cluster's HMAC key and the other has not: give both the same key")
    return nonce, other


def _fault_body(err):
    if isinstance(err, errors.ClusterFault):
        return {"fault": errors.to_wire(err)}
    return {"error": type(err).__name__, "message": str(err)[:errors.MAX_MESSAGE]}


def _raise(body):
    if isinstance(body, dict) and "fault" in body:
        raise errors.from_wire(body["fault"])
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(body, dict) and body.get("error") in ("ValueError", "TypeError"):
        raise ValueError(str(message))
    raise RuntimeError(f"the server failed: {body.get('error') if isinstance(body, dict) else body}: {message}")


def _keepalive(sock):
    """TCP keepalive on a served connection: a peer that vanished without closing is found (its
    thread and slot freed) in minutes, not never."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in zip(("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT"), KEEPALIVE):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    except OSError:
        pass


class _Conn:
    """A served connection, as :class:`~gensim_distw2v.io.gate.Gate` knows connections (``.sock``)."""

    def __init__(self, sock):
        self.sock = sock


class ChannelServer:
    """Serves the calls ``ops`` of an endpoint on a socket of its own (see the module's docstring).

    Parameters
    ----------
    serve : callable
        ``serve(op, msg)``: the endpoint's call (:meth:`gensim_distw2v.io.endpoints.Endpoint.call`).
    ops : iterable of str
        The calls served here; others are refused.
    host : str
        Address to bind; anything but loopback needs ``hmac_key``.
    port : int
        Port to bind (0: any free port).
    hmac_key : bytes, optional
    limits : gensim_distw2v.io.gate.Limits, optional
        What a connection may do before its hello has shown the key.
    max_message : int
        The largest message read, in bytes.
    """

    def __init__(self, serve, ops, host="127.0.0.1", port=0, hmac_key=None, limits=None, max_message=None):
        if not available():
            raise RuntimeError("the bulk channel needs the 'cryptography' package (pip install cryptography)")
        self.key = as_key(hmac_key)
        check_bind(host, self.key)
        self.serve_call, self.ops = serve, frozenset(ops)
        self.max_message = max_message or MAX_MESSAGE_SIZE
        self.gate = Gate(limits or Limits())
        self.sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                         backlog=128)
        self.address = self.sock.getsockname()[:2]
        self.lock = threading.Lock()
        self.conns = set()
        self.closed = False
        try:
            threading.Thread(target=self._accept, name="channel-accept", daemon=True).start()
        except BaseException:
            self.sock.close()
            raise

    def _accept(self):
        while not self.closed:
            try:
                sock, addr = self.sock.accept()
            except OSError as err:
                if self.closed:
                    return
                logger.warning("the channel could not accept a connection: %s", err)
                time.sleep(0.05)  # (out of file descriptors: no busy loop)
                continue
            conn, peer = _Conn(sock), addr[0]
            try:
                admitted = self.gate.admit(conn, peer)
            except Exception as err:  # noqa: BLE001 - the acceptor serves on whatever one connection did
                logger.warning("the channel could not admit a connection from %s: %s", peer, err)
                sock.close()
                continue
            if not admitted:
                sock.close()
                continue
            try:
                with self.lock:
                    if self.closed:
                        raise LinkClosed("the channel is closed")
                    self.conns.add(conn)
                threading.Thread(target=self._connection, args=(conn, peer), name="channel-serve",
                                 daemon=True).start()
            except Exception as err:  # noqa: BLE001 - (no thread to serve it: refused, the acceptor goes on)
                if not self.closed:
                    logger.warning("the channel could not serve a connection from %s: %s", peer, err)
                with self.lock:
                    self.conns.discard(conn)
                self.gate.handshaken(conn)
                self.gate.gone(peer)
                sock.close()

    def _connection(self, conn, peer):
        sock, seq = conn.sock, 1
        try:
            try:
                began = time.thread_time()
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                mine, theirs = _greet(sock, self.key)
                seal = _Seal(self.key, mine, theirs)
                _recv(sock, seal, _UP, 0, self.gate.limits.max_handshake_bytes)
                _send(sock, seal, _DOWN, 0, HELLO, None, self.max_message)
                # a cost per connection (a worker's, once a session), counted apart from the merges
                meter.CALLS.record("channel_hello", time.thread_time() - began)
            except (OSError, LinkBroken) as err:
                self.gate.refuse(f"no channel hello ({type(err).__name__}: {err})", peer)
                return
            finally:
                self.gate.handshaken(conn)
            sock.settimeout(None)
            _keepalive(sock)
            while not self.closed and self._one(sock, seal, seq):
                seq += 1
        except (OSError, LinkBroken) as err:
            if not self.closed:
                logger.info("closed a channel connection from %s: %s", peer, err)
        finally:
            self.gate.handshaken(conn)  # (idempotent)
            self.gate.gone(peer)
            with self.lock:
                self.conns.discard(conn)
            sock.close()

    @meter.whole_calls  # each call's whole CPU (reading, verifying, decoding, handling, sending)
    def _one(self, sock, seal, seq):
        """Serve one call; False when the caller closed the connection between calls."""
        try:
            kind, body, got = _recv(sock, seal, _UP, seq, self.max_message)
        except LinkClosed:
            return False
        try:
            if kind != CALL or not isinstance(body, dict) or set(body) != {"op", "msg"}:
                raise errors.BadRequest("a channel message that is not a call ({'op', 'msg'})")
            op = body["op"]
            if op not in self.ops:
                raise errors.BadRequest(f"the channel serves {sorted(self.ops)}, not {str(op)[:80]!r}: other calls "
                                        f"go by Pyro4")
            parts = _frame(seal, _DOWN, seq, REPLY, self.serve_call(op, body["msg"]), self.max_message)
        except Exception as err:  # noqa: BLE001 - the caller gets the error, the server serves on
            if not isinstance(err, ValueError):
                logger.exception("a channel call failed")
            parts = _frame(seal, _DOWN, seq, FAULT, _fault_body(err), self.max_message)
        sent = _send_all(sock, parts)
        meter.TRAFFIC.add(sent, got)
        return True

    def close(self):
        """Stop accepting and close every connection."""
        with self.lock:
            self.closed = True
            conns = list(self.conns)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # (wakes the acceptor: a close alone does not)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        for conn in conns:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ChannelLink(calls.Caller):
    """A caller's link to a :class:`ChannelServer` (one thread at a time): ``link.call(op, request)``
    as :class:`gensim_distw2v.io.endpoints.Link`'s, for the calls the server serves here.

    Parameters
    ----------
    address : (str, int)
    table : gensim_distw2v.protocol.calls.Table
    hmac_key : bytes or str, optional
    timeout : float, optional
        Seconds each read or write of a call may wait (None: no limit); connecting waits at most
        :data:`CONNECT_TIMEOUT`.
    """

    def __init__(self, address, table, hmac_key=None, timeout=None):
        self.address, self.key, self.timeout = tuple(address), as_key(hmac_key), timeout
        self.max_message = MAX_MESSAGE_SIZE
        self.sock, self.seal, self.seq = None, None, 0
        self.sent, self.pending = 0, None
        super().__init__(table, self._call)

    @contextlib.contextmanager
    def _in_step(self):
        """Connecting, or a send or a read of a call: if it fails, the connection is out of step with
        the server and is released (the next call connects anew); a broken one raises :class:`LinkBroken`."""
        try:
            yield
        except (OSError, LinkBroken) as err:
            self.release()
            raise LinkBroken(f"channel to {self.address[0]}:{self.address[1]}: {type(err).__name__}: {err}") from None
        except BaseException:
            self.release()
            raise

    def connect(self):
        """Connect and say hello now (a call connects if need be); raises :class:`LinkBroken` if it cannot."""
        timeout = CONNECT_TIMEOUT if self.timeout is None else min(self.timeout, CONNECT_TIMEOUT)
        with self._in_step():
            self.sock = sock = socket.create_connection(self.address, timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            mine, theirs = _greet(sock, self.key)
            seal = _Seal(self.key, theirs, mine)
            _send(sock, seal, _UP, 0, HELLO, None, self.max_message)
            _recv(sock, seal, _DOWN, 0, 4096)
            sock.settimeout(self.timeout)
        self.seal, self.seq = seal, 1

    def start(self, op, request):
        """Send call ``op`` with its request record now, and return at once; :meth:`result` reads
        its reply (one call in flight on a link): a caller of several shards sends every request
        before it reads any reply, so the shards work at once without a thread per shard."""
        spec = self.table.calls[op]
        if type(request) is not spec.request:
            raise TypeError(f"{op} takes one {spec.request.__name__}")
        self._send_call(op, request.to_wire())
        self.pending = op

    def ready(self, timeout=0.0):
        """Whether the reply to the call :meth:`start` sent has begun to arrive (:meth:`result` then reads
        it), waiting at most ``timeout`` seconds; True with no connection (``result`` then raises)."""
        if self.sock is None:
            return True
        poller = select.poll()  # (not select.select: it fails on descriptors above 1023)
        poller.register(self.sock, select.POLLIN)
        return bool(poller.poll(max(0.0, timeout) * 1000))

    def result(self):
        """The reply to the call :meth:`start` sent, checked (as :meth:`call` returns it)."""
        op, self.pending = self.pending, None
        return self.table.calls[op].check_reply(self._read_reply())

    def _call(self, op, msg):
        self._send_call(op, msg)
        return self._read_reply()

    def _send_call(self, op, msg):
        if self.sock is None:
            self.connect()
        try:
            parts = _frame(self.seal, _UP, self.seq, CALL, {"op": op, "msg": msg}, self.max_message)
        except (TypeError, ValueError) as err:  # (nothing sent: the connection stays in step)
            raise ValueError(f"{op}: {err}") from None
        self.seq += 1
        with self._in_step():
            self.sent = _send_all(self.sock, parts)

    def _read_reply(self):
        with self._in_step():
            if self.sock is None:
                raise LinkBroken("the connection was released with a call in flight")
            kind, body, got = _recv(self.sock, self.seal, _DOWN, self.seq - 1, self.max_message)
        meter.TRAFFIC.add(self.sent, got)
        if kind == FAULT:
            _raise(body)
        if kind != REPLY:
            self.release()
            raise LinkBroken(f"channel to {self.address[0]}:{self.address[1]}: a message of kind {kind} for a reply")
        return body

    def release(self):
        """Close the connection (harmless if it is closed); the next call connects again."""
        sock, self.sock = self.sock, None
        if sock is not None:
            for end in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):  # (wakes a thread reading it)
                try:
                    end()
                except OSError:
                    pass
