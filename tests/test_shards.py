"""Parameter shards: the row layout and the typed messages in-process, the merge arithmetic through
several shards against one, and real shard processes lost during training."""
import os
import signal
import threading

import numpy as np
import pytest

from gensim_distw2v import LocalCluster, Word2Vec, protocol
from gensim_distw2v.io import transport
from gensim_distw2v.protocol import errors
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.core.merge import GlobalWeights

PARAMS = dict(vector_size=16, min_count=2, seed=5, workers=1)


# ------------------------------------------------------------------ the layout, in-process
@pytest.mark.parametrize("n_shards", [1, 2, 3, 7, 300])  # (300: owners sorted as uint16)
@pytest.mark.unit
def test_layout_splits_rows_and_puts_them_back(n_shards):
    layout = ShardLayout(n_shards)
    n_rows = 50
    assert sum(layout.count(n_rows, p) for p in range(n_shards)) == n_rows
    matrix = np.arange(n_rows * 2, dtype=np.float32).reshape(n_rows, 2)
    rows = np.array([0, 3, 4, 9, 20, 21, 49], dtype=np.uint32)
    values = matrix[rows]
    back = np.zeros_like(matrix)
    for shard, (local, local_values, none) in enumerate(layout.split(rows, values, None)):
        assert none is None and np.all(np.diff(local.astype(np.int64)) > 0)
        own = layout.rows_of(matrix, shard)
        assert np.array_equal(own[local], local_values)  # the shard's own rows hold the same values
        assert layout.to_global(local, shard).dtype == np.uint32
        back[layout.to_global(local, shard)] = local_values
        # a global range's rows of this shard are exactly its local range
        lo, hi = layout.local_range(4, 21, shard)
        assert set(layout.to_global(np.arange(lo, hi), shard).tolist()) == {r for r in range(4, 21)
                                                                             if r % n_shards == shard}
    assert np.array_equal(back[rows], values) and not back[np.setdiff1d(np.arange(n_rows), rows)].any()


@pytest.mark.unit
def test_layout_refuses_a_bad_shard_count():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="n_shards must be an int >= 1"):
            ShardLayout(bad)


# ------------------------------------------------------------------ typed messages, in-process
@pytest.mark.unit
def test_records_check_their_fields():
    report = protocol.RoundReport(jobs=[[1, 5]], loss=0.5, flush=-1, exact=False, merge_seconds=1.0, merge_cpu=0.5,
                              kernel_cpu=2.0, stall_seconds=0.0, bytes_up=10, bytes_down=20, turn=[1, 3])
    assert protocol.RoundReport.from_wire(report.to_wire()) == report
    msg = report.to_wire()
    with pytest.raises(ValueError, match="round report: unknown fields \\['extra'\\]"):
        protocol.RoundReport.from_wire({**msg, "extra": 1})
    with pytest.raises(ValueError, match="missing field 'loss'"):
        protocol.RoundReport.from_wire({k: v for k, v in msg.items() if k != "loss"})
    with pytest.raises(ValueError, match="field 'bytes_up' must be int, got str"):
        protocol.RoundReport.from_wire({**msg, "bytes_up": "10"})
    with pytest.raises(ValueError, match="bytes_down must be >= 0"):
        protocol.RoundReport.from_wire({**msg, "bytes_down": -1})
    with pytest.raises(ValueError, match="expected a dict, got list"):
        protocol.RoundReport.from_wire([1, 2])
    beat = protocol.ShardBeat(session=None, ranks=[0, 2], next_rank=3, hello=False)
    assert protocol.ShardBeat.from_wire(beat.to_wire()) == beat
    with pytest.raises(ValueError, match="field 'session' must be str"):
        protocol.ShardBeat.from_wire({**beat.to_wire(), "session": 5})
    spec = dict(session="s", index=1, count=2, vocab_size=10, vector_size=4, weights=["syn0", "syn1neg"],
                merge="damp", merge_dtype="float16", damp_rows={"syn0": 3, "syn1neg": 2}, hot_rows=5, versions={},
                token="t")
    assert protocol.ShardSpec.from_wire(spec).damp_rows == {"syn0": 3, "syn1neg": 2}
    assert protocol.ShardSpec.from_wire(spec).cold_output_down == "held"  # (a spec without it: as before)
    for field, bad, problem in (("index", 2, "index must be in \\[0, count\\)"), ("weights", ["cum_table"], "weights"),
                                ("merge", "avg", "unknown merge rule"), ("damp_rows", {"syn0": -1}, "damp_rows"),
                                ("hot_rows", 11, "hot_rows must be in"), ("hot_rows", "5", "hot_rows"),
                                ("cold_output_down", "every", "cold_output_down must be one of")):
        with pytest.raises(ValueError, match=problem):
            protocol.ShardSpec.from_wire({**spec, field: bad})


@pytest.mark.unit
def test_reply_records_refuse_what_a_peer_could_get_wrong():
    for record, msg, problem in (
            (protocol.Hello, {"name": "gensim_distw2v.worker.x", "uri": "PYRO:x@127.0.0.1:1", "versions": {}, "threads": 0},
             "threads must be in \\[1, 4096\\]"),
            (protocol.Beat, {"session": None}, "missing field 'hello'"),
            (protocol.Opened, {"session": "s", "shards": [], "token": "t"}, "shards must be a non-empty list of \\[name, uri\\]"),
            (protocol.Opened, {"session": "s", "shards": [["a"]], "token": "t"}, "shards must be a non-empty list"),
            (protocol.JobBatch, {"jobs": [], "drained": -1}, "drained must be an epoch >= 0 or None"),
            (protocol.JobBatch, {"jobs": "x", "drained": None}, "field 'jobs' must be list"),
            (protocol.Joined, {"config": {}, "rank": 0, "shards": [["a", "b"]]},
             "malformed session config: missing field 'versions'"),
            (protocol.Joined, {"config": [], "rank": 0, "shards": [["a", "b"]]},
             "malformed join reply: field 'config' must be dict"),
            (protocol.Status, {"versions": {}, "workers": {"w": {"threads": 1}}, "shards": {}, "session": None},
             "malformed worker status: missing field 'rank'"),
            (protocol.ShardStatus, {"name": "s", "session": {"id": "x"}},
             "malformed held session status: missing field 'index'"),
            (protocol.ShardDownload, {"session": "s", "name": "syn0", "lo": 0, "hi": 1, "rank": -1},
             "rank must be the downloading worker's rank"),
            (protocol.ShardDownload, {"session": "s", "name": "syn0", "lo": 0, "hi": 1, "rank": True},
             "field 'rank' must be int")):
        with pytest.raises(ValueError, match=problem):
            record.from_wire(msg)
    assert protocol.JobBatch.from_wire({"jobs": [], "drained": None}).drained is None


# ------------------------------------------------------------------ merge arithmetic through shards, in-process
@pytest.mark.parametrize("rule", ["damp", "sum", "mean"])
@pytest.mark.unit
def test_shards_compute_what_one_server_computes(rule):
    """The rules are per row: three workers' rounds through 3 shards give the global weights and the
    replies one server gives, row for row (exact rounds, nothing held back)."""
    rng = np.random.default_rng(0)
    n_rows, dim, n_workers = 40, 6, 3
    start = rng.normal(size=(n_rows, dim)).astype(np.float32)
    damp_rows, hot = {"syn0": 12, "syn1neg": 0}, 20  # rows 12-19: a snapshot, undamped
    layout = ShardLayout(3)
    one = GlobalWeights({"syn0": start.copy()}, rule=rule, damp_rows=damp_rows, delta_rows=hot)
    shards = [GlobalWeights({"syn0": np.ascontiguousarray(layout.rows_of(start, p))}, rule=rule,
                            damp_rows={name: layout.count(n, p) for name, n in damp_rows.items()},
                            delta_rows=layout.count(hot, p)) for p in range(3)]
    for worker in range(n_workers):
        for server in [one] + shards:
            server.add_worker(worker)
    for round_ in range(4):
        for worker in range(n_workers):
            rows = np.sort(rng.choice(n_rows, size=15, replace=False)).astype(np.uint32)
            values = (0.1 * rng.normal(size=(len(rows), dim))).astype(np.float32)
            missed, got = one.apply(worker, 0, n_rows, {"syn0": (rows, values, None)}, exact=True)
            expected = {}
            for way, reply in (("missed", missed), ("values", got)):
                r, v, _ = reply["syn0"]
                expected.update({(way, int(row)): value for row, value in zip(r, v)})
            through = {}
            for p, (local, local_values, _) in enumerate(layout.split(rows, values, None)):
                lo, hi = layout.local_range(0, n_rows, p)
                missed, got = shards[p].apply(worker, lo, hi, {"syn0": (local, local_values, None)}, exact=True)
                for way, reply in (("missed", missed), ("values", got)):
                    r, v, _ = reply["syn0"]
                    through.update({(way, int(row)): value for row, value in zip(layout.to_global(r, p), v)})
            assert through.keys() == expected.keys(), (rule, round_, worker)
            for key, value in expected.items():
                np.testing.assert_allclose(through[key], value, rtol=0, atol=1e-6)
    for p in range(3):
        np.testing.assert_allclose(shards[p].weights["syn0"], layout.rows_of(one.weights["syn0"], p), atol=1e-6)
    assert sum(s.damped for s in shards) == one.damped


# ------------------------------------------------------------------ real shard processes
@pytest.mark.cluster
def test_the_dispatcher_holds_no_weights(lee_corpus):
    """Weights go to and come from the shards only: the dispatcher refuses them, naming where they are."""
    from gensim_distw2v.client.training import DistributedTraining, ShardLinks, find_dispatcher

    with LocalCluster(n_workers=1, n_shards=2) as cluster:
        model = Word2Vec(lee_corpus, distributed=True, ns_conf=cluster.ns_conf, epochs=1, **PARAMS)
        assert len(model.cluster_stats["shards"]) == 2
        assert all(s["merges"] > 0 and s["bytes_in"] > 0 for s in model.cluster_stats["shards"].values())  # both took merges
        training = DistributedTraining(model, cluster.ns_conf)
        proxy = find_dispatcher(cluster.ns_conf)
        config, arrays = training.setup.config(1, False, 1)
        opened = proxy.call("open_session", config)
        assert len(opened.shards) == 2
        with pytest.raises(ValueError, match="the weights go to the session's shards"):
            proxy.call("upload", session=opened.session, name="syn0", lo=0, array=protocol.pack_array(arrays["syn0"][:2]),
                       token=opened.owner)
        with pytest.raises(ValueError, match="the weights are on the session's shards"):
            proxy.call("download", session=opened.session, name="syn1neg", lo=0, hi=1, token=opened.token)
        with pytest.raises(errors.Forbidden, match="download: not this session's token"):  # its id is public
            proxy.call("download", session=opened.session, name="cum_table", lo=0, hi=1)
        links = ShardLinks(opened.shards, cluster.ns_conf["hmac_key"], cluster.ns_conf, [
            protocol.shard_capability(opened.owner, opened.session, i) for i in range(len(opened.shards))])
        links.close(opened.session)
        proxy.call("close", session=opened.session, token=opened.owner)
        # a real shard process holding a started session refuses its rows to a caller without the session's
        # token, and keeps serving
        sid, links, _resumed = training.setup.open(proxy, config, arrays)
        for shard in range(2):
            with pytest.raises(errors.Forbidden, match="download: not this session's token"):
                links.call(shard, "download", session=sid, name="syn0", lo=0, hi=1, rank=0, token="a guess")
        links.close(sid)
        proxy.call("close", session=sid, token=training.run.token)
        transport.release(proxy)
        again = Word2Vec(lee_corpus, distributed=True, ns_conf=cluster.ns_conf, epochs=1, **PARAMS)
        assert all(s["merges"] > 0 for s in again.cluster_stats["shards"].values())


@pytest.mark.parametrize("how", ["killed", "stopped"])
@pytest.mark.cluster
def test_lost_shard_stops_training_with_a_clear_error(lee_corpus, how):
    """A shard dies (SIGKILL) or is frozen (SIGSTOP: silent past the timeout) mid-training: train()
    raises naming it and the command that restarts it; the cluster then serves the next session on
    the shards left and on a new one."""
    with LocalCluster(n_workers=2, n_shards=2, worker_timeout=3.0) as cluster:
        victim = cluster.processes["shard-1"]
        name = cluster.names["shard-1"]
        corpus = lee_corpus * 20
        result = {}

        def train():
            try:
                Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, epochs=2, sync_words=2000, **PARAMS)
            except Exception as err:  # noqa: BLE001 - the test looks at it
                result["error"] = err
        thread = threading.Thread(target=train)
        thread.start()
        victim.wait_for(r"session \S+ started on shard", timeout=60)
        dispatcher = cluster.processes["dispatcher"]
        dispatcher.wait_for(r"worker \S+ joined session", timeout=60)
        os.kill(victim.pid, signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        try:
            thread.join(timeout=120)
            assert not thread.is_alive(), "train() hangs after losing a shard"
            error = result.get("error")
            assert isinstance(error, (ClusterError, RuntimeError)), error
            assert name in str(error) and "python -m gensim_distw2v.shard --ns-host 127.0.0.1" in str(error), error
            dispatcher.wait_for(rf"shard {name} (of session \S+ )?lost", timeout=30)
        finally:
            if how == "stopped":  # SIGKILL ends a stopped process (a SIGCONT first lets it say hello again,
                victim.kill()     # and the next session could pick it in the moment before it dies)
        cluster.add_shard()
        model = Word2Vec(lee_corpus, distributed=True, ns_conf=cluster.ns_conf, epochs=1, **PARAMS)
        assert model.cluster_stats["raw_words"] == sum(len(s) for s in lee_corpus)
        assert len(model.cluster_stats["shards"]) == 2 and name not in model.cluster_stats["shards"]
