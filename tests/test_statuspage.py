"""The dispatcher's status page (:mod:`gensim_distw2v.io.statuspage`) on a fake snapshot: the HTTP
surface in process, then the page as a real headless browser renders it (the DOM, and OCR of a
screenshot: the node names must be legible)."""
import ast
import copy
import html.parser
import json
import logging
import re
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from gensim_distw2v.io import statuspage
from gensim_distw2v.io.statuspage import StatusPage

from . import browser

WORKERS = ("3f9a1b2c4d5e", "a07c9e5b21d8")
SHARDS = ("5be0d4419c6f",)
ABSENT = "7d2e8c0b9f14"            # a name like the others, in no snapshot: OCR must not find it


def node(name, role, words=0, rate=0.0, kernel=0.0, merge=0.0, other=0.0, last_heard=0.4, threads=1):
    return {"name": name, "role": role, "words": words, "words_per_second": rate,
            "cpu": {"kernel": kernel, "merge": merge, "other": other},
            "rss": 123_456_789, "peak_rss": 150_000_000, "bytes_sent": 1_000_000, "bytes_received": 2_000_000,
            "last_heard": last_heard, "threads": threads}


def fake_snapshot(session=True, workers=WORKERS, shards=SHARDS):
    """A snapshot as the dispatcher makes it: two workers, one shard, a session with some history."""
    nodes = [node("gensim_distw2v.dispatcher", "dispatcher", other=1.2, last_heard=0, threads=None)]
    nodes += [node(f"gensim_distw2v.worker.{w}", "worker", words=600_000 + i, rate=75_000.0, kernel=7.9,
                   merge=0.8, other=0.2) for i, w in enumerate(workers)]
    nodes += [node(f"gensim_distw2v.shard.{s}", "shard", merge=3.1, other=0.3, threads=2) for s in shards]
    history = [{"t": i * 0.5, "words": i * 70_000, "words_per_second": 150_000.0 * (1 - 0.6 ** (i + 1)),
                "loss": None if i == 0 else 3000.0 / (1 + 0.2 * i)} for i in range(17)]
    return {
        "time": 1732530000.0,
        "dispatcher": {"uri": "PYRO:gensim_distw2v.dispatcher@127.0.0.1:40123",
                       "versions": {"gensim_distw2v": "0.1.0", "gensim": "4.4.0"}},
        "session": {"id": "ab12cd34", "state": "running", "workers": len(workers), "shards": len(shards),
                    "epochs": 5, "epoch": 1, "progress": 0.42, "eta_seconds": 12.5, "elapsed": 8.1,
                    "words": 1_234_567, "words_per_second": 150_000.0, "loss": 1234.5, "merges": 57}
                   if session else None,
        "nodes": nodes,
        "history": history if session else [],
    }


@pytest.fixture
def serve():
    """``serve(snapshot_callable)``: a started StatusPage on loopback (stopped after the test)."""
    pages = []

    def start(snapshot, **kwargs):
        page = StatusPage(snapshot, **kwargs).start()
        pages.append(page)
        return page
    yield start
    for page in pages:
        page.stop()


def fetch(url, method="GET", data=None, headers=None):
    """``(status, headers, body)`` of one request; HTTP errors are answers too."""
    req = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers, e.read()


def raw(page, data, read_timeout=5.0):
    """Send ``data`` on a bare connection; what comes back until the server closes it."""
    with socket.create_connection(("127.0.0.1", page.port), timeout=read_timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


# ---------------------------------------------------------------- in process

@pytest.mark.cluster
def test_status_json_is_the_snapshot_one_a_second_whatever_the_requests(serve):
    calls = []

    def snap():
        calls.append(1)
        return fake_snapshot()
    page = serve(snap)
    assert page.url == f"http://127.0.0.1:{page.port}/" and page.port > 0
    status, headers, body = fetch(page.url + "status.json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert json.loads(body) == fake_snapshot()
    began = time.monotonic()
    for _ in range(20):  # a flood of requests: the snapshot is made once a second at most
        assert fetch(page.url + "status.json?ts=1")[0] == 200  # (a query string is the same resource)
    seconds = time.monotonic() - began
    assert len(calls) <= 2 + int(seconds / statuspage.SNAPSHOT_SECONDS)
    time.sleep(statuspage.SNAPSHOT_SECONDS + 0.1)
    before = len(calls)
    fetch(page.url + "status.json")
    assert len(calls) == before + 1  # and is fresh again once it is older than that


@pytest.mark.parametrize("host, code", [("evil.example", 403), ("evil.example:{port}", 403), ("", 403),
                                        ("127.0.0.1:1", 403), ("localhost:{port}", 200), ("LOCALHOST", 200),
                                        ("127.0.0.1", 200), ("[::1]:{port}", 200), ("10.1.2.3:{port}", 200),
                                        ("status.example:{port}", 200), ("[::1", 403), ("[::1]x", 403)])
@pytest.mark.cluster
def test_a_host_header_that_does_not_name_the_page_is_refused(serve, host, code):
    """DNS rebinding: a page of evil.example whose name now resolves to loopback reaches the status
    page with ``Host: evil.example``; the page answers its own names only (addresses, localhost,
    and the names it was given)."""
    page = serve(fake_snapshot, names=("status.example",))
    header = b"" if host == "" else b"Host: " + host.format(port=page.port).encode() + b"\r\n"
    for path in (b"/status.json", b"/"):
        answer = raw(page, b"GET " + path + b" HTTP/1.1\r\n" + header + b"\r\n")
        assert answer.startswith(b"HTTP/1.0 %d " % code), (host, answer[:200])
        if code == 403:
            assert b"Host header must name this page" in answer and b"nodes" not in answer


@pytest.mark.cluster
def test_a_client_that_trickles_its_request_is_cut_at_the_deadline(serve, monkeypatch):
    monkeypatch.setattr(statuspage, "REQUEST_SECONDS", 1.0)
    page = serve(fake_snapshot)
    with socket.create_connection(("127.0.0.1", page.port), timeout=5) as slow:
        began = time.monotonic()
        try:
            for byte in b"GET / HTTP/1.1\r\nX-Slow: " + b"y" * 100:  # a byte a 0.2 s: each read well in time
                slow.sendall(bytes([byte]))
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert _closed(slow)
        assert time.monotonic() - began < 3  # cut at the deadline, not after 100 bytes' 20 s
    assert fetch(page.url + "status.json")[0] == 200


@pytest.mark.cluster
def test_page_is_one_self_contained_html_document(serve):
    page = serve(fake_snapshot)
    status, headers, body = fetch(page.url)
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    csp = headers["Content-Security-Policy"]
    for directive in ("default-src 'none'", "script-src 'unsafe-inline'", "style-src 'unsafe-inline'",
                      "connect-src 'self'", "img-src data:"):
        assert directive in csp
    html = body.decode("utf-8")
    assert "<title>gensim_distw2v status</title>" in html
    assert "status.json" in html
    # nothing to load from anywhere: the machine running it may be offline
    assert not re.search(r"https?://", html, re.I)
    assert not re.search(r"<link|<iframe|<img|\ssrc\s*=|@import|url\(", html, re.I)
    # the JS never parses data as markup
    assert "innerHTML" not in html and "outerHTML" not in html and "insertAdjacentHTML" not in html
    assert "document.write" not in html and "eval(" not in html
    assert fetch(page.url + "index.html")[2] == body
    status, headers, head = fetch(page.url, method="HEAD")
    assert status == 200 and head == b"" and int(headers["Content-Length"]) == len(body)


@pytest.mark.parametrize("path", ["nope", "status.json/x", "status", "..%2fsetup.py", "favicon.ico"])
@pytest.mark.cluster
def test_other_paths_are_404(serve, path):
    status, headers, body = fetch(serve(fake_snapshot).url + path)
    assert status == 404
    assert json.loads(body) == {"error": "not found"}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"])
@pytest.mark.cluster
def test_methods_other_than_get_and_head_are_405(serve, method):
    page = serve(fake_snapshot)
    status, headers, body = fetch(page.url + "status.json", method=method, data=b"x" if method == "POST" else None)
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert json.loads(body) == {"error": "method not allowed"}


@pytest.mark.cluster
def test_request_bodies_are_refused(serve):
    page = serve(fake_snapshot)
    status, _, body = fetch(page.url + "status.json", data=b"{}", method="GET")
    assert status == 413 and "bodies" in json.loads(body)["error"]
    answer = raw(page, b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 413 ")


@pytest.mark.cluster
def test_request_line_and_headers_are_capped(serve):
    page = serve(fake_snapshot)
    # exactly one byte past each limit, so that the server reads all that was sent (a socket closed
    # with unread data resets the connection, and the answer may be lost)
    assert raw(page, b"GET /" + b"a" * (65537 - 5)).startswith(b"HTTP/1.0 414 ")
    many = b"".join(b"X-%d: y\r\n" % i for i in range(100))      # with Host: 101 headers, no end
    assert raw(page, b"GET / HTTP/1.1\r\nHost: x\r\n" + many).startswith(b"HTTP/1.0 431 ")
    assert fetch(page.url + "status.json")[0] == 200


@pytest.mark.cluster
def test_a_silent_client_is_dropped_and_holds_no_one_up(serve, monkeypatch):
    monkeypatch.setattr(statuspage._Handler, "timeout", 0.5)
    page = serve(fake_snapshot)
    with socket.create_connection(("127.0.0.1", page.port), timeout=5) as idle:
        idle.sendall(b"GET / HTTP/1.1\r\n")     # ... and never the rest
        assert fetch(page.url + "status.json")[0] == 200     # others are served meanwhile
        t0 = time.monotonic()
        assert idle.recv(1024) == b""           # closed by the server
        assert time.monotonic() - t0 < 3


def _closed(conn):
    """Whether the server closed ``conn`` (unread data makes that a reset)."""
    try:
        return conn.recv(1024) == b""
    except ConnectionResetError:
        return True


@pytest.mark.cluster
def test_a_flood_of_idle_connections_is_capped_and_the_page_serves_after_it(serve, monkeypatch):
    monkeypatch.setattr(statuspage._Handler, "timeout", 1.0)
    page = serve(fake_snapshot)
    idle = [socket.create_connection(("127.0.0.1", page.port), timeout=5) for _ in range(statuspage.MAX_CONNECTIONS + 8)]
    try:
        for conn in idle:
            conn.sendall(b"GET / HTTP/1.1\r\n")   # ... and never the rest
        time.sleep(0.3)
        # those past the cap were closed unread, at once
        assert all(_closed(conn) for conn in idle[statuspage.MAX_CONNECTIONS:])
        assert threading.active_count() < 100
    finally:
        for conn in idle:
            conn.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the held slots free once their timeout passes
        try:
            if fetch(page.url + "status.json")[0] == 200:
                break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    assert fetch(page.url + "status.json")[0] == 200


@pytest.mark.cluster
def test_a_snapshot_that_raises_is_a_500_and_the_page_serves_on(serve, caplog, monkeypatch):
    monkeypatch.setattr(statuspage, "SNAPSHOT_SECONDS", 0.0)  # (every request a snapshot of its own)
    calls = []

    def snap():
        calls.append(1)
        if len(calls) <= 2:
            raise RuntimeError("secret detail /home/someone")
        return fake_snapshot()
    page = serve(snap)
    with caplog.at_level(logging.DEBUG, logger="gensim_distw2v.io.statuspage"):
        for _ in range(2):
            status, headers, body = fetch(page.url + "status.json")
            assert status == 500
            assert headers["Content-Type"] == "application/json"
            error = json.loads(body)
            assert set(error) == {"error"} and "secret" not in error["error"]
        status, _, body = fetch(page.url + "status.json")
        assert status == 200 and json.loads(body) == fake_snapshot()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info           # once per run of failures, with the cause
    # what the snapshot returns must be JSON; what is not is a failure too
    page2 = serve(lambda: {"nodes": [object()]})
    assert fetch(page2.url + "status.json")[0] == 500
    assert fetch(page2.url)[0] == 200


@pytest.mark.cluster
def test_non_finite_numbers_are_null(serve):
    snap = fake_snapshot()
    snap["session"]["loss"] = float("nan")
    snap["session"]["eta_seconds"] = float("inf")
    body = json.loads(fetch(serve(lambda: snap).url + "status.json")[2])
    assert body["session"]["loss"] is None and body["session"]["eta_seconds"] is None


@pytest.mark.cluster
def test_node_names_are_data_and_the_page_holds_none(serve):
    hostile = "gensim_distw2v.worker.<script>alert(1)</script>"
    snap = fake_snapshot()
    snap["nodes"][1]["name"] = hostile
    page = serve(lambda: snap)
    status, headers, body = fetch(page.url + "status.json")
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["nodes"][1]["name"] == hostile
    html = fetch(page.url)[2].decode()
    for data in ["alert(1)", "ab12cd34", *WORKERS, *SHARDS, "PYRO:"]:
        assert data not in html                     # the template is fixed: data comes by JSON only


@pytest.mark.cluster
def test_requests_are_logged_at_debug_only(serve, caplog):
    page = serve(fake_snapshot)
    with caplog.at_level(logging.DEBUG, logger="gensim_distw2v.io.statuspage"):
        fetch(page.url + "status.json")
        fetch(page.url + "nope")
    records = [r for r in caplog.records if "status.json" in r.getMessage() or "nope" in r.getMessage()]
    assert len(records) == 2 and all(r.levelno == logging.DEBUG for r in records)
    assert all(r.args for r in records)             # lazy %-args, formatted only if emitted


@pytest.mark.cluster
def test_warns_only_off_loopback(caplog):
    assert statuspage._is_loopback("127.0.0.1") and statuspage._is_loopback("::1")
    assert statuspage._is_loopback("localhost") and statuspage._is_loopback("127.0.0.2")
    assert not statuspage._is_loopback("0.0.0.0") and not statuspage._is_loopback("")
    assert not statuspage._is_loopback("192.168.1.4") and not statuspage._is_loopback("example.org")
    with caplog.at_level(logging.INFO, logger="gensim_distw2v.io.statuspage"):
        with StatusPage(fake_snapshot) as page:
            assert fetch(page.url + "status.json")[0] == 200
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        with StatusPage(fake_snapshot, host="0.0.0.0") as page:
            assert fetch(f"http://127.0.0.1:{page.port}/status.json")[0] == 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "no authentication" in warnings[0]


@pytest.mark.cluster
def test_start_stop_lifecycle(serve):
    page = StatusPage(fake_snapshot)
    assert page.url is None
    page.start()
    with pytest.raises(RuntimeError):
        page.start()
    port = page.port
    page.stop()
    page.stop()                                     # idempotent
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with pytest.raises(TypeError):
        StatusPage({"not": "callable"})


@pytest.mark.unit
def test_the_module_does_not_import_pyro():
    tree = ast.parse(open(statuspage.__file__, encoding="utf-8").read())
    imported = {alias.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "Pyro4" not in imported and "gensim_distw2v" not in imported


# ---------------------------------------------------------------- a real browser

def start_tags(dom):
    """The names of all the elements in ``dom``."""
    tags = []
    parser = html.parser.HTMLParser()
    parser.handle_starttag = lambda tag, attrs: tags.append(tag)
    parser.feed(dom)
    parser.close()
    return tags


def short_names_in_table(dom):
    """The node names the page shows large (its ``.short`` cells), in order."""
    return re.findall(r'<div class="short" title="[^"]*">([^<]*)</div>', dom)


@pytest.mark.system
def test_browser_renders_every_node_and_ocr_reads_the_names(serve, tmp_path):
    browser.require()
    snap = fake_snapshot()
    page = serve(lambda: copy.deepcopy(snap))
    dom = browser.dump_dom(page.url)
    assert short_names_in_table(dom) == ["dispatcher", *WORKERS, *SHARDS]
    assert 'id="nosession"' in dom and re.search(r'<div id="nosession"[^>]*\shidden', dom)
    assert "ab12cd34" in dom and "1,234,567" in dom and "2 of 5" in dom
    assert dom.count("<path ") == 2                 # both charts drawn

    shot = browser.screenshot(page.url, tmp_path / "status.png")
    text = browser.ocr(shot)
    for name in WORKERS:
        assert browser.ocr_finds(text, name), f"OCR does not find worker {name} in:\n{text}"
    assert browser.ocr_finds(text, "ab12cd34"), text
    assert not browser.ocr_finds(text, ABSENT), f"OCR finds {ABSENT}, which is on no page, in:\n{text}"


@pytest.mark.system
def test_browser_without_a_session_shows_the_nodes_and_data_as_text(serve):
    browser.require()
    snap = fake_snapshot(session=False)
    snap["nodes"][1]["name"] = "gensim_distw2v.worker.<img src=x onerror=alert(1)>"
    dom = browser.dump_dom(serve(lambda: snap).url)
    assert re.search(r'<div id="nosession">no session</div>', dom)
    assert re.search(r'<div id="session" hidden', dom)
    assert short_names_in_table(dom) == ["dispatcher", "&lt;img src=x onerror=alert(1)&gt;", WORKERS[1], *SHARDS]
    assert "img" not in start_tags(dom)            # shown as text, never made an element
    assert dom.count(">no data yet</text>") == 2       # both charts, empty
