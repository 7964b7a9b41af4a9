"""The bulk channel (gensim_distw2v.io.channel) on real loopback sockets: calls, faults, keys, and
what a peer that is not a well-behaved caller may send; then real shard processes whose merges go by
it, against merges by Pyro4."""
import dataclasses
import socket
import struct
import threading
import time
import typing

import numpy as np
import pytest

from gensim_distw2v import LocalCluster, Word2Vec
from gensim_distw2v.io import channel, endpoints, meter, transport
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.io.gate import Limits
from gensim_distw2v.protocol import calls, errors, records
from gensim_distw2v.protocol.arrays import pack_array, unpack_array

pytestmark = pytest.mark.cluster  # real sockets on loopback (in-process servers), then real shard processes


@dataclasses.dataclass
class Echo(records.Record):
    """A probe's request: an array in, ``times`` times its values back (negative: a refusal)."""

    WHAT: typing.ClassVar[str] = "echo"
    values: dict
    times: float


class Prober:
    def __init__(self):
        self.calls = 0

    def echo(self, request):
        self.calls += 1
        if request.times < 0:
            raise errors.BadRequest(f"times must be >= 0, got {request.times}")
        if request.times == 13:
            raise RuntimeError("unlucky")
        values = unpack_array(request.values, "values", "float32", ndim=2)
        assert values.ctypes.data % channel.ALIGN == 0  # the receiver's arrays view its buffer, aligned
        return {"values": pack_array(values * np.float32(request.times)), "small": pack_array(values[:1, :1])}

    def other(self, request):
        return {}


TABLE = calls.Table("probe", [calls.Call("echo", Echo, "echo", dict, "x"), calls.Call("other", Echo, "other", dict)])
KEY = b"0123456789abcdef0123456789abcdef"


@pytest.fixture(params=[None, KEY], ids=["unkeyed", "keyed"])
def served(request):
    prober = Prober()
    server = channel.ChannelServer(endpoints.endpoint(TABLE, prober).call, ["echo"], hmac_key=request.param,
                                   limits=Limits(handshake_timeout=1.0))
    yield server, prober, request.param
    server.close()


def _values(rows=300, dim=100, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def test_calls_faults_and_arrays_go_through_the_channel(served):
    server, prober, key = served
    link = channel.ChannelLink(server.address, TABLE, key, timeout=10)
    values = _values()
    sent0, received0 = meter.traffic()
    hellos = meter.CALLS.snapshot().get("channel_hello", (0,))[0]
    for times in (2.0, 0.5):  # two calls on one connection: sequence numbers advance
        reply = link.call("echo", values=pack_array(values), times=times)
        back = unpack_array(reply["values"], "values", "float32", shape=values.shape)
        assert np.array_equal(back, values * np.float32(times))
        assert unpack_array(reply["small"], "small", "float32").item() == values[0, 0]  # a few bytes, inline
    # the connection's hello is counted once, apart from the calls (a cost per session, not per merge)
    assert meter.CALLS.snapshot()["channel_hello"][0] == hellos + 1
    deadline = time.monotonic() + 5  # (the server counts a reply once sent: the caller may have it first)
    while min(meter.traffic()[0] - sent0, meter.traffic()[1] - received0) < 4 * values.nbytes \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    sent, received = meter.traffic()
    assert sent - sent0 >= 4 * values.nbytes and received - received0 >= 4 * values.nbytes  # both ends counted
    with pytest.raises(errors.BadRequest, match="times must be >= 0"):
        link.call("echo", values=pack_array(values), times=-1.0)
    with pytest.raises(RuntimeError, match="RuntimeError: unlucky"):
        link.call("echo", values=pack_array(values), times=13.0)
    with pytest.raises(errors.BadRequest, match="the channel serves \\['echo'\\], not 'other'"):
        link.call("other", values=pack_array(values), times=1.0)
    with pytest.raises(errors.BadRequest, match="field 'times' must be float"):
        link.send("echo", {"values": pack_array(values), "times": "2"})
    assert link.call("echo", values=pack_array(values), times=1.0)  # the server served on after each refusal
    assert prober.calls == 5
    link.release()


def test_a_wrong_or_missing_key_is_refused_before_any_call(served):
    server, prober, key = served
    wrong = b"another key, not the cluster's, 32" if key else KEY
    link = channel.ChannelLink(server.address, TABLE, wrong, timeout=10)
    with pytest.raises(channel.LinkBroken):
        link.call("echo", values=pack_array(_values()), times=1.0)
    assert prober.calls == 0
    deadline = time.monotonic() + 5
    while not server.gate.refused and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any("no channel hello" in reason for reason in server.gate.refused)
    if key:
        assert channel.ChannelLink(server.address, TABLE, key, timeout=10).call(
            "echo", values=pack_array(_values()), times=1.0)


class _Raw:
    """A peer speaking the channel by hand (greeting, hello), then sending what it likes."""

    def __init__(self, address, key):
        self.sock = socket.create_connection(address, timeout=5)
        mine, theirs = channel._greet(self.sock, key)
        self.seal = channel._Seal(key, theirs, mine)
        channel._send(self.sock, self.seal, channel._UP, 0, channel.HELLO, None, 4096)
        channel._recv(self.sock, self.seal, channel._DOWN, 0, 4096)

    def call(self, seq, body, kind=channel.CALL):
        channel._send(self.sock, self.seal, channel._UP, seq, kind, body, 1 << 30)
        return channel._recv(self.sock, self.seal, channel._DOWN, seq, 1 << 30)

    def closed(self):
        """Whether the server closed the connection (reads end-of-file within 5 s)."""
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True


def test_tampered_replayed_oversized_and_malformed_messages_close_the_connection(served):
    server, prober, key = served
    body = {"op": "echo", "msg": {"values": pack_array(_values(4, 4)), "times": 1.0}}
    raw = _Raw(server.address, key)
    assert raw.call(1, body)[0] == channel.REPLY
    # a message replayed (its sequence number again) is out of sequence
    channel._send(raw.sock, raw.seal, channel._UP, 1, channel.CALL, body, 1 << 30)
    assert raw.closed()
    # a header announcing more than a message may hold: closed before anything is read or allocated
    raw = _Raw(server.address, key)
    raw.sock.sendall(channel._HEAD.pack(channel.MAGIC, channel.VERSION, channel.CALL, 0, 1, 10, 1)
                     + struct.pack("<Q", 1 << 40))
    assert raw.closed()
    # a buffer reference beyond the message's buffers
    raw = _Raw(server.address, key)
    import msgpack
    meta = msgpack.packb({"op": "echo", "msg": msgpack.ExtType(1, struct.pack("<I", 7))})
    head = channel._HEAD.pack(channel.MAGIC, channel.VERSION, channel.CALL, 0, 1, len(meta), 0)
    parts = [head, meta, bytes(channel._pad(len(meta)))]
    raw.sock.sendall(b"".join(parts) + raw.seal.tag(channel._UP, 1, parts, sum(len(p) for p in parts)))
    assert raw.closed()
    if key:  # one byte changed on the way: the tag does not verify
        raw = _Raw(server.address, key)
        meta = msgpack.packb({"op": "echo", "msg": {"values": pack_array(_values(4, 4)), "times": 1.0}})
        head = channel._HEAD.pack(channel.MAGIC, channel.VERSION, channel.CALL, 0, 1, len(meta), 0)
        parts = [head, meta, bytes(channel._pad(len(meta)))]
        tag = raw.seal.tag(channel._UP, 1, parts, sum(len(p) for p in parts))
        message = bytearray(b"".join(parts))
        message[-20] ^= 1
        raw.sock.sendall(bytes(message) + tag)
        assert raw.closed()
    calls_before = prober.calls
    link = channel.ChannelLink(server.address, TABLE, key, timeout=10)  # the server serves on
    assert link.call("echo", values=pack_array(_values()), times=1.0) and prober.calls == calls_before + 1


def test_a_connection_that_says_nothing_is_cut_at_the_deadline(served):
    server, _prober, key = served
    sock = socket.create_connection(server.address, timeout=5)
    began = time.monotonic()
    try:
        data = sock.recv(4096)  # the server's greeting, then nothing: it waits for the hello
        while data:
            data = sock.recv(4096)
    except OSError:
        pass
    assert time.monotonic() - began < 4.0  # cut at the 1 s deadline, not left open
    assert any("no handshake within 1 s" in reason for reason in server.gate.refused)


def test_calls_to_several_servers_go_out_before_any_reply_is_read(served):
    """``start`` sends and returns; ``result`` reads the reply: a worker's merger sends every shard
    its part, then reads the replies in turn, and each link stays in step (then ``call`` again)."""
    server, prober, key = served
    other = channel.ChannelServer(endpoints.endpoint(TABLE, prober).call, ["echo"], hmac_key=key)
    try:
        links = [channel.ChannelLink(s.address, TABLE, key, timeout=10) for s in (server, other)]
        values = _values()
        for times, link in zip((2.0, 3.0), links):
            link.start("echo", Echo(values=pack_array(values), times=times))
        for times, link in zip((2.0, 3.0), links):
            got = unpack_array(link.result()["values"], "values", "float32", shape=values.shape)
            assert np.array_equal(got, values * np.float32(times))
        links[0].start("echo", Echo(values=pack_array(values), times=-1.0))
        with pytest.raises(errors.BadRequest, match="times must be >= 0"):
            links[0].result()
        with pytest.raises(TypeError, match="echo takes one Echo"):
            links[1].start("echo", {"values": pack_array(values), "times": 1.0})
        assert all(link.call("echo", values=pack_array(values), times=1.0) for link in links)
        assert prober.calls == 5
    finally:
        other.close()


def test_what_a_receiver_would_refuse_is_not_sent_and_the_link_stays_in_step(served):
    server, prober, key = served
    link = channel.ChannelLink(server.address, TABLE, key, timeout=10)
    link.max_message = 4096  # as if the server took no more: refused here, before a byte is sent
    with pytest.raises(ValueError, match="over what a receiver takes"):
        link.call("echo", values=pack_array(_values()), times=1.0)
    assert prober.calls == 0
    link.max_message = 1 << 30
    assert link.call("echo", values=pack_array(_values()), times=1.0)  # the same connection, still in step


def test_a_closed_channel_stops_accepting_and_a_port_nobody_serves_fails_fast():
    server = channel.ChannelServer(lambda op, msg: {}, ["echo"])
    address = server.address
    server.close()
    began = time.monotonic()
    with pytest.raises(channel.LinkBroken):
        channel.ChannelLink(address, TABLE, timeout=30).connect()
    assert time.monotonic() - began < channel.CONNECT_TIMEOUT
    deadline = time.monotonic() + 5  # the acceptor ended (a closed listening socket alone would not wake it)
    while any(t.name == "channel-accept" and t.is_alive() for t in threading.enumerate()) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "channel-accept" and t.is_alive() for t in threading.enumerate())


def test_a_keyed_channel_binds_beyond_loopback_only_with_a_key():
    with pytest.raises(ClusterError, match="without an HMAC key"):
        channel.ChannelServer(lambda op, msg: None, ["echo"], host="0.0.0.0")


def test_merges_by_the_channel_train_what_merges_by_pyro4_train(lee_corpus):
    """One worker, one shard: merges by the channel (the default) and by Pyro4 (``--channel-port -1``)
    both give gensim's numbers (as the one-worker tests of test_cluster ask); the worker's merges
    went by the channel where the shard has one, and by Pyro4 where it has none."""
    import gensim.models

    params = dict(vector_size=16, min_count=2, seed=5, workers=1, epochs=2)
    reference = gensim.models.Word2Vec(lee_corpus, **params)
    lines = {}
    for how, args in (("channel", []), ("pyro4", ["--channel-port", "-1"])):
        with LocalCluster(n_workers=1, n_shards=0) as cluster:
            name = cluster.add_shard(args=args)
            assert cluster.processes[name].wait_for(r"merges: (channel port \d+|Pyro4)", timeout=30)
            model = Word2Vec(lee_corpus, distributed=True, ns_conf=cluster.ns_conf, **params)
            assert np.abs(reference.wv.vectors - model.wv.vectors).max() <= 1e-6, how
            assert np.abs(reference.syn1neg - model.syn1neg).max() <= 1e-6, how
            assert model.cluster_stats["merges"] >= 2 and model.cluster_stats["bytes_up"] > 0
            lines[how] = list(cluster.processes["worker-0"].lines)
    assert any("merges with shard" in line and "by its channel" in line for line in lines["channel"])
    assert not any("by its channel" in line for line in lines["pyro4"])


def test_a_worker_that_cannot_reach_a_shards_channel_merges_by_pyro4(monkeypatch, caplog):
    """A real shard whose channel the caller cannot reach (a firewall that lets Pyro4's port through
    only, made here by refusing the connect): the links say so and carry merges by Pyro4."""
    from gensim_distw2v.io.links import ShardLinks

    def unreachable(link):
        raise channel.LinkBroken(f"channel to {link.address[0]}:{link.address[1]}: TimeoutError: timed out")
    with LocalCluster(n_workers=0, n_shards=1) as cluster:
        uri = transport.lookup(cluster.ns_conf, cluster.names["shard-0"])
        links = ShardLinks([(cluster.names["shard-0"], uri)], cluster.ns_conf["hmac_key"], cluster.ns_conf, "t",
                           timeout=10, bulk=("merge",))
        try:
            monkeypatch.setattr(channel.ChannelLink, "connect", unreachable)
            with caplog.at_level("WARNING", logger="gensim_distw2v.io.links"):
                assert links._channel(0) is False
            assert any("merges with it go by Pyro4" in r.getMessage() for r in caplog.records)
            assert links.call(0, "status").name == cluster.names["shard-0"]  # Pyro4 still answers
        finally:
            links.close()
