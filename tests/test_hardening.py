"""Attacks on a running cluster, each refused or harmless, each followed by a real training that succeeds.

Before authentication (a keyed cluster, an attacker without the key): idle connections, slow and
oversized handshakes, against the dispatcher and the name server. With the key (a buggy or hostile
member): merges beyond the session's bound. On the default LocalCluster: a fake dispatcher.

The attacks that leave the cluster as they found it (each ends with a training that succeeds on it)
share one default single-worker cluster, ``cluster``; those that need shorter limits share ``strict_cluster``.
"""
import re
import socket
import threading
import time

import numpy as np
import psutil
import Pyro4.message  # the attacker's tool: a well-formed Pyro4 header that claims a huge message
import pytest

from gensim_distw2v import LocalCluster, Word2Vec, protocol
from gensim_distw2v.io import endpoints, transport
from gensim_distw2v.protocol.constants import DISPATCHER_NAME, SHARD_PREFIX, WORKER_PREFIX
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.protocol import calls, errors, tables
from gensim_distw2v.client.training import find_dispatcher
from gensim_distw2v.versions import versions

PARAMS = dict(vector_size=8, min_count=2, seed=3, workers=1, epochs=1)


def address(uri):
    host, port = str(uri).rsplit("@", 1)[1].rsplit(":", 1)
    return host, int(port)


def huge_handshake(addr, claimed=200 * 1024 * 1024, sent=8 * 1024 * 1024):
    """A connection whose handshake header claims ``claimed`` bytes; sends ``sent`` of them (or fewer, if cut)."""
    sock = socket.create_connection(addr)
    msg = Pyro4.message.Message(Pyro4.message.MSG_CONNECT, b"", 6, 0, 0)
    msg.data_size = claimed
    try:
        sock.sendall(msg._Message__header_bytes())
        sock.sendall(b"\0" * sent)
    except OSError:
        pass  # cut off: what the limit is for
    return sock


def closed_by_server(sock, within):
    """Whether the server closes ``sock`` (which sends nothing more) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def rss(cluster, role):
    return psutil.Process(cluster.processes[role].pid).memory_info().rss


def train_ok(cluster, corpus):
    model = Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    assert model.cluster_stats["raw_words"] == sum(map(len, corpus)) and np.isfinite(model.wv.vectors).all()
    return model


@pytest.fixture(scope="module")
def cluster():
    """One default (keyed) LocalCluster of one worker, for the tests that leave it as they found it."""
    with LocalCluster(n_workers=1) as shared:
        yield shared


@pytest.fixture(scope="module")
def strict_cluster():
    """One worker; jobs held for 2 s without a merge, or a client silent for 3 s, are given up."""
    with LocalCluster(n_workers=1, job_deadline=2.0, client_timeout=3.0) as shared:
        yield shared


def train_in_background(cluster, corpus, **params):
    """A client training ``corpus`` in a thread: ``(thread, outcome)``, outcome's ``model`` or ``error``."""
    outcome = {}

    def train():
        try:
            outcome["model"] = Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, **{**PARAMS, **params})
        except Exception as err:  # noqa: BLE001 - the test reads it
            outcome["error"] = err
    client = threading.Thread(target=train)
    client.start()
    return client, outcome


@pytest.mark.cluster
def test_a_keyed_cluster_trains_while_strangers_flood_its_sockets(cluster, lee_corpus):
    assert cluster.ns_conf["hmac_key"], "LocalCluster is keyed by default"
    dispatcher = find_dispatcher(cluster.ns_conf)
    target, ns = address(dispatcher.connection._pyroUri), ("127.0.0.1", cluster.ns_conf["port"])
    train_ok(cluster, lee_corpus[:50])  # warm up before the memory baseline
    before = {role: rss(cluster, role) for role in ("dispatcher", "nameserver")}
    idle = [socket.create_connection(target) for _ in range(70)] + [socket.create_connection(ns)
                                                                     for _ in range(45)]
    huge = [huge_handshake(addr) for addr in (target, target, ns, ns)]
    slow = socket.create_connection(target)
    dripping = threading.Event()

    def drip():  # a handshake one byte a second: each read is quick, the whole never ends
        header = Pyro4.message.Message(Pyro4.message.MSG_CONNECT, b"x" * 100, 6, 0, 0).to_bytes()
        for byte in header:
            if dripping.wait(1.0):
                return
            try:
                slow.send(bytes([byte]))
            except OSError:
                return
    threading.Thread(target=drip, daemon=True).start()
    try:
        started = time.monotonic()
        assert dispatcher.call("status").workers is not None and time.monotonic() - started < 2.0
        train_ok(cluster, lee_corpus)  # the name server and the dispatcher serve the keyed client
        # every stranger is dropped by the deadline; no one's payload was read into memory
        assert all(closed_by_server(sock, 15.0) for sock in idle + huge + [slow])
        assert "dropped a connection from 127.0.0.1" in cluster.processes["dispatcher"].output()
        for role, was in before.items():
            assert rss(cluster, role) - was < 40 * 1024 * 1024, f"{role} grew by {rss(cluster, role) - was} bytes"
        train_ok(cluster, lee_corpus)
    finally:
        dripping.set()
        for sock in idle + huge + [slow]:
            sock.close()
        transport.release(dispatcher)


@pytest.mark.cluster
def test_stranger_without_the_key_is_refused_by_the_default_cluster(cluster, lee_corpus):
    with pytest.raises(ClusterError, match="refuses this client: it gave no HMAC key") as refused:
        transport.locate_ns({"port": cluster.ns_conf["port"]})
    assert refused.value.code == errors.Code.FORBIDDEN
    dispatcher = endpoints.link(transport.lookup(cluster.ns_conf, DISPATCHER_NAME), tables.DISPATCHER)
    with pytest.raises(transport.CommunicationError):
        dispatcher.call("status")  # a keyless link gets no answer at all
    train_ok(cluster, lee_corpus[:100])


class FakeWorker:
    """A member that has the key and speaks the protocol, but sends what it likes."""

    NAME = WORKER_PREFIX + "mallory"

    def __init__(self, cluster):
        self.dispatcher = find_dispatcher(cluster.ns_conf)
        self.key = cluster.ns_conf["hmac_key"]

    def join_running_session(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not (session := self.dispatcher.call("status").session) or session.state != "running":
            assert time.monotonic() < deadline, "no session started"
            time.sleep(0.05)
        self.secret = self.dispatcher.call("hello", name=self.NAME, uri="PYRO:mallory@127.0.0.1:1",
                                           versions=versions(), threads=1)
        joined = self.dispatcher.call("join", name=self.NAME, secret=self.secret, session=session.id)
        self.sid, self.rank, self.config, self.token = session.id, joined.rank, joined.config, joined.token
        self.shard = endpoints.link(joined.shards[0][1], tables.SHARD, self.key, timeout=30)
        self.shard.call("download", session=self.sid, name="syn1neg", lo=0, hi=1, rank=self.rank,
                        token=self.token)  # takes its slot on the shard
        return self

    def merge(self, value, dtype=np.float32):
        rows = np.arange(3, dtype=np.uint32)
        values = np.full((3, self.config.params.vector_size), value, dtype=dtype)
        part = {"session": self.sid, "rank": self.rank, "lo": 0, "hi": self.config.params.vocab_size,
                "hold_back": 0.0, "hot_rows": -1, "tree_hot_rows": -1, "exact": True, "wanted": None, "token": self.token,
                "matrices": {"syn0": protocol.pack_deltas(rows, values)}}
        return self.shard.send("merge", part)

    def close(self):
        self.shard.release()
        self.dispatcher.release()


@pytest.mark.parametrize("value", [1e30, 3e38, np.inf])
@pytest.mark.cluster
def test_a_poisoned_merge_fails_the_training_naming_the_worker(cluster, lee_corpus, value):
    client, outcome = train_in_background(cluster, lee_corpus * 4, epochs=40)
    fake = FakeWorker(cluster).join_running_session()
    try:
        with pytest.raises(ValueError, match="this session's bound of "):
            fake.merge(value)
        with pytest.raises(ValueError, match="is refused in session"):
            fake.merge(0.0)  # and nothing more from it
    finally:
        fake.close()
    client.join(timeout=120)
    assert "model" not in outcome, "training succeeded with a poisoned merge"
    err = outcome["error"]
    assert isinstance(err, ClusterError) and FakeWorker.NAME in str(err) \
        and "would poison the model" in str(err), err
    train_ok(cluster, lee_corpus)


@pytest.mark.cluster
def test_only_the_sessions_client_closes_it_and_names_are_not_taken_over(cluster, lee_corpus):
    client, outcome = train_in_background(cluster, lee_corpus * 4, epochs=10)
    stranger = find_dispatcher(cluster.ns_conf)  # has the key, not the session's token
    try:
        deadline = time.monotonic() + 60
        while not (session := stranger.call("status").session) or session.state != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "token" not in repr(stranger.send("status", {}))
        with pytest.raises(errors.Forbidden, match="not this session's owner secret"):
            stranger.call("close", session=session.id, token="a guess")
        victim = cluster.names["worker-0"]
        assert victim in stranger.call("status").workers
        with pytest.raises(errors.MemberConflict, match="registered and alive on another connection"):
            stranger.call("hello", name=victim, uri="PYRO:x@127.0.0.1:1", versions=versions(), threads=1)
    finally:
        transport.release(stranger)
    client.join(timeout=300)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["model"].cluster_stats["raw_words"] == 10 * 4 * sum(map(len, lee_corpus))


@pytest.mark.unit
def test_merge_bounds_in_process():
    bound = protocol.max_delta_for(0.025, 100)
    assert bound == 64.0 and protocol.max_delta_for(0.025, 25) == 128.0 and protocol.max_delta_for(0.1, 100) == 200.0
    for dtype in (np.float16, np.float32):
        ok = np.array([[-bound, bound, 0.0]], dtype=dtype)
        assert protocol.within(ok, bound)
        for bad in (np.nextafter(dtype(bound), dtype(np.inf)), np.inf, -np.inf, np.nan):
            assert not protocol.within(np.array([[0.0, bad]], dtype=dtype), bound), (dtype, bad)
    rows = np.array([1, 4], dtype=np.uint32)
    huge = protocol.pack_deltas(rows, np.full((2, 4), 1e30, dtype=np.float32))
    with pytest.raises(errors.Poisoned, match="bound of 64"):
        protocol.unpack_deltas(huge, "syn0", 4, 0, 10, "merge part", bound)
    assert protocol.unpack_deltas(huge, "syn0", 4, 0, 10, "merge part")[1].max() == np.float32(1e30)  # no bound: finite
    levels = np.full((2, 4), 127, dtype=np.int8)
    for scale, poisoned in ((bound / 127, False), (bound / 100, True), (protocol.MAX_SCALE, True)):
        msg = protocol.pack_deltas(rows, levels, np.full(2, scale, dtype=np.float32))
        if poisoned:
            with pytest.raises(errors.Poisoned):
                protocol.unpack_deltas(msg, "syn0", 4, 0, 10, "merge part", bound)
        else:
            protocol.unpack_deltas(msg, "syn0", 4, 0, 10, "merge part", bound)


@pytest.mark.cluster
def test_a_worker_holding_jobs_without_merging_is_dropped(strict_cluster, lee_corpus):
    cluster = strict_cluster
    mark = len(cluster.processes["dispatcher"].lines)
    client, outcome = train_in_background(cluster, lee_corpus * 4, epochs=10, sync_words=20000)
    fake = FakeWorker(cluster).join_running_session()
    stop = threading.Event()
    beating = threading.Thread(target=lambda: [fake.dispatcher.call("heartbeat", name=fake.NAME, secret=fake.secret) for _ in iter(
        lambda: stop.wait(0.3), True)], daemon=True)
    try:
        taken = []
        while not taken:  # it takes jobs, keeps beating, never merges
            taken = fake.dispatcher.call("get_jobs", name=fake.NAME, secret=fake.secret, session=fake.sid, max_jobs=4,
                                         wait=1.0).jobs
        beating.start()
        cluster.processes["dispatcher"].wait_for(
            rf"worker {fake.NAME} lost \(it held {len(taken)} jobs for \d+ s without merging them", timeout=60,
            start=mark)
    finally:
        stop.set()
        fake.close()
    client.join(timeout=300)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["model"].cluster_stats["raw_words"] == 10 * 4 * sum(map(len, lee_corpus))  # its jobs retrained


@pytest.mark.cluster
def test_a_strangers_polling_keeps_no_dead_session_alive(strict_cluster, lee_corpus):
    from gensim_distw2v.client.training import DistributedTraining

    cluster = strict_cluster
    model = Word2Vec(lee_corpus[:50], distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    training = DistributedTraining(model, cluster.ns_conf)
    dispatcher = find_dispatcher(cluster.ns_conf)
    try:
        config, arrays = training.setup.config(1, False, 1)
        sid, links, _resumed = training.setup.open(dispatcher, config, arrays)
        links.close(sid)
        with pytest.raises(errors.Forbidden, match="not this session's owner secret"):
            dispatcher.call("progress", session=sid, token="a guess")
        deadline = time.monotonic() + 30
        while getattr(dispatcher.call("status").session, "id", None) == sid:  # the client went silent; a stranger polls
            try:
                dispatcher.call("progress", session=sid)
            except errors.SessionClosed:  # aborted between the two calls
                break
            assert time.monotonic() < deadline, "a stranger's polling kept the session alive"
            time.sleep(0.3)
        assert re.search(f"session {sid} aborted: no word from its client", cluster.processes["dispatcher"].output())
    finally:
        transport.release(dispatcher)
    train_ok(cluster, lee_corpus[:100])


@pytest.mark.cluster
def test_what_a_message_can_make_a_server_allocate_is_capped(cluster, lee_corpus):
    dispatcher = find_dispatcher(cluster.ns_conf)
    (shard_uri,) = transport.list_names(cluster.ns_conf, SHARD_PREFIX).values()
    shard = endpoints.link(shard_uri, tables.SHARD, cluster.ns_conf["hmac_key"], timeout=30)
    train_ok(cluster, lee_corpus[:50])
    before = {role: rss(cluster, role) for role in ("dispatcher", "shard-0")}
    try:
        hello = {"versions": versions(), "threads": 1}
        for name in (WORKER_PREFIX + "x" * 65, WORKER_PREFIX + "a/b", "gensim_distw2v.shard.x"):
            with pytest.raises(ValueError, match="malformed hello: name must be gensim_distw2v.worker. and 1 to 64"):
                dispatcher.call("hello", name=name, uri="PYRO:x@127.0.0.1:1", **hello)
        with pytest.raises(ValueError, match="uri must be a Pyro URI"):
            dispatcher.call("hello", name=WORKER_PREFIX + "x", uri="PYRO:" + "x" * 600, **hello)
        with pytest.raises(Exception, match="max_str_len|exceeds"):  # a 16 MB name is not even read
            dispatcher.call("hello", name=WORKER_PREFIX + "x" * 16_000_000, uri="PYRO:x@127.0.0.1:1",
                            **hello)
        with pytest.raises(Exception, match="max_array_len|exceeds"):  # 4 M empty maps in 4 MB
            dispatcher.connection._pyroInvoke("call", ["status", [{}] * 4_000_000], {})
        spec = dict(session="s" * 32, index=0, count=1, vocab_size=4_000_000, vector_size=1000,
                    weights=["syn0", "syn1neg"], merge="damp", merge_dtype="float16", hot_rows=0,
                    damp_rows={"syn0": 0, "syn1neg": 0},
                    versions=versions(), token="t")
        with pytest.raises(errors.SessionClosed, match="open_session: the dispatcher runs no session 's{32}'"):
            shard.send("open_session", spec)  # not granted: refused before its sizes are even read
        assert dispatcher.call("status").workers and shard.call("status").name.startswith(SHARD_PREFIX)
        for role, was in before.items():
            assert rss(cluster, role) - was < 40 * 1024 * 1024, f"{role} grew by {rss(cluster, role) - was} bytes"
    finally:
        shard.release()
        transport.release(dispatcher)
    train_ok(cluster, lee_corpus[:100])


@pytest.mark.unit
def test_sessions_in_process_memory_limit_token_and_empty_uploads(lee_corpus):
    from gensim_distw2v.client.training import DistributedTraining
    from gensim_distw2v.dispatcher import Dispatcher

    model = Word2Vec(lee_corpus[:50], vector_size=8, min_count=2, seed=3, workers=1, epochs=1)
    config = DistributedTraining(model, {}, model.settings).setup.config(1, False, 1)[0].to_wire()
    small, dispatcher = Dispatcher(max_model_bytes=1000), Dispatcher()
    try:
        small_link, link = small.local(), dispatcher.local()
        for d in (small_link, link):
            d.call("shard_hello", name=SHARD_PREFIX + "x", uri="PYRO:x@127.0.0.1:1", versions=versions())
        with pytest.raises(errors.Full, match=r"the session's arrays need \d+ MiB on the dispatcher, more than its "
                                              r"limit of 0 MiB; start the dispatcher with --max-model-bytes N"):
            small_link.send("open_session", config)
        opened = link.send("open_session", config)
        sid, token = opened["session"], opened["owner"]
        assert len(token) >= 32 and token not in repr(link.send("status", {})) and token != opened["token"]
        with pytest.raises(errors.BadRequest, match="an empty chunk"):
            link.send("upload", {"session": sid, "name": "lockf", "lo": 0, "token": token,
                                 "array": protocol.pack_array(np.zeros(0, np.float32))})
        for guess in ("a guess", opened["token"]):  # (the workers' token is not the owner's secret)
            with pytest.raises(errors.Forbidden, match="not this session's owner secret"):
                link.call("upload", session=sid, name="lockf", lo=0, array=protocol.pack_array(np.ones(3, np.float32)),
                          token=guess)
        with pytest.raises(errors.Forbidden, match="not this session's owner secret"):
            link.call("close", session=sid, token="")
        assert link.call("status").session.id == sid
        link.call("close", session=sid, token=token)
        assert link.call("status").session is None
    finally:
        small.shutdown()
        dispatcher.shutdown()


@pytest.mark.unit
def test_a_shard_refuses_worker_slots_beyond_its_memory_in_process(grant):
    from gensim_distw2v.shard import Shard

    size, vocab = 8, 1000
    row_bytes = vocab * size * 4 * 2  # syn0 and syn1neg, one shard
    snapshot = vocab * size * 4 + 1000 * size * 4  # damp: every syn0 row, 1,000 syn1neg rows (hot rows 0)
    shard = Shard({"port": 1}, max_model_bytes=row_bytes + 3 * snapshot)
    local = calls.Caller(tables.SHARD, calls.Handlers(tables.SHARD, shard).handle)  # as over the wire, in-process
    spec = dict(session="s" * 32, index=0, count=1, vocab_size=vocab, vector_size=size, weights=["syn0", "syn1neg"],
                merge="damp", merge_dtype="float16", damp_rows={"syn0": vocab, "syn1neg": 1000}, hot_rows=0,
                versions=versions(), token="the token", owner="the owner")
    sid = spec["session"]
    grant(shard, sid, "the owner")
    with pytest.raises(errors.Full, match=r"this shard's rows need 30518 MiB, more than its limit of \d+ MiB; "
                                          r"start more shards, or start this one with --max-model-bytes N"):
        local.send("open_session", dict(spec, vocab_size=4_000_000, vector_size=1000))  # granted: its sizes checked
    local.send("open_session", spec)
    for name in ("syn0", "syn1neg"):
        local.call("upload", session=sid, name=name, lo=0, array=protocol.pack_array(np.zeros((vocab, size), np.float32)),
                   token="the owner")
    local.call("start", session=sid, token="the owner")
    with pytest.raises(errors.Forbidden, match="not this session's token"):
        local.call("download", session=sid, name="syn0", lo=0, hi=1, rank=0, token="a guess")
    for rank in range(3):
        local.call("download", session=sid, name="syn0", lo=0, hi=1, rank=rank, token="the token")
    with pytest.raises(errors.Full, match=r"one more worker \(4 in all, a 0 MiB snapshot each\) would take shard \S+ to "
                                         r"\d+ MiB, past its limit of \d+ MiB: start more shards, or start it with "
                                         r"--max-model-bytes N"):
        local.call("download", session=sid, name="syn0", lo=0, hi=1, rank=3, token="the token")
    assert len(shard.held.weights.slots) == 3
