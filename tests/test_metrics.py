"""Per-node metrics without sockets: the meter, the dispatcher's book of nodes, the history, the record."""
import dataclasses
import typing

import numpy as np
import pytest

from gensim_distw2v import protocol
from gensim_distw2v.core.book import History, NodeBook
from gensim_distw2v.io import endpoints
from gensim_distw2v.io.meter import CALLS, Meter, traffic
from gensim_distw2v.protocol import calls, records

pytestmark = pytest.mark.unit


@dataclasses.dataclass
class Ask(records.Record):
    """A probe table's request (the calls' counting, served in-process)."""

    WHAT: typing.ClassVar[str] = "ask"
    n: int


def test_meter_counts_cpu_memory_and_traffic_since_its_mark():
    meter = Meter("worker", threads=3)
    meter.mark("s1")
    sent, received = traffic()
    np.linalg.svd(np.random.RandomState(0).rand(300, 300))  # some CPU
    big = np.ones(64 * 2 ** 20 // 8)  # 64 MiB resident
    sample = meter.sample(words=1234, kernel_cpu=0.01, merge_cpu=0.02)
    assert sample.role == "worker" and sample.session == "s1" and sample.threads == 3 and sample.words == 1234
    assert sample.cpu > 0.03 and sample.kernel_cpu == 0.01 and sample.merge_cpu == 0.02
    assert sample.other_cpu == pytest.approx(sample.cpu - 0.03)
    assert sample.rss >= big.nbytes and sample.peak_rss >= sample.rss
    assert (sample.bytes_sent, sample.bytes_received) == (traffic()[0] - sent, traffic()[1] - received)
    assert protocol.NodeMetrics.from_wire(sample.to_wire()) == sample
    meter.mark(None)
    assert meter.sample().session is None and meter.sample().cpu < sample.cpu


def test_kernel_and_merge_cpu_cannot_exceed_the_process_cpu():
    meter = Meter("shard")
    meter.mark("s")
    sample = meter.sample(merge_cpu=1e6)
    assert sample.merge_cpu == sample.cpu and sample.other_cpu == 0.0


def test_calls_served_are_counted_per_call_since_the_mark():
    class Server:
        def spin(self, request):
            return float(np.linalg.norm(np.random.RandomState(request.n).rand(200, 200) @ np.ones(200)))

    table = calls.Table("probe", [calls.Call("spin", Ask, "spin", float, "some CPU")])
    served = endpoints.Endpoint(calls.Handlers(table, Server()))
    meter = Meter("dispatcher", calls=True)
    served.call("spin", {"n": 1})  # before the mark: not in its samples
    meter.mark("s")
    for n in range(3):
        served.call("spin", {"n": n})
    with pytest.raises(ValueError):
        served.call("nothing", {})  # refused, and not counted: only the table's calls are
    with pytest.raises(ValueError):
        served.call(["not", "a", "name"], {})
    sample = meter.sample()
    assert sample.calls["spin"][0] == 3 and 0 < sample.calls["spin"][1] <= sample.cpu
    assert sample.calls["spin"][2] == 0.0  # served in-process: no transport counted the whole calls
    assert set(sample.calls) == {"spin"} and "nothing" not in CALLS.snapshot()
    assert protocol.NodeMetrics.from_wire(sample.to_wire()) == sample
    assert Meter("worker").sample().calls is None  # only a meter asked to shows them


def test_meter_refuses_an_unknown_role():
    with pytest.raises(ValueError, match="role must be one of"):
        Meter("client")


def _node(session="s", words=0, role="worker"):
    return protocol.NodeMetrics(role=role, session=session, seconds=1.0, words=words, cpu=1.0, kernel_cpu=0.5,
                            merge_cpu=0.25, rss=10, peak_rss=20, bytes_sent=1, bytes_received=2, threads=1)


def test_book_rates_over_its_window_and_per_session():
    book = NodeBook(window=10.0)
    for t in range(0, 21):
        book.update("w", _node(words=1000 * t), now=100.0 + t)
    assert book.rate("w") == pytest.approx(1000.0)
    assert len(book.points["w"]) <= 12  # only the window is kept
    view = book.view("w", now=122.5)
    assert view.silent == pytest.approx(2.5) and view.words_per_second == pytest.approx(1000.0)
    book.update("w", _node(session="t", words=5), now=121.5)  # a new session: no rate across sessions
    assert book.rate("w") == 0.0
    assert set(book.of_session("t", ["w", "gone"], now=122.0)) == {"w"}
    assert book.of_session("s", ["w"], now=122.0) == {}
    book.forget("w")
    assert "w" not in book.latest and "w" not in book.points


def test_history_thins_itself_and_keeps_the_last_point():
    history = History(every=1.0, max_points=8)
    kept = [history.add(t * 0.5, 100 * t, loss=3.0 * t) for t in range(200)]
    assert sum(kept) > 8 and len(history.points) <= 8
    assert history.points[-1]["t"] >= 90.0 and history.every > 1.0
    assert [p["t"] for p in history.points] == sorted(p["t"] for p in history.points)
    assert history.points[-1]["words_per_second"] == pytest.approx(200.0)
    assert history.points[-1]["loss"] == pytest.approx(0.03)  # per word, over the last interval
    assert history.points[0]["loss"] is None


def test_history_drops_a_nan_loss():
    history = History()
    for t, loss in enumerate([0.0, float("nan"), 5.0, 8.0]):
        history.add(float(t), 10 * t, loss=loss)
    assert [p["loss"] for p in history.points] == [None, None, None, pytest.approx(0.3)]


@pytest.mark.parametrize("field, value, message", [
    ("role", "client", "role must be one of"),
    ("cpu", -1.0, "cpu must be >= 0"),
    ("bytes_sent", -5, "bytes_sent must be >= 0"),
    ("threads", 0, "threads must be in"),
    ("session", "x" * 100, "session must be a session id"),
    ("calls", {"heartbeat": [-1, 0.0]}, "must be \\[calls, CPU seconds handling them"),
    ("calls", {"heartbeat": [1, float("nan")]}, "must be \\[calls, CPU seconds handling them"),
    ("calls", {"heartbeat": [1]}, "must be \\[calls, CPU seconds handling them"),
    ("calls", {"": [1, 0.0]}, "a call's name must be"),
    ("calls", {f"op{i}": [1, 0.0] for i in range(65)}, "at most 64 calls"),
    ("calls", [1, 2], "field .calls. must be dict"),
])
def test_node_metrics_refuse_bad_values(field, value, message):
    msg = _node().to_wire()
    msg[field] = value
    with pytest.raises(ValueError, match=message):
        protocol.NodeMetrics.from_wire(msg)


def test_node_metrics_refuse_unknown_fields():
    with pytest.raises(ValueError, match="unknown fields"):
        protocol.NodeMetrics.from_wire(dict(_node().to_wire(), password="x"))


def test_the_dispatcher_keeps_its_members_metrics_and_refuses_bad_ones():
    from gensim_distw2v.dispatcher import Dispatcher
    from gensim_distw2v.versions import versions

    dispatcher = Dispatcher()
    worker, shard = protocol.WORKER_PREFIX + "w1", protocol.SHARD_PREFIX + "s1"
    try:
        link = dispatcher.local()
        secret = link.call("hello", name=worker, uri="PYRO:x@127.0.0.1:1", versions=versions(), threads=2)
        shard_secret = link.call("shard_hello", name=shard, uri="PYRO:y@127.0.0.1:2", versions=versions())
        with pytest.raises(ValueError, match="heartbeat: metrics must be a worker's, got role 'shard'"):
            link.call("heartbeat", name=worker, secret=secret, metrics=_node(role="shard"))
        with pytest.raises(ValueError, match="malformed node metrics: rss must be >= 0"):
            link.send("shard_beat", {"name": shard, "secret": shard_secret, "metrics": dict(_node(role="shard").to_wire(), rss=-1)})
        link.call("heartbeat", name=worker, secret=secret, metrics=_node(session=None, words=7))
        link.call("shard_beat", name=shard, secret=shard_secret, metrics=_node(session=None, role="shard"))
        nodes = {node["name"]: node for node in dispatcher.overview()["nodes"]}
        assert set(nodes) == {worker, shard}  # no session: those heard, as last heard
        assert nodes[worker]["words"] == 7 and nodes[worker]["threads"] == 1 and nodes[worker]["last_heard"] < 5
        assert nodes[shard]["cpu"] == {"kernel": 0.5, "merge": 0.25, "other": 0.25}
        assert dispatcher.overview()["session"] is None
        link.call("leave", name=worker, secret=secret)
        assert {node["name"] for node in dispatcher.overview()["nodes"]} == {shard}
    finally:
        dispatcher.shutdown()


def test_a_round_report_carries_a_workers_metrics_only():
    report = protocol.RoundReport(jobs=[], loss=0.0, flush=0, exact=True, merge_seconds=0.0, merge_cpu=0.0, kernel_cpu=0.0,
                              stall_seconds=0.0, bytes_up=0, bytes_down=0, turn=[0, 0], node=_node())
    assert protocol.RoundReport.from_wire(report.to_wire()).node == _node()
    report.node = _node(role="shard")
    with pytest.raises(ValueError, match="round report: node must be a worker's metrics, got role 'shard'"):
        protocol.RoundReport.from_wire(report.to_wire())


def test_a_handler_names_its_call_more_finely_and_the_name_does_not_stick():
    class Server:
        def merge(self, request):
            if request.n:
                CALLS.name("merge_big")
            return request.n

    table = calls.Table("probe", [calls.Call("merge", Ask, "merge", int, "a merge")])
    served = endpoints.Endpoint(calls.Handlers(table, Server()))
    before = CALLS.snapshot()
    for n in (1, 0, 0, 1, 1):
        served.call("merge", {"n": n})
    after = CALLS.snapshot()
    assert after["merge_big"][0] - before.get("merge_big", (0,))[0] == 3
    assert after["merge"][0] - before.get("merge", (0,))[0] == 2
    with pytest.raises(ValueError, match="malformed node metrics"):
        protocol.NodeMetrics.from_wire(dict(_node().to_wire(), calls={"merge": [1, 0.1, -1.0]}))
    assert protocol.NodeMetrics.from_wire(dict(_node().to_wire(), calls={"merge": [1, 0.1]})).calls == \
        {"merge": [1, 0.1]}  # an older node's (no whole calls' CPU)


def test_the_meter_counts_cpu_by_thread_group_and_an_ended_thread_keeps_its_group():
    import threading
    import time

    def spin(seconds, done=None):
        began = time.thread_time()
        while time.thread_time() - began < seconds:
            pass
        if done is not None:
            done.wait()

    meter = Meter("worker", threads=1)
    meter.mark("s")
    go = threading.Event()
    trainer = threading.Thread(target=spin, args=(0.05, go), name="trainer-0")
    beat = threading.Thread(target=spin, args=(0.03,), name="heartbeat")
    trainer.start()
    beat.start()
    beat.join()
    first = meter.sample()  # the heartbeat thread is gone by now: its CPU is "ended"
    go.set()
    trainer.join()
    second = meter.sample()  # the trainer, seen alive at the first sample, keeps its group once gone
    assert first.thread_cpu["ended"] >= 0.025 and "heartbeat" not in first.thread_cpu
    assert second.thread_cpu["trainers"] >= first.thread_cpu.get("trainers", 0.0)
    assert sum(second.thread_cpu.values()) == pytest.approx(second.cpu, abs=1e-6)
    assert protocol.NodeMetrics.from_wire(second.to_wire()) == second
    from gensim_distw2v.io.meter import thread_group
    assert [thread_group(n) for n in ("trainer-3", "merger", "shard-link_0", "Pyro-Worker-1", "housekeeper",
                                      "MainThread", "session", "heartbeat", "x")] == \
        ["trainers", "merger", "merger", "serving", "housekeeping", "main", "session", "heartbeat", "other"]
    with pytest.raises(ValueError, match="thread_cpu"):
        protocol.NodeMetrics.from_wire(dict(second.to_wire(), thread_cpu={"trainers": -1.0}))
