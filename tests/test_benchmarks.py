"""The benchmarks run end to end on small data (their figures are measured by hand; here: they work).

Each benchmark is a script; these tests run it as a user would, on gensim's small ``lee`` corpus,
and check the JSON it prints, so a change that breaks a benchmark fails CI rather than the next
measurement.
"""
import json
import os
import subprocess
import sys

import pytest
from gensim.test.utils import datapath

from .benchmark_modules import load

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def run(script, *args, timeout=600):
    out = subprocess.run([sys.executable, os.path.join(BENCHMARKS, script), *args], capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.system
def test_compare_gensim_runs_every_mode():
    """Every mode at one K (two workers, so the cluster's runs merge: bytes move both ways)."""
    out = run("compare_gensim.py", "--corpus", datapath("lee_background.cor"), "--workers", "2", "--epochs", "1",
              "--seeds", "1", "--vector-size", "20", "--json")
    table = {(row["mode"], row["k"]): row for row in json.loads(out.strip().splitlines()[-1])["table"]}
    assert set(table) == {(m, 2) for m in ("gensim", "gensim_cf", "dist", "dist_cf")}
    for row in table.values():
        assert row["raw_wps"] > 0 and -1 <= row["ws353"] <= 1 and row["speedup"] == 1.0  # over the first K: itself
    for mode in ("dist", "dist_cf"):
        assert table[(mode, 2)]["bytes_up_per_word"] > 0 and table[(mode, 2)]["bytes_down_per_word"] > 0
    assert "K=2: dist_cf/gensim_cf raw words/s" in out and "K=2: dist/gensim raw words/s" in out


@pytest.mark.system
def test_multihost_builds_its_network_and_removes_it():
    out = run("multihost.py", "--corpus", datapath("lee_background.cor"), "--max-words", "200000", "--workers", "2",
              "--merge", "damp,mean", "--json")
    if "multihost benchmark skipped" in out:  # not Linux, or not root: it must say why and exit 0
        assert os.geteuid() != 0 or not sys.platform.startswith("linux")
        pytest.skip(out.strip())
    result = json.loads(out.strip().splitlines()[-1])
    assert [(r["k"], r["rule"]) for r in result["results"]] == [(2, "damp"), (2, "mean")]
    for row in result["results"]:
        assert 0 < row["merge_share"] < 1 and row["up_per_word_per_worker"] > 0 and row["down_per_word_per_worker"] > 0
        link = row["link_per_word"]  # counted on the NICs: the workers' hosts carry the merges
        assert row["shards"] == 2 and link["worker_host_in"] > 0 and link["worker_host_out"] > 0
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "gnl" not in left, left


@pytest.mark.system
def test_scaling_reports_per_word_costs_and_a_projection():
    """Per-word costs of clusters of several K (and KxT), the model of this machine beside what it
    measured, and a projection listing every limit by name (the model itself: test_projection.py)."""
    projection = load("projection")
    out = run("scaling.py", "--corpus", datapath("lee_background.cor"), "--workers", "2,3x2", "--epochs", "1",
              "--shards", "2", "--project-k", "2,8", "--links", "1,10", "--gensim-workers", "2",
              "--project-corpus-words", "1e9", "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert [(r["K"], r["threads"]) for r in result["runs"]] == [(2, 1), (3, 2)]
    assert "epoch flushes" in out and "cluster/gensim" in out
    for run_ in result["runs"]:
        assert run_["worker_flush_us"] > 0 and run_["worker_routine_us"] >= 0  # every run ends its epoch by a flush
        assert set(run_["vs_gensim"]) == {"gensim:1", "gensim_cf:1", "gensim:2", "gensim_cf:2"}
    assert [(c["K"], c["threads"]) for c in result["this_machine"]] == [(2, 1), (3, 2)]
    assert all(c["model_wps"] > 0 and c["ratio"] > 0 for c in result["this_machine"])
    for run_ in result["runs"]:
        for key in ("bytes_up_per_word", "kernel_us", "worker_merge_us", "shard_us", "dispatcher_us", "client_us"):
            assert run_[key] > 0, (key, run_)
        assert set(run_["quality_delta"]) == {"analogy", "ws353", "simlex"} and run_["sg"] == 0
        assert run_["shards"] == 2 and run_["shard_rss_mb"] > 0 and 0 <= run_["stall_share"] < 1
        # per-session costs apart (the workers' joining, the shards' transfers) and the dispatcher's split
        assert run_["worker_setup_us"] > 0 and run_["shard_setup_us"] > 0 and run_["shard_session_bytes_per_word"] > 0
        assert run_["dispatcher_word_us"] >= 0 and run_["dispatcher_member_cpu"] >= 0
        assert run_["dispatcher_session_us"] > 0
        # every call counted whole, the clock-driven threads apart, the GIL shares measured (not assumed)
        assert 0 < run_["shard_routine_call_us"] and 0 < run_["shard_setup_call_us"] and run_["shard_flush_call_us"] > 0
        assert 0 < run_["worker_gil_share"] < 1 and 0 < run_["shard_gil_share"] < 1
        assert 0 < run_["worker_member_cpu"] < 0.1 and 0 < run_["shard_member_cpu"] < 0.1
        assert run_["worker_threads_us"]["trainers"] > 0 and run_["shard_threads_us"]["serving"] > 0
    assert "the shards' calls as measured" in out and "GIL share measured" in out
    assert all(0 < p["gil_shares"]["merges"] < 1 for p in result["projection"])
    # down: the others' changes; a worker that joins late on this 60 k-word corpus may find the work done
    assert any(run_["bytes_down_per_word"] > 0 for run_ in result["runs"])
    assert [(p["K"], p["link_gbit"]) for p in result["projection"]] == [(2, 1), (2, 10), (8, 1), (8, 10)]
    for p in result["projection"]:
        assert p["cluster_wps"] > 0 and p["single_node_wps"] > 0 and p["threads"] == 16
        assert p["speedup"] == pytest.approx(p["cluster_wps"] / p["single_node_wps"])
        assert set(p["limits"]) == set(projection.LIMITS) and p["bottleneck"] in projection.LIMITS
        assert p["cluster_wps"] == pytest.approx(min(v for v in p["limits"].values() if v is not None))
        assert p["costs_from"] == "held at K=3"  # projected from the runs of the last thread count: 3x2 only
        assert p["shards"] == p["K"]  # one shard per node by default
    # the faster link never projects a slower cluster
    by = {(p["K"], p["link_gbit"]): p["cluster_wps"] for p in result["projection"]}
    assert by[(2, 10)] >= by[(2, 1)] and by[(8, 10)] >= by[(8, 1)]


@pytest.mark.system
def test_clustersim_runs_the_clusters_arithmetic():
    """One simulated worker (at its default interval) trains exactly as gensim does: the cluster's
    kernel and merges, in one process; two merge at the interval given, move bytes both ways, and
    say so."""
    lee = datapath("lee_background.cor")
    result = json.loads(run("clustersim.py", "--corpus", lee, "--workers", "1", "--epochs", "2", "--vector-size", "20",
                            "--json").strip().splitlines()[-1])
    (one,) = result["runs"]
    for key in ("analogy", "ws353", "simlex"):
        assert one[key] == result["gensim"][key], (key, one, result["gensim"])
    assert one["rounds_per_mword"] > 0 and one["bytes_down_per_word"] == 0  # nobody else's change to take in
    out = run("clustersim.py", "--corpus", lee, "--workers", "2", "--epochs", "2", "--vector-size", "20",
              "--sync-words", "5000", "--no-baseline", "--json")
    (two,) = json.loads(out.strip().splitlines()[-1])["runs"]
    assert two["K"] == 2 and two["sync_words"] == 5000 and two["bytes_up_per_word"] > 0 and two["bytes_down_per_word"] > 0
    assert two["rounds_per_mword"] > 1e6 / 5000 and "K=2 sync_words=5000" in out and "delta" not in two
    # as the cluster, a routine reply carries of the cold rows only those of the jobs a worker holds:
    # every row the worker lacks moves more bytes down
    (few, every) = (json.loads(run("clustersim.py", "--corpus", lee, "--workers", "2", "--epochs", "2",
                                   "--vector-size", "20", "--sync-words", "5000", "--no-baseline", "--hot-rows", "30",
                                   *extra, "--json").strip().splitlines()[-1])["runs"][0]
                    for extra in ((), ("--all-rows-down",)))
    assert 0 < few["bytes_down_per_word"] < every["bytes_down_per_word"] and every["bytes_up_per_word"] > 0
    (damped,) = json.loads(run("clustersim.py", "--corpus", lee, "--workers", "2", "--epochs", "2", "--vector-size",
                               "20", "--sync-words", "5000", "--no-baseline", "--damp-output", "7", "--hot-rows", "30",
                               "--json").strip().splitlines()[-1])["runs"]
    assert damped["damp_rows"]["syn1neg"] == 7 and damped["damp_rows"]["syn0"] == two["damp_rows"]["syn0"]
    assert damped["hot_rows"] == 30 and damped["bytes_up_per_word"] < two["bytes_up_per_word"]  # fewer rows a round


@pytest.mark.system
def test_round_cost_reports_each_roles_cpu_per_round():
    out = run("round_cost.py", "--shards", "1,2", "--rounds", "4", "--repeats", "1", "--json")
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [r["P"] for r in rows] == [1, 2]
    for r in rows:
        assert r["worker_us_per_round"] > 0 and r["shards_us_per_round"] > 0
        assert r["shard_us_per_call"] == pytest.approx(r["shards_us_per_round"] / r["P"])
    assert "each shard more adds" in out


@pytest.mark.system
def test_transport_cost_reports_each_size_plain_and_keyed():
    out = run("transport_cost.py", "--sizes", "1000,200000", "--calls", "3", "--repeats", "1", "--json")
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [(r["hmac"], r["path"], r["bytes"]) for r in rows] == [
        (keyed, path, size) for keyed in (False, True) for path in ("pyro4", "channel") for size in (1000, 200000)]
    for r in rows:  # (the server's CPU is read in clock ticks: a short run may show none)
        assert r["wall_us"] > 0 and r["client_us"] >= 0 and r["server_us"] >= 0
    assert "channel  keyed   200,000 B each way" in out and "  pyro4  keyed   200,000 B each way" in out


@pytest.mark.system
def test_compare_anchors_runs_the_cluster_and_gensim_and_skips_what_is_missing(tmp_path):
    """Spark and fastText made unavailable (no Java and no fastText binary where they are looked
    for; CI installs neither): each is skipped with its reason, the cluster and gensim run."""
    out = run("compare_anchors.py", "--corpus", datapath("lee_background.cor"), "--workers", "1", "--systems",
              "dist,gensim,fasttext,spark", "--epochs", "1", "--vector-size", "20",
              "--fasttext-bin", str(tmp_path / "fasttext"), "--java-home", str(tmp_path / "jdk"), "--json")
    result = json.loads(out.strip().splitlines()[-1])
    table = {(row["system"], row["k"]): row for row in result["table"]}
    assert set(table) == {("dist", 1), ("gensim", 1)} and result["failed"] == {}
    for row in table.values():
        assert row["raw_wps"] > 0 and row["peak_rss_mb"] > 0 and row["vocabulary"] > 0
        assert 0 <= row["analogy"] <= 1 and -1 <= row["ws353"] <= 1 and -1 <= row["simlex"] <= 1
    assert table[("gensim", 1)]["ratio_to_gensim"] == 1.0 and table[("dist", 1)]["ratio_to_gensim"] > 0
    assert {"client", "dispatcher", "shard", "worker"} <= set(table[("dist", 1)]["rss_mb"])
    skipped = result["skipped"]
    assert set(skipped) == {"spark", "fasttext"}
    assert "apt-get install -y fasttext" in skipped["fasttext"]
    assert "pip install" in skipped["spark"] or "Java" in skipped["spark"]  # no pyspark (CI), or no Java there


@pytest.mark.system
def test_vocab_count_finds_gensims_vocabulary_and_times_both():
    out = run("vocab_count.py", "--corpus", datapath("lee_background.cor"), "--repeats", "2", "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert len(result["rows"]) == 2 and "the same both ways" in out
    summary = result["summary"]
    assert summary["raw_words"] == 59890 and summary["sentences"] == 300 and summary["distinct"] == 10781
    assert summary["ours_wall"] > 0 and summary["gensim_wall"] > 0 and summary["ratio_wall"] > 0


@pytest.mark.system
def test_vocab_cluster_counts_gensims_vocabulary_on_the_cluster_and_projects(tmp_path):
    trained = tmp_path / "scaling.json"  # a scaling.py projection's points, as the counting's projection reads them
    trained.write_text(json.dumps({"projection": [{"K": 8, "threads": 16, "link_gbit": 10.0, "cluster_wps": 5e7}]}))
    out = run("vocab_cluster.py", "--corpus", datapath("lee_background.cor"), "--repeats", "2", "--epochs", "1",
              "--vector-size", "10", "--check-settings", "--training-projection", str(trained), "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert len(result["rows"]) == 2 and out.count("the same vocabulary") == 2 + 3  # the repeats, the settings
    assert len(result["checked_settings"]) == 3
    summary = result["summary"]
    assert summary["raw_words"] == 59890 and summary["distinct"] == 10781 and summary["count_worker_us"] > 0
    assert summary["gensim"]["vocab_s"] > 0 and summary["cluster"]["end_to_end_s"] > summary["cluster"]["vocab_s"]
    point = result["projection"]["points"][0]
    assert point["K"] == 8 and 0 < point["count_share"] < 1 and point["train_s"] == pytest.approx(5 * 3e9 / 5e7)


@pytest.mark.system
def test_quality_law_runs_the_simulator_on_synthetic_corpora(tmp_path):
    """Two small synthetic corpora, two intervals: a point per (size, interval), each with the truth list's
    Spearman of gensim and of the simulated cluster, and the two candidate laws fitted."""
    out = run("quality_law.py", "--sizes", "2e5,4e5", "--workers", "2", "--models", "cbow", "--scales", "0.5,1",
              "--intervals", "700", "--vector-size", "16", "--corpus-dir", str(tmp_path), "--json")
    data = json.loads(out.strip().splitlines()[-1])
    assert len(data["points"]) == 6 and {p["size"] for p in data["points"]} == {2e5, 4e5}
    # a fixed interval: the same words a merge at both sizes, below the rule's (its floor, 2,200 words, here)
    fixed = [p for p in data["points"] if p["sync_words"] == 700]
    assert len(fixed) == 2 and {p["size"] for p in fixed} == {2e5, 4e5}
    assert all(p["scale"] == pytest.approx(700 / 2200) for p in fixed)
    for p in data["points"]:
        assert 0 < p["gensim"] <= 1 and -1 <= p["cluster"] <= 1
        assert p["loss"] == pytest.approx(p["gensim"] - p["cluster"])
        assert p["merges_per_epoch"] == pytest.approx(p["size"] / 2 / p["sync_words"], rel=0.01)
    law = data["laws"]["cbow:K=2"]
    assert law["words_per_merge"] is not None and law["merges_per_epoch"] is not None
    assert os.path.exists(tmp_path / "synth-200000.pairs.tsv")


@pytest.mark.system
def test_ordered_corpus_keeps_every_line(tmp_path):
    for order in ("sorted", "topics", "shuffled"):
        target = tmp_path / f"{order}.txt"
        run("ordered_corpus.py", "--corpus", datapath("lee_background.cor"), "--order", order, "--clusters", "5",
            "--out", str(target))
        source = open(datapath("lee_background.cor"), "rb").read().splitlines()
        written = open(target, "rb").read().splitlines()
        assert sorted(written) == sorted(source)
        if order == "sorted":
            assert written == sorted(source)


@pytest.mark.system
def test_validate_projection_predicts_each_case_before_running_it(tmp_path):
    out = run("validate_projection.py", "--corpus", datapath("lee_background.cor"), "--fit", "2x1,8x1",
              "--cases", "k-between,iterable", "--between", "3", "--sync-words", "2000", "--json")
    data = json.loads(out.strip().splitlines()[-1])
    assert [c["name"] for c in data["cases"]] == ["k-between", "iterable"]
    for case in data["cases"]:
        assert case["predicted_wps"] > 0 and case["measured_wps"] > 0
        assert case["error"] == pytest.approx(case["predicted_wps"] / case["measured_wps"] - 1)
        assert case["costs_from"] == "interpolated between K=2 and K=8"
        # the prediction is printed before its run is measured
        assert out.index(f"{case['name']}: K=3") < out.index("measured", out.index(f"{case['name']}: K=3"))
    assert data["client_us"] > 0 and all(case["K"] == 3 and case["words"] > 0 for case in data["cases"])
    # the stored cases predicted again by the model as it is now: as then, the model being the same
    stored = tmp_path / "validate.json"
    stored.write_text(out.strip().splitlines()[-1])
    again = run("validate_projection.py", "--repredict", str(stored))
    for case in data["cases"]:
        assert f"{case['name']}: K=3 x {case['threads']}: measured {case['measured_wps']:,.0f}" in again
        assert f"predicted then {case['predicted_wps']:,.0f} ({case['error']:+.1%}), now {case['predicted_wps']:,.0f}" \
            in again


@pytest.mark.system
def test_validate_projection_measures_a_shaped_link_then_predicts_and_runs_through_it():
    why = load("netlab").missing(delay=True)
    if why:
        assert os.geteuid() != 0 or why.startswith("the ")
        pytest.skip(why)
    out = run("validate_projection.py", "--corpus", datapath("lee_background.cor"), "--fit", "2x1,4x1",
              "--cases", "links-k3", "--sync-words", "2000", "--json")
    data = json.loads(out.strip().splitlines()[-1])
    (case,) = data["cases"]
    assert case["name"] == "links-k3" and case["K"] == 3 and case["rate"] == "150mbit" and case["delay_ms"] == 1.0
    assert case["rtt_ms"] >= 2.0 and case["link_ns_per_byte"] > 0 and case["link_gbit"] == pytest.approx(0.15)
    assert case["serial_seconds"] > 0 and case["round_terms_ms"]["wire"] > 0
    assert case["round_terms_ms"]["round_trips"] == pytest.approx(case["rtt_ms"])
    assert case["predicted_wps"] > 0 and case["measured_wps"] > 0 and case["measured_round_ms"] > 0
    assert out.index("links-k3: K=3") < out.index("measured", out.index("links-k3: K=3"))
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "gnl" not in left, left


@pytest.mark.unit
def test_vocabulary_ratios_are_powers_through_the_nearest_measured_vocabularies():
    vocab_costs = load("vocab_costs")
    points = [(1e4, {"c": 1.0, "f": 4.0}), (1e5, {"c": 3.0, "f": 2.0}), (1e6, {"c": 30.0, "f": 1.0})]
    assert vocab_costs.ratio(points, "c", 1e5, 1e4) == pytest.approx(3.0)
    assert vocab_costs.ratio(points, "c", 1e6 ** 0.5 * 1e5 ** 0.5, 1e4) == pytest.approx(30.0 ** 0.5 * 3.0 ** 0.5)
    assert vocab_costs.ratio(points, "c", 1e7, 1e4) == pytest.approx(300.0)  # beyond: through the two largest
    assert vocab_costs.ratio(points, "f", 1e7, 1e4) == pytest.approx(0.25)  # a falling cost held beyond
    assert vocab_costs.ratio(points, "c", 1e4, 1e4) == 1.0

    # totals rebuilt from their parts: a part growing faster than its total cannot leave the rest negative
    # (the shards' CPU of K=16 came out negative when shard_us and its flush and session calls scaled apart)
    run = {"worker_merge_us": 1.0, "worker_flush_us": 0.5, "worker_routine_us": 0.5, "shard_us": 1.0,
           "shard_routine_call_us": 0.4, "shard_flush_call_us": 0.3, "shard_setup_call_us": 0.3,
           "bytes_up_per_word": 10.0, "bytes_down_per_word": 10.0, "flush_bytes_per_word": 8.0}
    factors = {"worker_merge_us": 2.0, "worker_flush_us": 4.0, "worker_routine_us": 3.0, "shard_us": 2.0,
               "shard_routine_call_us": 3.0, "shard_flush_call_us": 6.0, "shard_setup_call_us": 6.0,
               "bytes_up_per_word": 2.0, "bytes_down_per_word": 2.0, "flush_bytes_per_word": 5.0}
    out = vocab_costs.scaled(run, factors)
    assert out["worker_merge_us"] == pytest.approx(0.5 * 3.0 + 0.5 * 4.0)
    assert out["shard_us"] == pytest.approx(0.4 * 3.0 + 0.6 * 6.0)
    assert out["shard_us"] - out["shard_flush_call_us"] - out["shard_setup_call_us"] >= 0
    assert out["bytes_up_per_word"] == pytest.approx(6.0 * 2.0 + 4.0 * 5.0)
    # pieces in flight: the share of the routine merge that takes them, from the run nearest the projected
    # vocabulary (a run from before them has none: its round stays serial)
    nearest = {"worker_take_us": 0.3, "worker_routine_us": 0.6, "round_pieces": 4}
    pieced = vocab_costs.pieced(out, nearest)
    assert pieced["worker_take_us"] == pytest.approx(0.5 * out["worker_routine_us"]) and pieced["round_pieces"] == 4
    assert vocab_costs.pieced(out, {"worker_routine_us": 0.6}) == out


@pytest.mark.unit
def test_projected_ks_take_their_intervals_routine_costs_and_more_shards_their_measured_costs(tmp_path):
    """``--intervals-from``: K nodes at the interval the package's rule gives them ((8 / K) ** 2 of K=8's
    beyond eight) or at one given, their routine rounds' costs as measured at that interval, flushes and session unchanged;
    ``--shards-from``: each shard-dependent cost times its ratio between P = m K and P = K, and m."""
    vocab_costs = load("vocab_costs")
    base = {"K": 4, "shards": 4, "worker_merge_us": 1.0, "worker_routine_us": 0.4, "worker_take_us": 0.3,
            "worker_routine_nogil_us": 0.3, "shard_us": 1.0, "shard_routine_call_us": 0.2,
            "shard_routine_nogil_us": 0.1, "bytes_up_per_word": 14.0, "bytes_down_per_word": 14.0,
            "flush_bytes_per_word": 8.0}
    paths = []
    for words, factor in ((185185, 1.0), (92593, 2.0), (46296, 4.0)):  # a routine cost doubling as the interval halves
        run = dict(base, **{key: base[key] * factor for key in ("worker_routine_us", "worker_take_us",
                                                                 "worker_routine_nogil_us", "shard_routine_call_us",
                                                                 "shard_routine_nogil_us")},
                   bytes_up_per_word=10.0 * factor + 4.0, bytes_down_per_word=10.0 * factor + 4.0)
        paths.append(tmp_path / f"i{words}.json")
        paths[-1].write_text(json.dumps({"args": {"sync_words": words}, "runs": [run]}))
    adjust = vocab_costs.at_intervals(",".join(map(str, paths)), 1e9, sg=0)
    headline = dict(base, K=16)
    same, note = adjust(8, [headline])  # K=8 merges at the headline's interval: nothing changes
    assert same == [headline] and note == ""
    (at16,), note = adjust(16, [headline], 92593)  # an interval given (as the lag's bound gives one)
    assert at16["rounds_per_word"] == pytest.approx(1 / 92593) and "92,593 words a round" in note
    assert at16["worker_routine_us"] == pytest.approx(0.8, rel=1e-3)
    assert at16["worker_merge_us"] == pytest.approx(1.0 + 0.4, rel=1e-3)  # the flush's 0.6 as it was
    assert at16["shard_us"] == pytest.approx(1.0 + 0.2, rel=1e-3)
    assert at16["bytes_up_per_word"] == pytest.approx(20.0 + 4.0, rel=1e-3)
    (at16,), _ = adjust(16, [headline])  # the rule's: (8 / 16) ** 2 of K=8's
    assert at16["worker_routine_us"] == pytest.approx(1.6, rel=1e-3) and at16["rounds_per_word"] == pytest.approx(
        1 / 46296)
    (at32,), _ = adjust(32, [headline])  # beyond the shortest measured: the power through the two shortest
    assert at32["worker_routine_us"] == pytest.approx(6.4, rel=1e-3) and at32["rounds_per_word"] == pytest.approx(
        1 / 11574)

    one, two = tmp_path / "p4.json", tmp_path / "p8.json"
    one.write_text(json.dumps({"runs": [base]}))
    two.write_text(json.dumps({"runs": [dict(base, shards=8, shard_us=1.2, worker_merge_us=1.1)]}))
    factors, m = vocab_costs.reshard_factors(f"{one},{two}")
    assert m == 2 and factors["shard_us"] == pytest.approx(1.2) and factors["worker_merge_us"] == pytest.approx(1.1)
    assert factors["bytes_up_per_word"] == 1.0
    with pytest.raises(SystemExit, match="P = K then P = m K"):
        vocab_costs.reshard_factors(f"{two},{one}")


@pytest.mark.unit
def test_seeds_run_apart_are_averaged_back_into_one_configuration(tmp_path, capsys, monkeypatch):
    mean_runs = load("mean_runs")
    monkeypatch.setattr(mean_runs, "provenance", dict)  # (its git call is a subprocess)
    paths = []
    for seed, (wps, threads_us) in enumerate(((100.0, {"merger": 1.0}), (300.0, {"merger": 3.0, "main": 2.0})), 1):
        paths.append(tmp_path / f"s{seed}.json")
        paths[-1].write_text("a line of text first\n" + json.dumps({
            "provenance": {"command": f"seed {seed}"}, "args": {"seeds": 1},
            "runs": [{"K": 4, "shards": 8, "threads": 2, "corpus_file": True, "raw_wps": wps, "shard_us": wps / 100,
                      "worker_threads_us": threads_us, "quality_delta": {"ws353": float("nan")}}]}))
    mean_runs.main([str(p) for p in paths])
    out = json.loads(capsys.readouterr().out)
    (run,) = out["runs"]
    assert run["raw_wps"] == 200.0 and run["shard_us"] == 2.0 and run["K"] == 4 and run["shards"] == 8
    assert run["worker_threads_us"] == {"merger": 2.0, "main": 1.0} and out["args"]["seeds"] == 2
    assert [source["command"] for source in out["sources"]] == ["seed 1", "seed 2"]
    other = tmp_path / "p4.json"
    other.write_text(json.dumps({"provenance": {}, "args": {}, "runs": [
        {"K": 4, "shards": 4, "threads": 2, "corpus_file": True, "raw_wps": 1.0}]}))
    with pytest.raises(SystemExit, match="differ in shards:"):
        mean_runs.main([str(paths[0]), str(other)])


@pytest.mark.unit
def test_fold_threads_folds_rounds_of_every_worker_under_each_lock(capsys, monkeypatch):
    fold_threads = load("fold_threads")
    monkeypatch.setattr(fold_threads, "provenance", dict)  # (its git call is a subprocess)
    fold_threads.main(["--rows", "20000", "--hot", "2000", "--workers", "3", "--dim", "8", "--rounds", "2",
                       "--repeats", "1", "--json"])
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]
    assert {(r["locks"], r["pieces"], r["F"]) for r in rows} == {(lock, p, f) for lock in ("rows", "one")
                                                                   for p in (1, 4) for f in (1, 2)}
    assert all(r["round_ms"] > 0 and (r["F"] > 1 or r["speedup"] == 1.0) for r in rows)


@pytest.mark.unit
def test_debian_corpus_keeps_file_order_and_skips_markup_binaries_and_copies(tmp_path):
    import gzip

    debian_corpus = load("debian_corpus")
    root = tmp_path / "doc"
    for package in ("bpkg", "apkg", "cpkg"):
        (root / package).mkdir(parents=True)
    (root / "apkg" / "README").write_text("The first package's words come first.\nshort line\n")
    with gzip.open(root / "apkg" / "changelog.gz", "wt") as fout:
        fout.write("apkg (1.0) unstable; urgency=low\n")
    (root / "bpkg" / "index.html").write_text("<div class='x'>markup is not prose at all</div>\n")
    (root / "bpkg" / "blob").write_bytes(b"\0\1\2 binary data here")
    (root / "bpkg" / "NEWS").write_text("B's news: it's well-known, and then some.\n")
    (root / "cpkg" / "README").write_text("The first package's words come first.\nshort line\n")  # a copy
    out = tmp_path / "corpus.txt"
    assert debian_corpus.main(["--root", str(root), "--out", str(out)]) == 0
    assert out.read_text().splitlines() == [
        "the first package's words come first",  # apkg's README, then its changelog.gz: sorted paths, gzip read
        "apkg unstable urgency low",
        "b's news it's well-known and then some",  # bpkg's NEWS; its HTML and binary skipped; cpkg's copy too
    ]


@pytest.mark.unit
def test_quality_matrix_compares_each_mode_with_gensims_and_keeps_the_latest(tmp_path, capsys, monkeypatch):
    quality_matrix = load("quality_matrix")

    def record(name, rate, dist_cf_ws353, first_seed=1, dist_analogy=0.064):
        path = tmp_path / name
        row = dict(analogy=0.08, ws353=0.36, simlex=0.12)
        path.write_text(json.dumps({"args": {"corpus": "/x/devmix.txt", "max_words": 5e6, "sg": 1, "seeds": 2,
                                             "corpus_file_rate": rate, "first_seed": first_seed},
                                    "table": [dict(row, mode="gensim", k=8), dict(row, mode="gensim_cf", k=8),
                                              dict(row, mode="dist", k=8, analogy=dist_analogy),
                                              dict(row, mode="dist_cf", k=8, ws353=dist_cf_ws353)]}))
        return str(path)

    old, linear, gensim = record("a.json", None, 0.30), record("b.json", None, 0.35), record("c.json", "gensim", 0.37)
    stub = type(sys)("provenance")  # (its git call is a subprocess)
    stub.provenance = dict
    monkeypatch.setitem(sys.modules, "provenance", stub)
    quality_matrix.main([old, linear, gensim, "--json"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = {(r["mode"], r["rate"]): r for r in out["rows"]}
    assert set(rows) == {("iterable", "linear"), ("corpus_file", "linear"), ("corpus_file", "gensim")}
    iterable = rows["iterable", "linear"]
    assert iterable["analogy_points"] == pytest.approx(-1.6) and not iterable["within"]  # beyond 1.5 points
    assert rows["corpus_file", "linear"]["ws353"] == pytest.approx(-0.01) and rows["corpus_file", "linear"]["within"]
    assert rows["corpus_file", "linear"]["source"] == "b.json"  # the later record of the same case
    assert rows["corpus_file", "gensim"]["ws353"] == pytest.approx(0.01) and rows["corpus_file", "gensim"]["within"]
    assert (out["within"], out["cases"]) == (2, 3) and iterable["corpus"].startswith("devmix.txt")
    assert iterable["gensim_ws353_spread"] is None  # gensim at one K only: no spread to show
    # seeds 3 and 4 of the same cases add to seeds 1 and 2: means over four seeds
    more = record("d.json", "gensim", 0.37, first_seed=3, dist_analogy=0.08)
    quality_matrix.main([old, linear, gensim, more, "--json"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = {(r["mode"], r["rate"]): r for r in out["rows"]}
    iterable = rows["iterable", "linear"]
    assert iterable["analogy_points"] == pytest.approx(-0.8) and iterable["within"] and iterable["seeds"] == 4
    assert iterable["source"] == "c.json + d.json" and rows["corpus_file", "linear"]["seeds"] == 2
