"""Attacks on a running cluster, each refused or harmless, each followed by a real training that succeeds.

Before authentication (a keyed cluster, an attacker without the key): idle connections, slow and
oversized handshakes, against the dispatcher and the name server. With the key (a buggy or hostile
member): merges beyond the session's bound. On the default LocalCluster: a fake dispatcher.
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
from gensim_distw2v.io import transport
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


def test_a_keyed_cluster_trains_while_strangers_flood_its_sockets(lee_corpus):
    with LocalCluster(n_workers=1) as cluster:
        assert cluster.ns_conf["hmac_key"], "LocalCluster is keyed by default"
        dispatcher = find_dispatcher(cluster.ns_conf)
        target, ns = address(dispatcher._pyroUri), ("127.0.0.1", cluster.ns_conf["port"])
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
            assert "workers" in dispatcher.status() and time.monotonic() - started < 2.0
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


def test_stranger_without_the_key_is_refused_by_the_default_cluster(lee_corpus):
    with LocalCluster(n_workers=1) as cluster:
        with pytest.raises(transport.ClusterError, match="refuses this client: it gave no HMAC key"):
            transport.locate_ns({"port": cluster.ns_conf["port"]})
        dispatcher = transport.connect(transport.lookup(cluster.ns_conf, transport.DISPATCHER_NAME))
        with pytest.raises(transport.CommunicationError):
            dispatcher.status()  # a keyless proxy gets no answer at all
        train_ok(cluster, lee_corpus[:100])


class FakeWorker:
    """A member that has the key and speaks the protocol, but sends what it likes."""

    NAME = transport.WORKER_PREFIX + "mallory"

    def __init__(self, cluster):
        self.dispatcher = find_dispatcher(cluster.ns_conf)
        self.key = cluster.ns_conf["hmac_key"]

    def join_running_session(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not (session := self.dispatcher.status()["session"]) or session["state"] != "running":
            assert time.monotonic() < deadline, "no session started"
            time.sleep(0.05)
        self.dispatcher.hello(self.NAME, "PYRO:mallory@127.0.0.1:1", {"versions": versions(), "threads": 1})
        joined = protocol.Joined.from_wire(self.dispatcher.join(self.NAME, session["id"]))
        self.sid, self.rank, self.config, self.token = session["id"], joined.rank, joined.config, joined.token
        self.shard = transport.connect(joined.shards[0][1], self.key, timeout=30)
        self.shard.download(self.sid, "syn1neg", 0, 1, self.rank, self.token)  # takes its slot on the shard
        return self

    def merge(self, value, dtype=np.float32):
        rows = np.arange(3, dtype=np.uint32)
        values = np.full((3, self.config.params.vector_size), value, dtype=dtype)
        part = {"session": self.sid, "rank": self.rank, "lo": 0, "hi": self.config.params.vocab_size,
                "hold_back": 0.0, "hot_rows": -1, "tree_hot_rows": -1, "exact": True, "wanted": None, "token": self.token,
                "matrices": {"syn0": protocol.pack_deltas(rows, values)}}
        return self.shard.merge(part)

    def close(self):
        transport.release(self.shard)
        transport.release(self.dispatcher)


@pytest.mark.parametrize("value", [1e30, 3e38, np.inf])
def test_a_poisoned_merge_fails_the_training_naming_the_worker(lee_corpus, value):
    with LocalCluster(n_workers=1) as cluster:
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
        assert isinstance(err, transport.ClusterError) and FakeWorker.NAME in str(err) \
            and "would poison the model" in str(err), err
        train_ok(cluster, lee_corpus)


def test_only_the_sessions_client_closes_it_and_names_are_not_taken_over(lee_corpus):
    with LocalCluster(n_workers=1) as cluster:
        client, outcome = train_in_background(cluster, lee_corpus * 4, epochs=10)
        stranger = find_dispatcher(cluster.ns_conf)  # has the key, not the session's token
        try:
            deadline = time.monotonic() + 60
            while not (session := stranger.status()["session"]) or session["state"] != "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert "token" not in repr(stranger.status())
            with pytest.raises(ValueError, match="not this session's token"):
                stranger.close(session["id"], "a guess")
            victim = next(iter(stranger.status()["workers"]))
            with pytest.raises(ValueError, match="registered and alive on another connection"):
                stranger.hello(victim, "PYRO:x@127.0.0.1:1", {"versions": versions(), "threads": 1})
        finally:
            transport.release(stranger)
        client.join(timeout=300)
        assert "error" not in outcome, outcome.get("error")
        assert outcome["model"].cluster_stats["raw_words"] == 10 * 4 * sum(map(len, lee_corpus))


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
    with pytest.raises(protocol.PoisonError, match="bound of 64"):
        protocol.unpack_deltas(huge, "syn0", 4, 0, 10, "merge part", bound)
    assert protocol.unpack_deltas(huge, "syn0", 4, 0, 10, "merge part")[1].max() == np.float32(1e30)  # no bound: finite
    levels = np.full((2, 4), 127, dtype=np.int8)
    for scale, poisoned in ((bound / 127, False), (bound / 100, True), (protocol.MAX_SCALE, True)):
        msg = protocol.pack_deltas(rows, levels, np.full(2, scale, dtype=np.float32))
        if poisoned:
            with pytest.raises(protocol.PoisonError):
                protocol.unpack_deltas(msg, "syn0", 4, 0, 10, "merge part", bound)
        else:
            protocol.unpack_deltas(msg, "syn0", 4, 0, 10, "merge part", bound)


def test_a_worker_holding_jobs_without_merging_is_dropped(lee_corpus):
    with LocalCluster(n_workers=1, job_deadline=2.0) as cluster:
        mark = len(cluster.processes["dispatcher"].lines)
        client, outcome = train_in_background(cluster, lee_corpus * 4, epochs=10, sync_words=20000)
        fake = FakeWorker(cluster).join_running_session()
        stop = threading.Event()
        beating = threading.Thread(target=lambda: [fake.dispatcher.heartbeat(fake.NAME) for _ in iter(
            lambda: stop.wait(0.3), True)], daemon=True)
        try:
            taken = []
            while not taken:  # it takes jobs, keeps beating, never merges
                taken = fake.dispatcher.get_jobs(fake.NAME, fake.sid, 4, 1.0)["jobs"]
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


def test_a_strangers_polling_keeps_no_dead_session_alive(lee_corpus):
    from gensim_distw2v.client.training import DistributedTraining

    with LocalCluster(n_workers=1, client_timeout=3.0) as cluster:
        model = Word2Vec(lee_corpus[:50], distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
        training = DistributedTraining(model, cluster.ns_conf)
        dispatcher = find_dispatcher(cluster.ns_conf)
        try:
            config, arrays = training._config(1, False, 1)
            sid, links, _resumed = training._open(dispatcher, config, arrays)
            links.close(sid)
            with pytest.raises(ValueError, match="not this session's token"):
                dispatcher.progress(sid, "a guess")
            deadline = time.monotonic() + 30
            while (dispatcher.status()["session"] or {}).get("id") == sid:  # the client went silent; a stranger polls
                dispatcher.progress(sid)
                assert time.monotonic() < deadline, "a stranger's polling kept the session alive"
                time.sleep(0.3)
            assert re.search(f"session {sid} aborted: no word from its client", cluster.processes["dispatcher"].output())
        finally:
            transport.release(dispatcher)
        train_ok(cluster, lee_corpus[:100])


def test_what_a_message_can_make_a_server_allocate_is_capped(lee_corpus):
    with LocalCluster(n_workers=1) as cluster:
        dispatcher = find_dispatcher(cluster.ns_conf)
        (shard_uri,) = transport.list_names(cluster.ns_conf, transport.SHARD_PREFIX).values()
        shard = transport.connect(shard_uri, cluster.ns_conf["hmac_key"], timeout=30)
        train_ok(cluster, lee_corpus[:50])
        before = {role: rss(cluster, role) for role in ("dispatcher", "shard-0")}
        try:
            hello = {"versions": versions(), "threads": 1}
            for name in (transport.WORKER_PREFIX + "x" * 65, transport.WORKER_PREFIX + "a/b", "gensim_distw2v.shard.x"):
                with pytest.raises(ValueError, match="malformed hello: name must be gensim_distw2v.worker. and 1 to 64"):
                    dispatcher.hello(name, "PYRO:x@127.0.0.1:1", hello)
            with pytest.raises(ValueError, match="uri must be a Pyro URI"):
                dispatcher.hello(transport.WORKER_PREFIX + "x", "PYRO:" + "x" * 600, hello)
            with pytest.raises(Exception, match="max_str_len|exceeds"):  # a 16 MB name is not even read
                dispatcher.hello(transport.WORKER_PREFIX + "x" * 16_000_000, "PYRO:x@127.0.0.1:1", hello)
            with pytest.raises(Exception, match="max_array_len|exceeds"):  # 4 M empty maps in 4 MB
                dispatcher._pyroInvoke("status", [[{}] * 4_000_000], {})
            spec = dict(session="s" * 32, index=0, count=1, vocab_size=4_000_000, vector_size=1000,
                        weights=["syn0", "syn1neg"], merge="damp", merge_dtype="float16", hot_rows=0,
                        damp_rows={"syn0": 0, "syn1neg": 0},
                        versions=versions(), token="t")
            with pytest.raises(ValueError, match=r"this shard's rows need 30518 MiB, more than its limit of \d+ MiB; "
                                                 r"start more shards, or start this one with --max-model-bytes N"):
                shard.open_session(spec)
            assert "workers" in dispatcher.status() and shard.status() is not None
            for role, was in before.items():
                assert rss(cluster, role) - was < 40 * 1024 * 1024, f"{role} grew by {rss(cluster, role) - was} bytes"
        finally:
            transport.release(shard)
            transport.release(dispatcher)
        train_ok(cluster, lee_corpus[:100])


def test_sessions_in_process_memory_limit_token_and_empty_uploads(lee_corpus):
    from gensim_distw2v.client.training import DistributedTraining
    from gensim_distw2v.dispatcher import Dispatcher

    model = Word2Vec(lee_corpus[:50], vector_size=8, min_count=2, seed=3, workers=1, epochs=1)
    config = DistributedTraining(model, {}, model.settings)._config(1, False, 1)[0].to_wire()
    small, dispatcher = Dispatcher(max_model_bytes=1000), Dispatcher()
    try:
        for d in (small, dispatcher):
            d.shard_hello(transport.SHARD_PREFIX + "x", "PYRO:x@127.0.0.1:1", {"versions": versions()})
        with pytest.raises(ValueError, match=r"the session's arrays need \d+ MiB on the dispatcher, more than its limit "
                                             r"of 0 MiB; start the dispatcher with --max-model-bytes N"):
            small.open_session(config)
        opened = protocol.Opened.from_wire(dispatcher.open_session(config))
        sid, token = opened.session, opened.token
        assert len(token) >= 32 and token not in repr(dispatcher.status())
        with pytest.raises(ValueError, match="an empty chunk"):
            dispatcher.upload(sid, "lockf", 0, protocol.pack_array(np.zeros(0, np.float32)), token)
        with pytest.raises(ValueError, match="not this session's token"):
            dispatcher.upload(sid, "lockf", 0, protocol.pack_array(np.ones(3, np.float32)), "a guess")
        with pytest.raises(ValueError, match="not this session's token"):
            dispatcher.close(sid, "")
        assert dispatcher.status()["session"]["id"] == sid
        dispatcher.close(sid, token)
        assert dispatcher.status()["session"] is None
    finally:
        small.shutdown()
        dispatcher.shutdown()


def test_a_shard_refuses_worker_slots_beyond_its_memory_in_process():
    from gensim_distw2v.shard import Shard

    size, vocab = 8, 1000
    row_bytes = vocab * size * 4 * 2  # syn0 and syn1neg, one shard
    snapshot = vocab * size * 4 + 1000 * size * 4  # damp: every syn0 row, 1,000 syn1neg rows (hot rows 0)
    shard = Shard({"port": 1}, max_model_bytes=row_bytes + 3 * snapshot)
    spec = dict(session="s" * 32, index=0, count=1, vocab_size=vocab, vector_size=size, weights=["syn0", "syn1neg"],
                merge="damp", merge_dtype="float16", damp_rows={"syn0": vocab, "syn1neg": 1000}, hot_rows=0,
                versions=versions(), token="the token")
    shard.open_session(spec)
    for name in ("syn0", "syn1neg"):
        shard.upload(spec["session"], name, 0, protocol.pack_array(np.zeros((vocab, size), np.float32)), "the token")
    shard.start(spec["session"])
    with pytest.raises(ValueError, match="not this session's token"):
        shard.download(spec["session"], "syn0", 0, 1, 0, "a guess")
    for rank in range(3):
        shard.download(spec["session"], "syn0", 0, 1, rank, "the token")
    with pytest.raises(ValueError, match=r"one more worker \(4 in all, a 0 MiB snapshot each\) would take shard \S+ to "
                                         r"\d+ MiB, past its limit of \d+ MiB: start more shards, or start it with "
                                         r"--max-model-bytes N"):
        shard.download(spec["session"], "syn0", 0, 1, 3, "the token")
    assert len(shard.held.weights.slots) == 3
