"""A live, read-only HTTP status page for the dispatcher.

:class:`StatusPage` serves two things from a daemon thread:

* ``GET /``: one self-contained HTML page (inline CSS and script, no external resources) that polls
  ``/status.json`` every second and draws the session, a table of the nodes and two small charts
  (words per second and loss against time) as inline SVG;
* ``GET /status.json``: the snapshot, as JSON, fresh on every request.

The page knows nothing of Pyro4 or of the dispatcher: it is given a ``snapshot`` callable that
returns a JSON-able dict (the schema is :data:`SNAPSHOT_SCHEMA`) and calls it once per request for
``/status.json``. The page has no authentication; it shows session progress and resource use, no
secrets, and only reads. It binds to loopback unless told otherwise, and warns when it is not.

Hardening: only ``GET`` and ``HEAD`` (anything else is 405), no request bodies, a socket timeout per
connection (a slow client cannot hold a thread), http.server's limits on the request line and
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
import ipaddress
import json
import logging
import math
import socket
import socketserver
import threading
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

# seconds a connection may take to send its request (and to take the answer)
SOCKET_TIMEOUT = 10.0
MAX_CONNECTIONS = 32  # served at once; more are closed unread
# bytes of a refused request's body read (and dropped) so that the refusal reaches the client
MAX_DISCARD = 65536

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                           "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'")

_PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gensim_distw2v status</title>
<style>
:root { --fg: #1b1f24; --muted: #5b6470; --line: #d8dde3; --bg: #f5f7f9; --card: #ffffff;
        --accent: #1f6feb; --accent2: #bf3989; --warn: #b35900; }
* { box-sizing: border-box; }
body { margin: 0; padding: 18px 24px; background: var(--bg); color: var(--fg);
       font: 15px/1.4 "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
header { display: flex; align-items: baseline; gap: 18px; flex-wrap: wrap; margin-bottom: 14px; }
h1 { font-size: 24px; margin: 0; }
h2 { font-size: 16px; margin: 0 0 10px 0; color: var(--muted); font-weight: 600; }
.muted { color: var(--muted); }
.small { font-size: 12px; }
#conn { margin-left: auto; font-size: 13px; }
#conn.bad { color: var(--warn); font-weight: 600; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px;
        margin-bottom: 14px; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px 18px; }
.stat .label { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.stat .value { font-size: 20px; font-weight: 600; font-variant-numeric: tabular-nums; }
.bar { height: 14px; background: #e6eaef; border-radius: 7px; overflow: hidden; margin: 12px 0 4px 0; }
.bar > div { height: 100%; width: 0; background: var(--accent); transition: width .4s; }
#nosession { font-size: 20px; font-weight: 600; color: var(--muted); }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
.tablewrap { overflow-x: auto; }
th, td { padding: 6px 9px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { font-size: 12px; color: var(--muted); font-weight: 600; text-transform: uppercase; vertical-align: bottom; }
th.group { text-align: center; border-bottom: 2px solid var(--line); }
th.l, td.l { text-align: left; }
td.name { text-align: left; }
.short, .full { overflow: hidden; text-overflow: ellipsis; }
.short { font: 700 24px/1.2 "DejaVu Sans Mono", "Liberation Mono", monospace; letter-spacing: .02em;
         max-width: 24ch; }
.full { font: 12px/1.2 "DejaVu Sans Mono", "Liberation Mono", monospace; color: var(--muted); max-width: 56ch; }
tr.stale td { color: var(--warn); }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; }
.charts .card { margin-bottom: 0; }
svg { display: block; width: 100%; height: auto; }
svg .axis { stroke: #9aa4af; stroke-width: 1; }
svg .grid { stroke: #e6eaef; stroke-width: 1; }
svg text { font: 11px "DejaVu Sans", Arial, sans-serif; fill: #5b6470; }
svg .series { fill: none; stroke-width: 2; stroke-linejoin: round; }
footer { margin-top: 14px; font-size: 12px; color: var(--muted); }
</style>
</head>
<body>
<header>
  <h1>gensim_distw2v status</h1>
  <span id="dispatcher" class="muted small"></span>
  <span id="conn" class="muted">connecting&hellip;</span>
</header>

<section class="card" id="sessioncard">
  <h2>Session</h2>
  <div id="nosession">no session</div>
  <div id="session" hidden>
    <div class="stats" id="stats"></div>
    <div class="bar"><div id="progressbar"></div></div>
    <div class="small muted" id="progresstext"></div>
  </div>
</section>

<section class="card">
  <h2>Nodes</h2>
  <div class="tablewrap"><table>
    <thead>
      <tr>
        <th class="l" rowspan="2">node</th><th class="l" rowspan="2">role</th>
        <th rowspan="2">words</th><th rowspan="2">words/s</th>
        <th class="group" colspan="3">CPU seconds</th><th class="group" colspan="2">memory MB</th>
        <th class="group" colspan="2">network MB</th>
        <th rowspan="2">heard<br>(s ago)</th><th rowspan="2">threads</th>
      </tr>
      <tr><th>kernel</th><th>merge</th><th>other</th><th>RSS</th><th>peak</th><th>sent</th><th>recv</th></tr>
    </thead>
    <tbody id="nodes"></tbody>
  </table></div>
  <div id="nonodes" class="muted" hidden>no nodes</div>
</section>

<div class="charts">
  <section class="card"><h2>Words per second</h2><div id="chart-wps"></div></section>
  <section class="card"><h2>Loss per word</h2><div id="chart-loss"></div></section>
</div>

<footer id="versions"></footer>
<svg id="svgns" hidden></svg>

<script>
"use strict";
(function () {
  var SVGNS = document.getElementById("svgns").namespaceURI;  // no URL in the page
  var POLL_MS = 1000;
  var STALE_SECONDS = 5;

  function $(id) { return document.getElementById(id); }

  function isNum(x) { return typeof x === "number" && isFinite(x); }

  function fmtInt(x) {
    return isNum(x) ? Math.round(x).toLocaleString("en-US") : "\u2014";
  }
  function fmtFixed(x, digits) {
    return isNum(x) ? x.toLocaleString("en-US", {minimumFractionDigits: digits, maximumFractionDigits: digits})
                    : "\u2014";
  }
  function fmtMB(bytes) { return isNum(bytes) ? fmtFixed(bytes / 1e6, 1) : "\u2014"; }
  function fmtDuration(s) {
    if (!isNum(s)) { return "\u2014"; }
    s = Math.max(0, s);
    if (s < 60) { return s.toFixed(1) + " s"; }
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
    var mm = (h > 0 && m < 10 ? "0" : "") + m, ss = (sec < 10 ? "0" : "") + sec;
    return (h > 0 ? h + ":" : "") + mm + ":" + ss;
  }
  function fmtShort(x) {
    if (!isNum(x)) { return "\u2014"; }
    var a = Math.abs(x);
    if (a >= 1e9) { return (x / 1e9).toPrecision(3) + "G"; }
    if (a >= 1e6) { return (x / 1e6).toPrecision(3) + "M"; }
    if (a >= 1e3) { return (x / 1e3).toPrecision(3) + "k"; }
    return String(Number(x.toPrecision(3)));
  }
  function str(x) { return (x === null || x === undefined) ? "\u2014" : String(x); }

  // Every string from the snapshot goes in with textContent: never as markup.
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) { e.setAttribute(k, String(attrs[k])); } }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function renderDispatcher(d) {
    var parts = [];
    if (d && d.uri) { parts.push("dispatcher " + String(d.uri)); }
    $("dispatcher").textContent = parts.join("");
    var v = (d && d.versions) || {}, vs = [];
    for (var k in v) { if (Object.prototype.hasOwnProperty.call(v, k)) { vs.push(String(k) + " " + String(v[k])); } }
    $("versions").textContent = vs.join(" \u00b7 ");
  }

  function stat(label, value) {
    var s = el("div", "stat");
    s.appendChild(el("div", "label", label));
    s.appendChild(el("div", "value", value));
    return s;
  }

  function renderSession(s) {
    if (!s) {
      $("nosession").hidden = false;
      $("session").hidden = true;
      return;
    }
    $("nosession").hidden = true;
    $("session").hidden = false;
    var epoch = isNum(s.epoch) && isNum(s.epochs)
      ? (Math.min(s.epoch + 1, s.epochs) + " of " + s.epochs) : "\u2014";
    var stats = $("stats");
    stats.replaceChildren(
      stat("session", str(s.id).slice(0, 12)),
      stat("state", str(s.state)),
      stat("epoch", epoch),
      stat("workers / shards", str(s.workers) + " / " + str(s.shards)),
      stat("words", fmtInt(s.words)),
      stat("words/s", fmtInt(s.words_per_second)),
      stat("loss", isNum(s.loss) ? fmtFixed(s.loss, 1) : "\u2014"),
      stat("merges", fmtInt(s.merges)),
      stat("elapsed", fmtDuration(s.elapsed)),
      stat("ETA", fmtDuration(s.eta_seconds))
    );
    var p = isNum(s.progress) ? Math.min(1, Math.max(0, s.progress)) : 0;
    $("progressbar").style.width = (p * 100).toFixed(2) + "%";
    $("progresstext").textContent = (p * 100).toFixed(1) + " % of all epochs' words";
  }

  function shortName(name) {
    var n = String(name), i = n.lastIndexOf(".");
    return i >= 0 && i < n.length - 1 ? n.slice(i + 1) : n;
  }

  function renderNodes(nodes) {
    var body = $("nodes");
    var rows = [];
    (nodes || []).forEach(function (n) {
      var tr = el("tr");
      if (n.role !== "dispatcher" && isNum(n.last_heard) && n.last_heard > STALE_SECONDS) { tr.className = "stale"; }
      var name = el("td", "name");
      var full = str(n.name);
      var sn = el("div", "short", shortName(full)), fn = el("div", "full", full);
      sn.title = fn.title = full;
      name.appendChild(sn);
      name.appendChild(fn);
      tr.appendChild(name);
      tr.appendChild(el("td", "l", str(n.role)));
      var cpu = n.cpu || {};
      [fmtInt(n.words), fmtInt(n.words_per_second),
       fmtFixed(cpu.kernel, 1), fmtFixed(cpu.merge, 1), fmtFixed(cpu.other, 1),
       fmtMB(n.rss), fmtMB(n.peak_rss), fmtMB(n.bytes_sent), fmtMB(n.bytes_received),
       fmtFixed(n.last_heard, 1), str(n.threads)].forEach(function (v) { tr.appendChild(el("td", "", v)); });
      rows.push(tr);
    });
    body.replaceChildren.apply(body, rows);
    $("nonodes").hidden = rows.length > 0;
  }

  // A line chart of history[i][key] against history[i].t; points whose value is null break the line.
  function renderChart(target, history, key, color) {
    var W = 640, H = 200, L = 58, R = 12, T = 10, B = 26;
    var pts = [];
    (history || []).forEach(function (h) {
      if (h && isNum(h.t)) { pts.push([h.t, isNum(h[key]) ? h[key] : null]); }
    });
    var vals = pts.filter(function (p) { return p[1] !== null; });
    var svg = svgEl("svg", {viewBox: "0 0 " + W + " " + H, role: "img"});
    if (vals.length === 0) {
      svg.appendChild(svgEl("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, "no data yet"));
      target.replaceChildren(svg);
      return;
    }
    var t0 = pts[0][0], t1 = pts[pts.length - 1][0];
    if (t1 <= t0) { t1 = t0 + 1; }
    var ys = vals.map(function (p) { return p[1]; });
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (key === "words_per_second") { y0 = Math.min(0, y0); }
    if (y1 <= y0) { y1 = y0 + (Math.abs(y0) || 1); }
    function X(t) { return L + (t - t0) / (t1 - t0) * (W - L - R); }
    function Y(v) { return T + (1 - (v - y0) / (y1 - y0)) * (H - T - B); }
    for (var i = 0; i <= 4; i++) {
      var v = y0 + (y1 - y0) * i / 4, y = Y(v);
      svg.appendChild(svgEl("line", {x1: L, x2: W - R, y1: y, y2: y, "class": "grid"}));
      svg.appendChild(svgEl("text", {x: L - 6, y: y + 4, "text-anchor": "end"}, fmtShort(v)));
    }
    svg.appendChild(svgEl("line", {x1: L, x2: L, y1: T, y2: H - B, "class": "axis"}));
    svg.appendChild(svgEl("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, "class": "axis"}));
    svg.appendChild(svgEl("text", {x: L, y: H - 8, "text-anchor": "start"}, fmtDuration(t0)));
    svg.appendChild(svgEl("text", {x: W - R, y: H - 8, "text-anchor": "end"}, fmtDuration(t1)));
    var d = "", pen = false;
    pts.forEach(function (p) {
      if (p[1] === null) { pen = false; return; }
      d += (pen ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1);
      pen = true;
    });
    svg.appendChild(svgEl("path", {d: d, "class": "series", stroke: color}));
    if (vals.length === 1) {
      svg.appendChild(svgEl("circle", {cx: X(vals[0][0]), cy: Y(vals[0][1]), r: 3, fill: color}));
    }
    target.replaceChildren(svg);
  }

  function render(snap) {
    renderDispatcher(snap.dispatcher);
    renderSession(snap.session);
    renderNodes(snap.nodes);
    renderChart($("chart-wps"), snap.history, "words_per_second", "#1f6feb");
    renderChart($("chart-loss"), snap.history, "loss", "#bf3989");
  }

  function setConn(text, bad) {
    var c = $("conn");
    c.textContent = text;
    c.className = bad ? "bad" : "muted";
  }

  function poll() {
    fetch("status.json", {cache: "no-store", credentials: "same-origin"})
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json();
      })
      .then(function (snap) {
        render(snap);
        setConn("updated " + new Date().toLocaleTimeString("en-GB"), false);
      })
      .catch(function (e) {
        setConn("no status (" + String(e && e.message || e) + "), retrying", true);
      })
      .then(function () { setTimeout(poll, POLL_MS); });
  }

  renderNodes([]);
  poll();
})();
</script>
</body>
</html>
"""
_PAGE_BYTES = _PAGE.encode("utf-8")


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
        return True

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

    def __init__(self, address, snapshot, family=socket.AF_INET):
        self.address_family = family
        self.snapshot = snapshot
        self._failing = False
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

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

    Attributes
    ----------
    host : str
        The address bound.
    port : int or None
        The port bound, once started.
    url : str or None
        ``http://host:port/``, once started.
    """

    def __init__(self, snapshot, host="127.0.0.1", port=0):
        if not callable(snapshot):
            raise TypeError(f"snapshot must be callable, got {type(snapshot).__name__}")
        self.snapshot = snapshot
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
        server = _Server((host, self._requested_port), self.snapshot, family)
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
