"""A live, read-only HTTP status page for the dispatcher.

:class:`StatusPage` serves two things from a daemon thread:

* ``GET /``: one self-contained HTML page (inline CSS and script, no external resources) that polls
  ``/status.json`` every second and draws the session, a table of the nodes and two small charts
  (words per second and loss against time) as inline SVG;
* ``GET /status.json``: the snapshot, as JSON, at most :data:`SNAPSHOT_SECONDS` old (one snapshot
  a second serves every request: a flood of requests costs the dispatcher nothing more).

The page knows nothing of Pyro4 or of the dispatcher: it is given a ``snapshot`` callable that
returns a JSON-able dict (the schema is :data:`SNAPSHOT_SCHEMA`) and calls it at most once a
:data:`SNAPSHOT_SECONDS` for ``/status.json``. The page has no authentication; it shows session
progress and resource use, no secrets, and only reads. It binds to loopback unless told otherwise,
and warns when it is not.

Hardening: only ``GET`` and ``HEAD`` (anything else is 405), no request bodies, a ``Host`` header
that names the page (an address, ``localhost`` or a name it was given: a page a browser reached
through another name, DNS rebinding, gets 403), a socket timeout per read and a deadline per
connection (a client that trickles its request a byte at a time cannot hold a slot either),
http.server's limits on the request line and
headers, ``nosniff``, a Content-Security-Policy that allows inline script and style and fetches
from the page's own origin only, and the HTML inserts every string from the snapshot as text,
never as markup (node names come from the network). A snapshot that raises gives a 500 with a
short JSON error; the server serves on.

Example::

    page = StatusPage(dispatcher_snapshot, host="127.0.0.1", port=8080).start()
    print(page.url)
    ...
    page.stop()
"""
import http.server
import importlib.resources
import ipaddress
import json
import logging
import math
import socket
import socketserver
import threading
import time
from urllib.parse import urlsplit

__all__ = ["StatusPage", "SNAPSHOT_SCHEMA"]

logger = logging.getLogger(__name__)

SNAPSHOT_SCHEMA = """\
{
  "time": 1732530000.0,                 # unix seconds at the dispatcher
  "dispatcher": {"uri": "PYRO:...@127.0.0.1:1234", "versions": {"gensim_distw2v": "0.1.0", "gensim": "4.4.0"}},
  "session": null | {
      "id": "ab12cd34", "state": "running",       # running / uploading / closed
      "workers": 2, "shards": 2, "epochs": 5, "epoch": 1,   # epoch: the one being trained (0-based)
      "progress": 0.42,                          # 0..1 of all epochs' words
      "eta_seconds": 12.5 or null, "elapsed": 8.1,
      "words": 1234567,                          # effective words trained so far
      "words_per_second": 150000.0,              # recent rate
      "loss": 1234.5 or null, "merges": 57},     # loss: summed over the session (compute_loss)
  "nodes": [ {"name": "gensim_distw2v.worker.3f9a1b2c4d5e", "role": "worker",   # worker / shard / dispatcher
              "words": 600000, "words_per_second": 75000.0,
              "cpu": {"kernel": 7.9, "merge": 0.8, "other": 0.2},   # CPU seconds this session
              "rss": 123456789, "peak_rss": 150000000,              # bytes
              "bytes_sent": 1000000, "bytes_received": 2000000,
              "last_heard": 0.4,                                    # seconds ago (0 for the dispatcher)
              "threads": 1 or null} ],
  "history": [ {"t": 0.0, "words": 0, "words_per_second": 0.0, "loss": null}, ... ]  # loss: per word, since the point before
}
"""
"""The snapshot's schema, as the page reads it (``history``: ``t`` in seconds since the session
started, at most about 600 points)."""

# seconds a connection may wait for each read of its request (and each write of the answer)
SOCKET_TIMEOUT = 10.0
# seconds a connection may take in all, its request and the answer: then it is closed
REQUEST_SECONDS = 10.0
# seconds a snapshot serves every request of /status.json (and a failed one is not retried)
SNAPSHOT_SECONDS = 1.0
MAX_CONNECTIONS = 32  # served at once; more are closed unread
# bytes of a refused request's body read (and dropped) so that the refusal reaches the client
MAX_DISCARD = 65536

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                           "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'")

# the page itself: one self-contained HTML file beside this module (inline CSS and script)
_PAGE_BYTES = importlib.resources.files(__package__).joinpath("statuspage.html").read_bytes()


def _finite(obj):
    """``obj`` with every float that is not finite (NaN, infinity) replaced by None, since JSON has none."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json_default(obj):
    """JSON for numpy scalars and other objects with ``item()``; anything else is an error."""
    item = getattr(obj, "item", None)
    if callable(item):
        value = item()
        if isinstance(value, (int, float, str, bool)) or value is None:
            return _finite(value)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _is_address(host):
    """Whether ``host`` is an IP address (not a name)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_loopback(host):
    """Whether ``host`` (a name or an address) is loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Handler(http.server.BaseHTTPRequestHandler):
    """One request: ``GET``/``HEAD`` of ``/`` or ``/status.json``; everything else is refused."""

    server_version = "gensim_distw2v-status"
    sys_version = ""
    timeout = SOCKET_TIMEOUT            # StreamRequestHandler.setup sets it on the connection
    protocol_version = "HTTP/1.0"       # one request per connection: no idle keep-alive threads
    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(code)d %(message)s\n"

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
        logger.debug("status page %s: " + format, self.address_string(), *args)

    def end_headers(self):
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def parse_request(self):
        """http.server's parsing, then: only GET and HEAD, and no body."""
        if not super().parse_request():
            return False
        if self.command not in ("GET", "HEAD"):
            self._discard_body()
            self._send(405, {"error": "method not allowed"}, extra={"Allow": "GET, HEAD"})
            return False
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or (length is not None and length.strip() != "0"):
            self._discard_body()
            self._send(413, {"error": "request bodies are not accepted"})
            return False
        if not self.server.names_me(self.headers.get("Host")):
            self._send(403, {"error": "the Host header must name this page: its address, localhost, or a name "
                                      "it was given (the dispatcher's --status-name)"})
            return False
        return True

    def setup(self):
        super().setup()
        # the whole connection's deadline: a read timeout alone lets a byte every few seconds hold a slot
        self._deadline = threading.Timer(REQUEST_SECONDS, self._expire)
        self._deadline.daemon = True
        self._deadline.start()

    def _expire(self):
        try:
            self.connection.shutdown(socket.SHUT_RDWR)  # (wakes the handler's blocked read or write)
        except OSError:
            pass

    def finish(self):
        self._deadline.cancel()
        super().finish()

    def _discard_body(self):
        """Read and drop a small body (up to ``MAX_DISCARD`` bytes) before refusing the request: a
        socket closed with unread data resets the connection, and the client may lose the answer."""
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return
        if 0 < length <= MAX_DISCARD and not self.headers.get("Transfer-Encoding"):
            try:
                self.rfile.read(length)
            except OSError:
                pass

    def _send(self, code, payload, content_type="application/json", extra=None):
        if isinstance(payload, bytes):
            body = payload
        else:
            body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.close_connection = True
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            self._send(200, _PAGE_BYTES, "text/html; charset=utf-8")
        elif path == "/status.json":
            body = self.server.status_json()
            if body is None:
                self._send(500, {"error": "the status snapshot failed; see the dispatcher's log"})
            else:
                self._send(200, body)
        else:
            self._send(404, {"error": "not found"})

    do_HEAD = do_GET  # noqa: N815


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 16

    def __init__(self, address, snapshot, family=socket.AF_INET, names=()):
        self.address_family = family
        self.snapshot = snapshot
        self.names = {name.lower().rstrip(".") for name in names} | {"localhost"}
        self._failing = False
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._cache_lock = threading.Lock()
        self._cached, self._cached_at = None, None
        super().__init__(address, _Handler)

    def names_me(self, host):
        """Whether a request's ``Host`` header names this page: an IP address (what a browser that
        was given one sends: no DNS rebinding), ``localhost`` or one of the names it was given, with
        this page's port if any."""
        if not host:
            return False
        host = host.strip().lower()
        if host.startswith("["):  # "[v6]" or "[v6]:port"
            end = host.find("]")
            rest = host[end + 1:] if end > 0 else "?"
            if end < 0 or (rest and not rest.startswith(":")):
                return False
            name, port = host[1:end], rest[1:]
        elif host.count(":") == 1:
            name, port = host.split(":")
        else:  # a name, an IPv4 address, or a bare IPv6 address
            name, port = host, ""
        if port and port != str(self.server_port):
            return False
        name = name.rstrip(".")
        return name in self.names or _is_address(name)

    def process_request(self, request, client_address):
        """Serve on a thread of its own, at most ``MAX_CONNECTIONS`` at once: beyond them a
        connection is closed unread (a flood cannot grow the dispatcher's threads)."""
        if not self._slots.acquire(blocking=False):
            logger.debug("status page: %i connections open, %s closed unread", MAX_CONNECTIONS, client_address)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address):
        # a client that went away or stalled (socket timeout): not worth socketserver's traceback on stderr
        logger.debug("status page: error serving %s", client_address, exc_info=True)

    def server_bind(self):
        # HTTPServer.server_bind looks the host name up (socket.getfqdn), which can hang offline
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def status_json(self):
        """The snapshot as JSON bytes, or None when it failed, at most :data:`SNAPSHOT_SECONDS` old:
        requests meanwhile get the same (one builds it, the others wait for it)."""
        with self._cache_lock:
            now = time.monotonic()
            if self._cached_at is None or now - self._cached_at >= SNAPSHOT_SECONDS:
                self._cached, self._cached_at = self._fresh_json(), now
            return self._cached

    def _fresh_json(self):
        """The snapshot as JSON bytes, or None when it failed (logged: the first failure in a row with
        its traceback at WARNING, the next ones at DEBUG)."""
        try:
            snap = self.snapshot()
            body = json.dumps(_finite(snap), default=_json_default, allow_nan=False,
                              separators=(",", ":")).encode("utf-8")
        except Exception:
            if not self._failing:
                logger.warning("status page: the status snapshot failed", exc_info=True)
            else:
                logger.debug("status page: the status snapshot failed again", exc_info=True)
            self._failing = True
            return None
        if self._failing:
            logger.info("status page: the status snapshot works again")
        self._failing = False
        return body


class StatusPage:
    """A read-only HTTP status page served from a daemon thread.

    Parameters
    ----------
    snapshot : callable
        Called with no arguments for every request of ``/status.json``; returns a JSON-able dict
        shaped as :data:`SNAPSHOT_SCHEMA`. It runs in the server's request threads, so it must be
        thread-safe. If it raises, the request gets a 500 and the page serves on.
    host : str, optional
        Address to bind. Loopback by default; any other address logs a warning, since the page has
        no authentication (it shows session progress only, no secrets).
    port : int, optional
        Port to bind; 0 (the default) picks a free one (see :attr:`port` after :meth:`start`).
    names : iterable of str, optional
        Host names the page may be reached by besides its addresses and ``localhost`` (a request
        whose ``Host`` header names anything else gets 403: DNS rebinding).

    Attributes
    ----------
    host : str
        The address bound.
    port : int or None
        The port bound, once started.
    url : str or None
        ``http://host:port/``, once started.
    """

    def __init__(self, snapshot, host="127.0.0.1", port=0, names=()):
        if not callable(snapshot):
            raise TypeError(f"snapshot must be callable, got {type(snapshot).__name__}")
        self.snapshot = snapshot
        self.names = tuple(names)
        self.host = host
        self.port = None
        self.url = None
        self._requested_port = int(port)
        self._server = None
        self._thread = None

    def __repr__(self):
        return f"StatusPage({self.url or 'not started'})"

    def start(self):
        """Bind and serve from a daemon thread.

        Returns
        -------
        StatusPage
            self, so that ``page = StatusPage(f).start()`` works.

        Raises
        ------
        OSError
            If the address cannot be bound (in use, not local).
        RuntimeError
            If it is already started.
        """
        if self._server is not None:
            raise RuntimeError("the status page is already started")
        host = self.host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        names = self.names if _is_loopback(host) or _is_address(host) else self.names + (host,)
        server = _Server((host, self._requested_port), self.snapshot, family, names)
        self._server = server
        self.port = server.server_address[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        self.url = f"http://{shown}:{self.port}/"
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"statuspage-{self.port}", daemon=True)
        self._thread.start()
        if not _is_loopback(host):
            logger.warning("status page at %s is not on loopback and has no authentication: anyone who "
                           "can reach it sees the session's progress (no secrets)", self.url)
        else:
            logger.info("status page at %s", self.url)
        return self

    def stop(self):
        """Stop serving and close the socket (requests in progress finish on their own threads).
        Stopping a page that is not running does nothing."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    def __enter__(self):
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
