"""Pyro4 configured per daemon and per proxy: a process's own Pyro4 config (gensim's distributed
LDA/LSI want ``PYRO_SERIALIZER=pickle``) survives importing and using this package, whose servers
still refuse pickle, decode msgpack within their limits and keep their own sizes and tracebacks."""
import copy
import json
import os
import subprocess
import sys
import textwrap
import threading

import Pyro4
import Pyro4.errors
import pytest

from gensim_distw2v.io import transport
from gensim_distw2v.protocol.errors import ClusterError

PICKLE_ENV = {"PYRO_SERIALIZER": "pickle", "PYRO_SERIALIZERS_ACCEPTED": "pickle"}


def run(script, env, timeout=300):
    done = subprocess.run([sys.executable, "-P", "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


IMPORT_EVERYTHING = """
    import copy, importlib, json, pkgutil
    import Pyro4, Pyro4.message, Pyro4.socketutil, Pyro4.util

    def snapshot():
        return {"config": copy.deepcopy(Pyro4.config.asDict()), "serializers": dict(Pyro4.util._serializers),
                "by_id": dict(Pyro4.util._serializers_by_id), "send": Pyro4.socketutil.SocketConnection.send,
                "recv": Pyro4.socketutil.SocketConnection.recv, "lookup": Pyro4.util.get_serializer_by_id,
                "message": Pyro4.message.Message.recv}

    before = snapshot()
    import gensim_distw2v
    names = [m.name for m in pkgutil.walk_packages(gensim_distw2v.__path__, "gensim_distw2v.")
             if not m.name.endswith("__main__")]  # (those run a server)
    for name in names:
        importlib.import_module(name)
    after = snapshot()
    print(json.dumps({"modules": names, "changed": sorted(k for k in before if before[k] != after[k]),
                      "config": {k: repr(v) for k, v in after["config"].items() if v != before["config"][k]},
                      "serializer": Pyro4.config.SERIALIZER, "accepted": sorted(Pyro4.config.SERIALIZERS_ACCEPTED)}))
"""


@pytest.mark.cluster  # (subprocesses)
@pytest.mark.parametrize("env", [{}, PICKLE_ENV], ids=["default", "pickle"])
def test_importing_every_module_leaves_pyro4_as_it_was(env):
    out = json.loads(run(IMPORT_EVERYTHING, env, timeout=120))
    assert "gensim_distw2v.io.transport" in out["modules"] and len(out["modules"]) > 30
    assert out["changed"] == [] and out["config"] == {}
    expected = ("pickle", ["pickle"]) if env else ("serpent", ["json", "marshal", "serpent"])
    assert (out["serializer"], out["accepted"]) == expected


PICKLE_PROCESS = """
    import os, sys, threading
    import Pyro4, Pyro4.constants, Pyro4.errors
    from gensim.models.word2vec import LineSentence
    from gensim.test.utils import datapath
    import gensim_distw2v
    from gensim_distw2v.io import transport
    from gensim_distw2v.protocol.constants import DISPATCHER_NAME, WORKER_PREFIX

    class Point:  # travels as itself with pickle only
        def __init__(self, x, y):
            self.x, self.y = x, y

    @Pyro4.expose
    class Mirror:
        def flip(self, point):
            return Point(point.y, point.x)

    class Trap:  # unpickling it makes a directory: proof that a server unpickled it
        def __reduce__(self):
            return os.mkdir, (sys.argv[1],)

    def refusal(proxy, call):
        try:
            call(proxy)
            return "accepted"
        except Pyro4.errors.PyroError as err:
            return f"{type(err).__name__}: {err}"

    corpus = list(LineSentence(datapath("lee_background.cor")))
    with gensim_distw2v.LocalCluster(n_workers=1, n_shards=1) as cluster:  # its processes have PYRO_* too
        model = gensim_distw2v.Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, min_count=5, epochs=1)
        print("trained", model.cluster_stats["raw_words"])
        print("config", Pyro4.config.SERIALIZER, sorted(Pyro4.config.SERIALIZERS_ACCEPTED))

        daemon = Pyro4.Daemon(host="127.0.0.1")  # this process's own Pyro4 users keep their pickle
        uri = daemon.register(Mirror())
        threading.Thread(target=daemon.requestLoop, daemon=True).start()
        with Pyro4.Proxy(uri) as mirror:
            flipped = mirror.flip(Point(1, 2))
            print("mirror", type(flipped).__name__, flipped.x, flipped.y, mirror._pyroConnection is not None)
        daemon.shutdown()

        key = cluster.ns_conf["hmac_key"]
        dispatcher = transport.lookup(cluster.ns_conf, DISPATCHER_NAME)
        ping = lambda p: p._pyroInvoke("ping", [Trap()], {}, objectId=Pyro4.constants.DAEMON_NAME)
        raw = Pyro4.Proxy(dispatcher)  # the process's serializer: pickle
        raw._pyroHmacKey = key
        print("dispatcher handshake:", refusal(raw, lambda p: p._pyroBind()))
        raw = Pyro4.Proxy(dispatcher)
        raw._pyroHmacKey, raw._pyroSerializer = key, "msgpack"
        raw._pyroBind()
        raw._pyroSerializer = "pickle"  # a pickled call on a msgpack connection
        print("dispatcher call:", refusal(raw, ping))
        raw._pyroRelease()
        ns = Pyro4.Proxy(f"PYRO:{Pyro4.constants.NAMESERVER_NAME}@127.0.0.1:{cluster.ns_conf['port']}")
        ns._pyroHmacKey = key
        print("name server handshake:", refusal(ns, lambda p: p._pyroBind()))
        ours = transport.connect(dispatcher, key, timeout=10)
        print("after:", ours._pyroInvoke("ping", [], {}, objectId=Pyro4.constants.DAEMON_NAME),
              sorted(transport.list_names(cluster.ns_conf, WORKER_PREFIX)) != [])
        transport.release(ours)
    print("config", Pyro4.config.SERIALIZER, sorted(Pyro4.config.SERIALIZERS_ACCEPTED))
"""


@pytest.mark.cluster
def test_a_pickle_process_trains_keeps_its_pickle_and_the_cluster_refuses_it(tmp_path):
    trap = tmp_path / "unpickled"
    script = textwrap.dedent(PICKLE_PROCESS)
    done = subprocess.run([sys.executable, "-P", "-c", script, str(trap)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **PICKLE_ENV})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "trained 59890"
    assert lines[1] == lines[-1] == "config pickle ['pickle']"
    assert lines[2] == "mirror Point 2 1 True"
    refused = "message used serializer that is not accepted: 4"
    assert lines[3].startswith("dispatcher handshake: CommunicationError") and refused in lines[3]
    assert lines[4] == f"dispatcher call: SerializeError: {refused}"
    assert lines[5].startswith("name server handshake: CommunicationError") and refused in lines[5]
    assert lines[6] == "after: None True"
    assert not trap.exists(), "a server unpickled what a peer sent"


@pytest.fixture
def pickle_config(monkeypatch):
    """This process's Pyro4 config as gensim's distributed LDA wants it, and more to ignore."""
    for name, value in dict(SERIALIZER="pickle", SERIALIZERS_ACCEPTED={"pickle"}, DETAILED_TRACEBACK=True,
                            THREADPOOL_SIZE=2, THREADPOOL_SIZE_MIN=1, MAX_MESSAGE_SIZE=0, MAX_RETRIES=3,
                            COMPRESSION=True).items():
        monkeypatch.setattr(Pyro4.config, name, value)
    yield copy.deepcopy(Pyro4.config.asDict())


@transport.expose
class Echo:
    def echo(self, value):
        return value

    def fail(self, value):
        secret = f"local-{value}"
        raise ValueError(secret[:5])


class SmallDaemon(transport._Daemon):
    LIMIT = 64 * 1024


def serve(daemon_class=transport._Daemon):
    daemon = daemon_class(transport.Limits(), host="127.0.0.1", port=0)
    uri = daemon.register(Echo())
    threading.Thread(target=daemon.requestLoop, daemon=True).start()
    return daemon, uri


@pytest.mark.cluster  # (in-process servers)
def test_daemons_built_in_many_threads_keep_their_own_settings(pickle_config):
    daemons, errors = [], []

    def build():
        try:
            daemons.append(serve()[0])
        except Exception as err:  # noqa: BLE001 - the test reads it
            errors.append(err)
    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == [] and len(daemons) == 8
        assert Pyro4.config.asDict() == pickle_config
        for daemon in daemons:
            assert daemon._Daemon__serializer_ids == {Pyro4.util.get_serializer("msgpack").serializer_id}
            assert isinstance(daemon.transportServer.pool, transport._Pool)
    finally:
        for daemon in daemons:
            daemon.shutdown()


@pytest.mark.cluster
def test_a_daemon_and_its_proxies_ignore_the_process_config(pickle_config):
    daemon, uri = serve()
    small, small_uri = serve(SmallDaemon)
    proxies, answers = [], []
    try:
        def call(i):  # several threads make their proxies at once, as workers do
            proxy = transport.connect(uri, timeout=10)
            proxies.append(proxy)
            answers.append(proxy.echo({"i": i, "b": b"\0" * i}) == {"i": i, "b": b"\0" * i})
        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]  # more than THREADPOOL_SIZE=2
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [True] * 8  # eight connections open at once, served
        assert all(p._pyroSerializer == "msgpack" and p._pyroMaxRetries == 0 for p in proxies)
        proxy = proxies[0]
        with pytest.raises(ValueError, match="exceeds max_array_len"):  # 2 M empty maps in 2 MB: not built
            proxy.echo([{}] * 2 ** 21)
        with pytest.raises(ValueError, match="local") as info:  # a plain traceback: no local variables
            proxy.fail("x")
        assert "local-x" not in "".join(info.value._pyroTraceback)
        assert proxy.echo(b"\0" * 100_000) == b"\0" * 100_000  # (sent compressed: COMPRESSION is on)
        big = transport.connect(small_uri, timeout=10)
        assert big.echo("small") == "small"
        with pytest.raises(transport.CommunicationError):
            big.echo(os.urandom(100_000))  # over the daemon's 64 KiB: refused unread, connection closed
        assert big.echo("again") == "again"  # (a new connection)
        with pytest.raises(transport.CommunicationError):
            big.echo(b"\0" * 1_000_000)  # 1 KB compressed, 1 MB inflated: inflated to 64 KiB, no more
        assert big.echo("again") == "again"
        transport.release(big)
        raw = Pyro4.Proxy(uri)  # the process's config: pickle
        with pytest.raises(Pyro4.errors.CommunicationError, match="serializer that is not accepted"):
            raw._pyroBind()
        assert Pyro4.config.asDict() == pickle_config
    finally:
        for proxy in proxies:
            transport.release(proxy)
        daemon.shutdown()
        small.shutdown()


@pytest.mark.unit  # (refused before any socket)
def test_what_cannot_be_set_per_daemon_is_checked(monkeypatch):
    monkeypatch.setattr(Pyro4.config, "MAX_MESSAGE_SIZE", 1024 * 1024)
    with pytest.raises(ClusterError, match="MAX_MESSAGE_SIZE.*set it to 0"):
        transport.connect("PYRO:x@127.0.0.1:1")
    transport._NameServerProxy("PYRO:x@127.0.0.1:1")  # the name server's messages fit in 1 MB
    monkeypatch.setattr(Pyro4.config, "MAX_MESSAGE_SIZE", 0)
    monkeypatch.setattr(Pyro4.config, "REQUIRE_EXPOSE", False)
    with pytest.raises(ClusterError, match="REQUIRE_EXPOSE.*callable from the network"):
        transport._Daemon(transport.Limits(), host="127.0.0.1", port=0)


@pytest.mark.cluster
def test_the_transport_counts_each_calls_whole_cpu_beside_its_handling():
    """A call's whole CPU on the serving thread (reading, verifying, decoding, the handler, encoding,
    signing, sending) is counted under the call's name beside its handling: the figure the
    projection takes for the shards' session transfers and flushes."""
    import dataclasses
    import typing
    from gensim_distw2v.io import endpoints
    from gensim_distw2v.io.meter import CALLS
    from gensim_distw2v.protocol import calls, records

    @dataclasses.dataclass
    class Blob(records.Record):
        WHAT: typing.ClassVar[str] = "blob"
        data: bytes

    class Server:
        def take(self, request):
            return len(request.data)

    table = calls.Table("probe", [calls.Call("take", Blob, "take", int, "take bytes")])
    key = b"k" * 32
    daemon = transport._Daemon(transport.Limits(), host="127.0.0.1", port=0)
    daemon._pyroHmacKey = key
    uri = daemon.register(endpoints.endpoint(table, Server()))
    threading.Thread(target=daemon.requestLoop, daemon=True).start()
    link = endpoints.link(str(uri), table, key, timeout=10)
    try:
        before = CALLS.snapshot().get("take", (0, 0.0, 0.0))
        for _ in range(5):
            assert link.call("take", data=os.urandom(8_000_000)) == 8_000_000
        n, handling, whole = (a - b for a, b in zip(CALLS.snapshot()["take"], before))
        assert n == 5 and 0 < handling < whole
        # 40 MB read, verified (HMAC) and decoded: far more than the handler's len()
        assert whole > 5 * handling and whole > 0.01
    finally:
        transport.release(link)
        daemon.shutdown()
