"""Seeing the cluster, with real processes: per-node metrics in ``cluster_stats`` and the log,
TensorBoard events read back with TensorBoard's own reader, the dispatcher's status page (its
JSON during a run, and in a real browser), the CLI's options."""
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

from gensim_distw2v import LocalCluster, Word2Vec
from gensim_distw2v.io import statuspage

from . import browser

pytest.importorskip("tensorboardX", reason="the test extra installs tensorboardX")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                        reason="the test extra installs tensorboard (its event reader)")


def _fetch(url):
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.load(reply)


class _Poller(threading.Thread):
    """Fetches the status JSON every 0.1 s until stopped."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.seen, self.stop = url, [], threading.Event()

    def run(self):
        while not self.stop.wait(0.1):
            self.seen.append(_fetch(self.url))


@pytest.fixture(scope="module")
def run(lee_corpus, tmp_path_factory):
    """One keyed cluster of 2 workers and 2 shards with a status page; one training with
    TensorBoard (scores at every epoch end) while the page's JSON is polled; its log."""
    board = tmp_path_factory.mktemp("board")
    handler = _Capture()
    logging.getLogger("gensim_distw2v").addHandler(handler)
    logging.getLogger("gensim_distw2v").setLevel(logging.INFO)
    try:
        with LocalCluster(n_workers=2, n_shards=2, status_port=0) as cluster:
            poller = _Poller(cluster.status_url + "status.json")
            model = Word2Vec(min_count=2, epochs=4, seed=3, distributed=True, ns_conf=cluster.ns_conf,
                             tensorboard_dir=str(board), tensorboard_quality=True, tensorboard_words=300)
            corpus = lee_corpus * 8  # epochs of a few seconds: long enough for progress lines, heartbeats, snapshots
            model.build_vocab(corpus)
            poller.start()
            trained, raw = model.train(corpus, total_examples=model.corpus_count, epochs=model.epochs,
                                       compute_loss=True, report_delay=0.05)
            poller.stop.set()
            poller.join()
            time.sleep(statuspage.SNAPSHOT_SECONDS + 0.1)  # (the page's snapshot is up to that old)
            after = _fetch(cluster.status_url + "status.json")
    finally:
        logging.getLogger("gensim_distw2v").removeHandler(handler)
    return {"model": model, "raw": raw, "trained": trained, "board": board, "seen": poller.seen,
            "after": after, "log": handler.lines}


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.mark.cluster
def test_every_node_reports_its_cpu_memory_traffic_and_words(run):
    stats = run["model"].cluster_stats
    nodes = stats["nodes"]
    roles = sorted(node["role"] for node in nodes.values())
    assert roles == ["dispatcher", "shard", "shard", "worker", "worker"]
    workers = {name: node for name, node in nodes.items() if node["role"] == "worker"}
    # the last merge round's report carries the worker's figures as it ends: every word is in them
    assert sum(node["words"] for node in workers.values()) == run["raw"]
    for name, node in nodes.items():
        assert 30 * 2 ** 20 < node["rss"] <= node["peak_rss"] < 4 * 2 ** 30, name
        assert node["cpu"] >= node["kernel_cpu"] + node["merge_cpu"] - 1e-9
        assert node["other_cpu"] == pytest.approx(node["cpu"] - node["kernel_cpu"] - node["merge_cpu"])
        assert node["bytes_sent"] > 0 and node["bytes_received"] > 0, name
    for name, node in workers.items():
        assert node["kernel_cpu"] > 0 and node["merge_cpu"] > 0 and node["threads"] == 1
        counts = stats["workers"][name]
        # the wire's bytes (headers, every call) are at least the merges' payload
        assert node["bytes_sent"] >= counts["bytes_up"] and node["bytes_received"] >= counts["bytes_down"]
    shards = [node for node in nodes.values() if node["role"] == "shard"]
    assert all(node["merge_cpu"] > 0 and node["kernel_cpu"] == 0 for node in shards)
    # what the workers sent, the shards received (and the dispatcher, and the client's uploads)
    assert sum(n["bytes_received"] for n in shards) >= 0.9 * sum(stats["workers"][w]["bytes_up"] for w in workers)


@pytest.mark.cluster
def test_the_closing_summary_has_one_line_per_node(run):
    lines = [line for line in run["log"] if line.startswith("node ")]
    assert sorted(line.split(":")[0][5:] for line in lines) == sorted(run["model"].cluster_stats["nodes"])
    assert all(re.search(r"CPU seconds kernel [\d.]+ / merge [\d.]+ / other [\d.]+ .* RSS \d+ MB \(peak \d+ MB\), "
                         r"sent [\d.]+ MB, received [\d.]+ MB", line) for line in lines)


@pytest.mark.cluster
def test_progress_lines_carry_every_node(run):
    progress = [line for line in run["log"] if "- PROGRESS:" in line]
    assert progress, "report_delay=0.05 gives progress lines"
    assert any(re.search(r"nodes \(CPU, RSS\): dispatcher \d+% \d+MB, shard \w+ \d+% \d+MB", line)
               for line in progress)


@pytest.mark.cluster
def test_the_dispatcher_counts_its_calls_and_no_member_polls_it_in_a_loop(run):  # and the joining's CPU
    """The dispatcher's calls, call by call (what its CPU went to), and their rates: a heartbeat
    about once a second from each worker and shard (a shard not yet holding the session used to be
    answered at once, over and over, until the client opened it there)."""
    stats = run["model"].cluster_stats
    dispatcher = next(n for n in stats["nodes"].values() if n["role"] == "dispatcher")
    calls, seconds = dispatcher["calls"], dispatcher["seconds"]
    assert {"heartbeat", "shard_beat", "get_jobs", "round_done", "progress", "put_jobs"} <= set(calls)
    # [calls, CPU handling them, CPU in the whole calls (transport included)]: each within the next
    assert all(n >= 1 and 0 <= cpu <= whole <= dispatcher["cpu"] for n, cpu, whole in calls.values())
    assert sum(whole for *_, whole in calls.values()) <= dispatcher["cpu"]
    assert sum(whole for *_, whole in calls.values()) > sum(cpu for _, cpu, _ in calls.values())
    # the workers' joining (join, downloads, replica: per session) is counted apart from their merges
    assert 0 < stats["setup_cpu"] and all(0 < w["setup_cpu"] for w in stats["workers"].values())
    for op, members in (("heartbeat", len(stats["workers"])), ("shard_beat", len(stats["shards"]))):
        # one a second each, and a few more for the session's news (opened, running, closed)
        assert calls[op][0] <= members * (seconds + 6), (op, calls[op][0], seconds)


@pytest.mark.cluster
def test_tensorboard_events_read_back(run):
    model, board = run["model"], run["board"]
    open_to_others = [(str(path), oct(path.lstat().st_mode & 0o777)) for path in board.rglob("*")
                      if path.lstat().st_mode & 0o077]
    assert len(list(board.rglob("*"))) >= 3 and open_to_others == []  # the events, the projector's vectors: 0600
    events = event_accumulator.EventAccumulator(str(board), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    workers = [name.rsplit(".", 1)[-1] for name, n in model.cluster_stats["nodes"].items() if n["role"] == "worker"]
    wanted = {"train/loss", "train/loss_per_word", "train/words_per_second", "train/learning_rate",
              "network/bytes_up_per_word", "network/bytes_down_per_word", "merge/share_of_wall_time",
              "quality/analogy", "quality/ws353", "quality/simlex999", "node/dispatcher/cpu_percent",
              "node/dispatcher/rss_mb"} | {f"node/worker-{w}/{what}" for w in workers
                                           for what in ("words_per_second", "cpu_percent", "kernel_cpu",
                                                        "merge_cpu", "other_cpu", "rss_mb")}
    assert wanted <= tags, sorted(wanted - tags)
    # scores once per epoch, at the words trained by then
    quality = events.Scalars("quality/ws353")
    assert len(quality) == model.epochs and all(-1 <= q.value <= 1 for q in quality)
    assert quality[-1].step == run["trained"]
    rate = events.Scalars("train/learning_rate")
    assert [r.step for r in rate] == sorted(r.step for r in rate)
    assert model.alpha + 1e-6 >= rate[0].value > rate[-1].value >= model.min_alpha - 1e-6  # (float32 in the events)
    loss = [e.value for e in events.Scalars("train/loss")]
    assert loss == sorted(loss) and loss[-1] == pytest.approx(model.get_latest_training_loss(), rel=1e-6)
    assert all(e.wall_time > 1.7e9 for e in events.Scalars("train/words_per_second"))
    rss = events.Scalars(f"node/worker-{workers[0]}/rss_mb")
    assert all(30 < e.value < 4096 for e in rss)


@pytest.mark.cluster
def test_tensorboard_projector_has_the_most_frequent_words(run):
    model, board = run["model"], run["board"]
    config = (board / "projector_config.pbtxt").read_text()
    folder = board / re.search(r'tensor_path: "([^"]+)/tensors.tsv"', config).group(1)
    words = (folder / "metadata.tsv").read_text().splitlines()
    assert words == model.wv.index_to_key[:300]
    vectors = np.loadtxt(folder / "tensors.tsv", delimiter="\t")
    np.testing.assert_allclose(vectors, model.wv.vectors[:300], rtol=1e-4, atol=1e-5)


@pytest.mark.cluster
def test_status_json_during_the_run(run):
    live = [snap for snap in run["seen"] if snap["session"] and snap["session"]["state"] == "running"
            and snap["session"]["words"] > 0]
    assert live, f"no running session among {len(run['seen'])} snapshots"
    last = live[-1]
    workers = {name for name, n in run["model"].cluster_stats["nodes"].items() if n["role"] == "worker"}
    assert workers <= {node["name"] for node in last["nodes"] if node["role"] == "worker"}
    assert 0 < last["session"]["progress"] <= 1 and last["session"]["epochs"] == run["model"].epochs
    assert last["session"]["workers"] == 2 and last["session"]["shards"] == 2
    assert any(node["words"] > 0 and node["rss"] > 0 for node in last["nodes"] if node["role"] == "worker")
    # the page shows no secret: no token, no key
    assert "token" not in json.dumps(run["seen"]) and "hmac" not in json.dumps(run["seen"]).lower()
    words = [snap["session"]["words"] for snap in live]
    assert words == sorted(words)
    assert run["after"]["session"] is None or run["after"]["session"]["state"] != "running"


@pytest.mark.system
def test_status_page_in_a_real_browser(lee_corpus, tmp_path):
    browser.require()
    outcome = []

    def train():
        try:
            outcome.append(model.train(lee_corpus, total_examples=model.corpus_count, epochs=model.epochs))
        except Exception as err:  # noqa: BLE001 - the cluster is closed under it once the shot is taken
            outcome.append(err)

    with LocalCluster(n_workers=2, n_shards=1, status_port=0) as cluster:
        model = Word2Vec(min_count=2, epochs=150, distributed=True, ns_conf=cluster.ns_conf, cluster_timeout=5)
        model.build_vocab(lee_corpus)
        trainer = threading.Thread(target=train, daemon=True)
        trainer.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snap = _fetch(cluster.status_url + "status.json")
            if snap["session"] and snap["session"]["words"] > 0 and \
                    sum(node["role"] == "worker" for node in snap["nodes"]) == 2:
                break
            time.sleep(0.1)
        names = [node["name"].rsplit(".", 1)[-1] for node in snap["nodes"] if node["role"] == "worker"]
        shot = tmp_path / "status.png"
        browser.screenshot(cluster.status_url, shot)
        running = not outcome
        dom = browser.dump_dom(cluster.status_url)
    trainer.join(timeout=60)
    text = browser.ocr(shot)
    assert running, "the screenshot was to be taken during training: train longer"
    for name in names:
        assert browser.ocr_finds(text, name), f"worker {name} not legible in the screenshot: {text!r}"
    assert not browser.ocr_finds(text, "0123456789ab")
    assert all(name in dom for name in names) and "running" in dom


@pytest.mark.cluster
def test_cli_status_page_and_tensorboard(tmp_path):
    from gensim.test.utils import datapath

    out = subprocess.run([sys.executable, "-m", "gensim_distw2v", "train", datapath("lee_background.cor"),
                          "--output", str(tmp_path / "lee.model"), "--min-count", "2", "--epochs", "2",
                          "--tensorboard-dir", str(tmp_path / "tb"), "--tensorboard-words", "50", "--evaluate",
                          "--status-port", "0", "--quiet"], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)  # not the checkout: the installed package, with its kernel
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"status page: http://127\.0\.0\.1:\d+/", out.stdout)
    events = event_accumulator.EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    assert len(events.Scalars("quality/analogy")) == 2
    assert len(next((tmp_path / "tb").rglob("metadata.tsv")).read_text().splitlines()) == 50
    assert os.path.exists(tmp_path / "lee.model")


@pytest.mark.cluster
def test_each_node_counts_its_threads_and_the_merges_compiled_cpu(run):
    """What the projection reads beside the CPU totals: each worker's and shard's CPU by thread group
    (trainers, merger, heartbeat, ...: the clock-driven ones apart), and of the routine rounds' merge
    CPU, the compiled calls' (which release the GIL), on both sides."""
    stats = run["model"].cluster_stats
    nodes = {name: n for name, n in stats["nodes"].items() if n["role"] in ("worker", "shard")}
    assert {n["role"] for n in nodes.values()} == {"worker", "shard"}
    for node in nodes.values():
        groups = node["thread_cpu"]
        assert sum(groups.values()) == pytest.approx(node["cpu"], rel=0.05, abs=0.05)
        assert groups.get("heartbeat", 0.0) > 0 and groups.get("heartbeat") < node["cpu"] / 2
        if node["role"] == "worker":
            assert groups["trainers"] >= node["kernel_cpu"] * 0.9 and groups["merger"] > 0
        else:
            assert groups["serving"] > 0  # the shard's Pyro4 threads serve the merges
    nogil, merge = stats["routine_nogil_cpu"], stats["merge_cpu"]
    assert 0 < nogil["workers"] < merge["workers"] - stats["flush_cpu"]["workers"]
    assert 0 < nogil["shards"] < merge["shards"] - stats["flush_cpu"]["shards"]
