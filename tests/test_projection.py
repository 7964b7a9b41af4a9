"""The projection's model (``benchmarks/projection.py``) on hand-made per-word costs: each limit binds
when it should and has its formula, a round's latency caps a node whose rounds outlast its
intervals, a node's cores are budgeted among its roles, every projected point lists every limit,
and K beyond the measured is extrapolated and says how."""
import json
import math

import pytest

from .benchmark_modules import load

pytestmark = pytest.mark.unit

projection = load("projection")
from gensim_distw2v import count_projection as counting  # noqa: E402 - beside the model the benchmarks load
from gensim_distw2v import machine_projection  # noqa: E402

# a cheap cluster: every cost small, so that one made large binds
CHEAP = {"kernel_us": 1.0, "worker_merge_us": 0.01, "worker_other_us": 0.001, "shard_us": 0.01, "dispatcher_us": 0.001,
         "client_us": 0.001, "bytes_up_per_word": 0.01, "bytes_down_per_word": 0.01, "rounds_per_word": 1e-6}


def point(k=8, threads=16, link=10.0, shards=None, **changes):
    options = {key: changes.pop(key) for key in list(changes) if key not in projection.COSTS}
    return projection.project(dict(CHEAP, **changes), 1.0, k, threads, link, shards, **options)


def test_efficiency_and_round_trip_defaults():
    assert projection.efficiency(1) == 1.0 and projection.efficiency(16) == pytest.approx(0.68)
    assert projection.efficiency(32) == pytest.approx(0.6)
    assert projection.default_rtt_ms(10) == 0.1 and projection.default_rtt_ms(1) == 0.2
    assert projection.default_rtt_ms(None) == projection.LOOPBACK_RTT_MS


def test_trainer_threads_bind_when_the_node_has_cores_to_spare():
    p = point(cores=1000)
    assert p["bottleneck"] == "trainer threads"
    assert p["cluster_wps"] == pytest.approx(8 * 16 * 0.68 * 1e6 / 1.0)
    assert p["single_node_wps"] == pytest.approx(16 * 0.68 * 1e6) and p["speedup"] == pytest.approx(8.0)
    # kernel costs measured with 2 threads a worker are scaled to one thread first
    q = point(cores=1000, kernel_threads=2)
    assert q["cluster_wps"] == pytest.approx(p["cluster_wps"] / projection.efficiency(2))
    # ... and so is gensim's CPU when it was measured with 2 threads: the same crediting on both sides
    r = point(cores=1000, kernel_threads=2, gensim_threads=2)
    assert r["speedup"] == pytest.approx(8.0) and not r["above_linear"]


def test_both_sides_are_credited_alike_and_more_than_k_is_flagged():
    """The cluster's trainer threads run gensim's kernel: at gensim's own CPU per word, with the same
    efficiency curve, they reach K x one node at most; a cheaper kernel (a fault of what is measured,
    unless a mechanism is named) is flagged above linear; the head node counts as a node."""
    for t_m in (1, 2, 4):
        for threads in (1, 8, 16, 32):
            same = point(k=8, threads=threads, cores=1000, kernel_threads=t_m, gensim_threads=t_m)
            assert same["speedup"] == pytest.approx(8.0) and not same["above_linear"]
            assert same["nodes"] == 9 and same["speedup_per_node"] == pytest.approx(8.0 / 9)
    cheaper = point(k=8, cores=1000, kernel_us=0.9)
    assert cheaper["speedup"] == pytest.approx(8.0 / 0.9) and cheaper["above_linear"]
    # the node's cores bind before its trainers do: every other role's CPU is on them
    budget = point(k=8, kernel_threads=2, gensim_threads=2)
    assert budget["bottleneck"] == "core budget" and budget["speedup"] < 8.0
    assert projection.single_node(2.0, 16, 2) == pytest.approx(16 * 0.68 * 1e6 / (2.0 * 0.92))
    # shards on hosts of their own are nodes too
    assert point(k=8, shards=4)["nodes"] == 8 + 1 + 4


def test_one_merger_thread_binds_and_more_of_them_meet_the_gil():
    # asp (trainers never wait for a round): the merger thread itself is the limit
    p = point(worker_merge_us=2.5, gil_share=0.0, sync="asp")
    assert p["bottleneck"] == "merger threads" and p["cluster_wps"] == pytest.approx(8 * 1e6 / 2.5)
    p = point(worker_merge_us=2.5, gil_share=0.8, mergers=4, sync="asp")  # four threads, 4/5 under the GIL
    assert p["bottleneck"] == "worker GIL"
    assert p["cluster_wps"] == pytest.approx(8 * 1e6 / (0.8 * 2.5 + CHEAP["worker_other_us"]))
    # four threads do a round's compiled work as fast as measured (memory-bound: not four times)
    assert p["limits"]["merger threads"] == pytest.approx(projection.merge_speedup(4) * 8 * 1e6 / 2.5)
    assert 1 < projection.merge_speedup(4) == projection.merge_speedup(2) < 2 and projection.merge_speedup(1) == 1
    # ssp: rounds follow one another, and a round holds its merge work and its waits: its latency
    # binds before the merger thread does
    p = point(worker_merge_us=2.5, gil_share=0.0)
    assert p["bottleneck"] == "round latency" and p["cluster_wps"] < p["limits"]["merger threads"]


def test_job_python_is_the_measured_rest_of_the_worker_or_an_assumption():
    measured = projection.limits(dict(CHEAP, worker_other_us=0.5), 4, 16, 10.0)[0]
    assert measured["worker GIL"] == pytest.approx(4 * 1e6 / (0.01 + 0.5))
    costs = {key: value for key, value in CHEAP.items() if key != "worker_other_us"}
    named, details = projection.limits(costs, 4, 16, 10.0)
    assert details["job_python_assumed"] and details["job_python_us"] == projection.DEFAULT_JOB_PYTHON_US
    assert named["worker GIL"] == pytest.approx(4 * 1e6 / (0.01 + projection.DEFAULT_JOB_PYTHON_US))


def test_shard_fold_threads_then_the_shards_gil():
    p = point(shard_us=8.0, shard_gil_share=0.5)  # 8 shards, one fold thread each: 1 µs a word each
    assert p["bottleneck"] == "shard fold threads" and p["cluster_wps"] == pytest.approx(8 * 1e6 / 8.0)
    # parts at once only where the workers' pieces put them on different rows: one piece a round, in turn
    assert point(shard_us=8.0, shard_gil_share=0.5, fold_threads=4)["cluster_wps"] == pytest.approx(8 * 1e6 / 8.0)

    def pieced(**costs):
        return projection.project(dict(CHEAP, round_pieces=4, **costs), 1.0, 8, 16, 10.0, fold_threads=4)
    p = pieced(shard_us=8.0, shard_gil_share=0.5)  # four parts at once: as fast as two (measured)
    assert p["bottleneck"] == "shard fold threads" and p["cluster_wps"] == pytest.approx(8 * 1.68e6 / 8.0)
    assert projection.fold_speedup(1) == 1.0 and projection.fold_speedup(2) == projection.fold_speedup(64) == 1.68
    assert projection.fold_speedup(4, pieces=1) == 1.0 and projection.fold_speedup(4, pieces=2) == 1.68
    p = pieced(shard_us=8.0, shard_gil_share=0.7)
    assert p["bottleneck"] == "shard GIL" and p["cluster_wps"] == pytest.approx(8 * 1e6 / (0.7 * 8.0))


def test_dispatcher_and_client_and_corpus_file_mode():
    assert point(dispatcher_us=0.5)["bottleneck"] == "dispatcher CPU"
    p = point(client_us=0.5)
    assert p["bottleneck"] == "client CPU" and p["cluster_wps"] == pytest.approx(2e6)
    p = point(client_us=0.5, corpus_file=True)  # the workers read the corpus: no client limit
    assert p["limits"]["client CPU"] is None and p["bottleneck"] != "client CPU"


def test_the_dispatchers_cpu_splits_into_per_word_and_per_member_second():
    calls = {"get_jobs": [1000, 0.5], "heartbeat": [90, 0.009], "shard_beat": [90, 0.009], "round_done": [360, 0.036],
             "progress": [10, 0.001]}
    # 2.0 s of CPU: 0.555 in handlers, 1.445 around them over 1,550 calls
    split = projection.dispatcher_split(calls, 2.0, words=10_000_000, members=19, seconds=10.0)
    overhead = 1.445 / 1550
    per_second = 0.055 + overhead * 550
    assert split["dispatcher_overhead_us_per_call"] == pytest.approx(overhead * 1e6)
    assert split["dispatcher_member_cpu"] == pytest.approx(per_second / 190)
    assert split["dispatcher_word_us"] == pytest.approx((2.0 - per_second) * 1e6 / 1e7)
    assert split["dispatcher_calls_per_member_s"] == pytest.approx(550 / 190)
    assert split["dispatcher_session_us"] == 0.0
    # the session's calls (set-up, joining, transfers) are apart: a longer corpus spreads them thinner
    once = dict(calls, join=[8, 0.008], open_session=[1, 0.002])
    split2 = projection.dispatcher_split(once, 2.0, words=10_000_000, members=19, seconds=10.0)
    overhead2 = (2.0 - 0.565) / 1559
    assert split2["dispatcher_session_us"] == pytest.approx((0.01 + 9 * overhead2) * 1e6 / 1e7)
    run = dict(CHEAP, K=8, worker_other_us=0.0, **split2)
    assert projection.at_corpus(run, None)[0]["dispatcher_word_us"] == pytest.approx(
        split2["dispatcher_word_us"] + split2["dispatcher_session_us"])
    # the whole calls' CPU (transport included) where measured: the rest is the process's own threads
    whole = {op: [n, cpu, cpu * 3] for op, (n, cpu) in calls.items()}
    split3 = projection.dispatcher_split(whole, 2.0, words=10_000_000, members=19, seconds=10.0)
    rest = (2.0 - 0.555 * 3) / 1550
    assert split3["dispatcher_overhead_us_per_call"] == pytest.approx(rest * 1e6)
    assert split3["dispatcher_member_cpu"] == pytest.approx((0.055 * 3 + rest * 550) / 190)
    # the limit: what the members' per-second calls leave of one core, over the per-word CPU
    costs = dict(CHEAP, dispatcher_us=0.2, **split)
    p = projection.project(costs, 1.0, 8, 16, 10.0)
    left = 1 - 17 * split["dispatcher_member_cpu"]
    assert p["limits"]["dispatcher CPU"] == pytest.approx(left * 1e6 / split["dispatcher_word_us"])
    assert p["dispatcher_us_at_rate"] == pytest.approx(
        split["dispatcher_word_us"] + 17 * split["dispatcher_member_cpu"] * 1e6 / p["cluster_wps"])
    # members enough to fill its core: nothing left for words
    assert projection.dispatcher_limit(dict(costs, dispatcher_member_cpu=0.1), 10) == 0.0
    # older runs without the split: one core over the whole per-word cost
    assert projection.dispatcher_limit(CHEAP, 17) == pytest.approx(1e6 / CHEAP["dispatcher_us"])


def test_links_one_shard_per_node_and_shards_elsewhere():
    p = point(link=0.1, bytes_up_per_word=50.0, bytes_down_per_word=100.0, sync="asp")
    # a node's link, each way: its worker's bytes and its shard's, less the part for its own shard
    assert p["bottleneck"] == "node link"
    assert p["limits"]["node link"] == pytest.approx(8 * 0.1e9 / 8 / (150 * 7 / 8))
    assert p["limits"]["worker link"] is None and p["limits"]["shard link"] is None
    p = point(link=0.1, shards=2, bytes_up_per_word=50.0, bytes_down_per_word=100.0)
    assert p["limits"]["node link"] is None
    assert p["limits"]["worker link"] == pytest.approx(8 * 0.1e9 / 8 / 100)
    assert p["bottleneck"] == "shard link" and p["cluster_wps"] == pytest.approx(2 * 0.1e9 / 8 / 100)
    assert point(k=1, link=0.001)["limits"]["node link"] is None  # one node: nothing crosses a link
    # ssp: a round's own bytes cross the link up, then down, within the round: its latency binds first
    p = point(link=0.1, bytes_up_per_word=50.0, bytes_down_per_word=100.0)
    assert p["bottleneck"] == "round latency" and p["cluster_wps"] < p["limits"]["node link"]


def test_more_shards_than_nodes_fold_on_more_threads_of_the_same_nodes():
    """m shards a node (P = m K, ``shards_per_node``): m fold threads and m GILs on each worker node, the
    same node link (what stays on a node is still 1/K), a fold of 1/P of the rows in a round, no hosts added."""
    one = point(shard_us=8.0, shard_gil_share=0.5, shard_member_cpu=0.01)
    two = point(shard_us=8.0, shard_gil_share=0.5, shard_member_cpu=0.01, shards_per_node=2)
    assert one["bottleneck"] == "shard fold threads" and one["cluster_wps"] == pytest.approx(8 * 1e6 / 8.0)
    assert two["shards"] == 16 and two["nodes"] == 8 + 1
    assert two["limits"]["shard fold threads"] == pytest.approx(16 * 1e6 / 8.0)
    assert two["limits"]["shard GIL"] == pytest.approx(2 * one["limits"]["shard GIL"])
    assert two["round_terms"]["shard_cpu"] == pytest.approx(one["round_terms"]["shard_cpu"] / 2)
    assert two["cluster_wps"] > one["cluster_wps"]
    # the shards' clock-driven threads (0.01 of a core each): m of them on each node's cores
    cpu = one["node_cpu_us_per_word"]
    assert one["limits"]["core budget"] == pytest.approx(8 * (16 - 0.01) * 1e6 / cpu)
    assert two["limits"]["core budget"] == pytest.approx(8 * (16 - 0.02) * 1e6 / cpu)
    links = dict(link=0.1, bytes_up_per_word=50.0, bytes_down_per_word=100.0, sync="asp")
    assert point(**links, shards_per_node=2)["limits"]["node link"] == pytest.approx(point(**links)["limits"]["node link"])
    assert projection.placed(8) == (8, True) and projection.placed(8, 4) == (4, False)
    assert projection.placed(8, 4, shards_per_node=3) == (24, True)


def test_a_nodes_cores_are_shared_by_its_trainers_merger_and_shard():
    # each role alone is under its own limit; together they fill the node's 16 cores
    roles = dict(worker_merge_us=0.05, shard_us=0.1, gil_share=0.0, shard_gil_share=0.0, fold_threads=8, mergers=8,
                 sync="asp")
    p = point(**roles)
    cpu = 1.0 / 0.68 + 0.05 + CHEAP["worker_other_us"] + 0.1
    assert p["bottleneck"] == "core budget" and p["cluster_wps"] == pytest.approx(8 * 16 * 1e6 / cpu)
    assert p["node_cpu_us_per_word"] == pytest.approx(cpu)
    # shards on hosts of their own take nothing from a node's cores
    q = point(**roles, shards=4)
    assert q["limits"]["core budget"] == pytest.approx(8 * 16 * 1e6 / (cpu - 0.1))
    # more cores than trainer threads: the budget loosens
    assert point(cores=32, worker_merge_us=1.0)["limits"]["core budget"] > point(worker_merge_us=1.0)["limits"][
        "core budget"]


def test_long_rounds_bind_when_they_outlast_the_interval():
    # a 2,000-word interval: a round trip of 0.1 ms, 2 ms of merge CPU (8 threads: as fast as two), 0.025 ms
    # of the shards' fold, 0.42 ms on the wire, where training the interval takes 0.4 ms
    changes = dict(rounds_per_word=1 / 2000, worker_merge_us=1.0, shard_us=0.1, bytes_up_per_word=100.0,
                   bytes_down_per_word=200.0, gil_share=0.0, mergers=8)
    p = point(**changes)
    terms = p["round_terms"]
    assert p["sync_words"] == pytest.approx(2000)
    assert terms["round_trips"] == pytest.approx(0.1e-3)
    assert terms["merge_cpu"] == pytest.approx(2000 * 1e-6 / projection.merge_speedup(8))
    assert terms["shard_cpu"] == pytest.approx(2000 * 0.1e-6 / 8)
    assert terms["wire"] == pytest.approx(300 * 2000 * 7 / 8 / 1.25e9)
    assert p["round_seconds"] == pytest.approx(sum(terms.values()))
    assert p["bottleneck"] == "round latency" and p["round_stalls"]
    assert p["cluster_wps"] == pytest.approx(8 * 2000 / p["round_seconds"])
    assert p["interval_seconds"] < p["round_seconds"]
    # at a 200,000-word interval (and a tenth of the merge CPU) the round fits in the interval and binds nothing
    q = point(**dict(changes, rounds_per_word=1 / 200000, bytes_up_per_word=1.0, bytes_down_per_word=2.0,
                     worker_merge_us=0.1))
    assert q["bottleneck"] != "round latency" and not q["round_stalls"]
    # an explicit interval and round trip override the measured ones; asp has no latency limit
    r = point(**changes, sync_words=4000, rtt_ms=1.0)
    assert r["sync_words"] == 4000 and r["round_terms"]["round_trips"] == pytest.approx(1e-3)
    assert point(**changes, sync="asp")["limits"]["round latency"] is None


def test_bsp_adds_each_rounds_latency_to_each_intervals_training():
    changes = dict(rounds_per_word=1 / 2000, worker_merge_us=1.0, cores=1000)
    ssp, bsp = point(**changes), point(**changes, sync="bsp")
    others = min(v for name, v in ssp["limits"].items() if v is not None and name != "round latency")
    per_node = 1 / (8 / others + bsp["round_seconds"] / 2000)
    assert bsp["cluster_wps"] == pytest.approx(8 * per_node) and bsp["cluster_wps"] < ssp["cluster_wps"]


def test_every_point_lists_every_limit_by_name_and_serialises():
    p = point()
    assert list(p["limits"]) == list(projection.LIMITS)
    assert p["bottleneck"] in projection.LIMITS and p["cluster_wps"] == min(v for v in p["limits"].values() if v)
    record = json.loads(json.dumps(p))
    assert set(record["limits"]) == set(projection.LIMITS) and record["params"]["cores"] == 16


def run_at(k, merge, shard, kernel):
    return dict(CHEAP, K=k, worker_merge_us=merge, shard_us=shard, kernel_us=kernel)


def test_k_beyond_the_measured_is_extrapolated_and_says_how():
    runs = [run_at(4, 1.0, 2.0, 1.0), run_at(8, 2.0, 4.0, 1.2), run_at(16, 3.0, 8.0, 1.1)]
    costs, label = projection.costs_at(runs, 16)
    assert label == "measured K=16" and costs["worker_merge_us"] == 3.0
    costs, label = projection.costs_at(runs, 32)
    assert label == "extrapolated: power of K through K=8 and K=16"
    assert costs["worker_merge_us"] == pytest.approx(3.0 * 2 ** math.log2(3.0 / 2.0))  # c16 (32/16)^b, b = log2 1.5
    assert costs["shard_us"] == pytest.approx(16.0)  # doubling with K
    assert costs["kernel_us"] == 1.1  # not a function of K: held at the nearest measured
    costs, label = projection.costs_at(runs, 32, method="hold")
    assert label == "held at K=16" and costs["worker_merge_us"] == 3.0
    costs, label = projection.costs_at(runs, 12)
    assert label == "interpolated between K=8 and K=16" and 2.0 < costs["worker_merge_us"] < 3.0
    costs, label = projection.costs_at(runs, 2)
    assert label == "held at K=4" and costs["worker_merge_us"] == 1.0
    # a cost measured to fall with K is not projected to fall further
    falling = [run_at(8, 2.0, 4.0, 1.0), run_at(16, 1.5, 4.0, 1.0)]
    assert projection.costs_at(falling, 64)[0]["worker_merge_us"] == pytest.approx(1.5)
    with pytest.raises(ValueError):
        projection.costs_at(runs, 32, method="guess")


def test_this_machine_puts_every_role_on_its_cores():
    run = dict(CHEAP, K=2, threads=1, shards=2, raw_wps=400000.0, kernel_us=1.0, worker_merge_us=1.0,
               worker_other_us=0.2, shard_us=0.8, dispatcher_us=0.1, client_us=0.2, rounds_per_word=1 / 2200)
    c = machine_projection.this_machine(run, cores=2)
    assert c["bottleneck"] == "core budget" and c["model_wps"] == pytest.approx(2e6 / 3.3)
    assert c["ratio"] == pytest.approx(c["model_wps"] / 400000.0)
    assert c["limits"]["node link"] is None and c["round_terms"]["wire"] == 0.0
    # corpus_file: the client's CPU still takes the host's cores, though it is no limit of its own
    cf = machine_projection.this_machine(dict(run, corpus_file=True), cores=2)
    assert cf["limits"]["client CPU"] is None and cf["model_wps"] == pytest.approx(c["model_wps"])
    # one worker of two threads: its kernel costs were measured with two threads
    one = machine_projection.this_machine(dict(run, K=1, threads=2, shards=1), cores=2)
    assert one["threads"] == 2 and one["limits"]["trainer threads"] == pytest.approx(2e6 / 1.0)


def test_at_corpus_spreads_the_epoch_flushes_over_a_longer_epoch_and_keeps_the_routine_costs():
    run = {"K": 8, "worker_merge_us": 0.33, "worker_flush_us": 0.19, "shard_us": 0.45, "shard_flush_us": 0.09,
           "bytes_up_per_word": 27.8, "bytes_down_per_word": 29.7, "flush_bytes_per_word": 46.0,
           "epoch_words_per_worker": 1.5e6, "kernel_us": 1.9}
    same, how = projection.at_corpus(run, 12e6)  # the corpus measured: nothing changes
    assert same["worker_merge_us"] == pytest.approx(0.33) and "x1" in how
    big, how = projection.at_corpus(run, 1.2e9)  # a hundred times the epoch: a hundredth of the flush per word
    assert big["worker_merge_us"] == pytest.approx(0.33 - 0.19 * 0.99)
    assert big["shard_us"] == pytest.approx(0.45 - 0.09 * 0.99)
    assert big["bytes_up_per_word"] == pytest.approx(27.8 - 23.0 * 0.99)
    assert big["kernel_us"] == 1.9 and "1.2e+09" in how
    old = {key: value for key, value in run.items() if key != "worker_flush_us"}  # an older run: as measured
    assert projection.at_corpus(old, 1.2e9) == (old, "flushes as measured")


def test_the_workers_joining_is_per_session_and_spread_like_the_flushes():
    run = {"K": 8, "worker_merge_us": 0.33, "worker_flush_us": 0.19, "shard_us": 0.45, "shard_flush_us": 0.09,
           "bytes_up_per_word": 27.8, "bytes_down_per_word": 29.7, "flush_bytes_per_word": 46.0,
           "epoch_words_per_worker": 1.5e6, "kernel_us": 1.9, "worker_other_us": 0.01, "worker_setup_us": 0.3}
    same, _ = projection.at_corpus(run, None)  # as measured: the joining is back in the workers' Python
    assert same["worker_other_us"] == pytest.approx(0.31) and "worker_setup_us" not in same  # (once)
    big, _ = projection.at_corpus(run, 1.2e9)  # a hundredth of it per word on a hundred times the words
    assert big["worker_other_us"] == pytest.approx(0.01 + 0.003)
    # and the shards' serving of the session's transfers likewise
    served, _ = projection.at_corpus(dict(run, shard_setup_us=0.2), 1.2e9)
    assert served["shard_us"] == pytest.approx(0.45 - (0.09 + 0.2) * 0.99)
    # and, given the transport's CPU per byte, the transport of the flushes' and the session's bytes
    moved, how = projection.at_corpus(dict(run, shard_setup_us=0.2, shard_session_bytes_per_word=24.0), 1.2e9, 1.5)
    assert moved["shard_us"] == pytest.approx(0.45 - (0.09 + 0.2 + (46.0 + 24.0) * 1.5e-3) * 0.99)
    assert "1.5 ns a byte" in how
    # measured as whole calls (transport included), the flushes' and the session's calls are taken as they
    # cost, and no per-byte estimate is made
    whole, how = projection.at_corpus(dict(run, shard_setup_us=0.2, shard_setup_call_us=0.26,
                                           shard_flush_call_us=0.12), 1.2e9, 1.5)
    assert whole["shard_us"] == pytest.approx(0.45 - (0.12 + 0.26) * 0.99)
    assert "calls as measured" in how and "ns a byte" not in how
    assert whole["bytes_up_per_word"] == pytest.approx(27.8 - 23.0 * 0.99)
    # on the host it was measured on, its CPU counts in the core budget
    machine = machine_projection.this_machine(dict(CHEAP, **run, shards=1, raw_wps=1.0))
    base = machine_projection.this_machine(dict(CHEAP, **dict(run, worker_setup_us=0.0), shards=1, raw_wps=1.0))
    assert machine["limits"]["core budget"] < base["limits"]["core budget"]


def test_clock_driven_threads_take_a_share_of_a_core_not_a_cost_per_word():
    # each worker's heartbeat and Pyro4 threads take 2% of a core, each shard's 1%: the GIL and the cores
    # have that much less room, whatever the speed
    base = projection.limits(dict(CHEAP, worker_other_us=0.5, shard_us=8.0), 8, 16, 10.0)[0]
    clock = projection.limits(dict(CHEAP, worker_other_us=0.5, shard_us=8.0, worker_member_cpu=0.02,
                                   shard_member_cpu=0.01), 8, 16, 10.0)[0]
    assert clock["worker GIL"] == pytest.approx(base["worker GIL"] * 0.98)
    assert clock["shard GIL"] == pytest.approx(base["shard GIL"] * 0.99)
    assert clock["core budget"] == pytest.approx(base["core budget"] * (16 - 0.03) / 16)
    # one host: every member's share comes off the host's cores
    run = dict(CHEAP, K=4, shards=4, raw_wps=1.0)
    host = machine_projection.this_machine(dict(run, worker_member_cpu=0.05, shard_member_cpu=0.05), cores=2)
    assert host["limits"]["core budget"] == pytest.approx(
        machine_projection.this_machine(run, cores=2)["limits"]["core budget"] * (2 - 8 * 0.05) / 2)


def test_the_benchmark_splits_a_nodes_threads_into_per_word_and_by_the_clock():
    scaling = load("scaling")
    row = {"raw_words": 1_000_000, "seconds": 10.0, "seed": 1, "raw_wps": 1e5, "kernel_cpu": 1.0,
           "cpu_seconds": {"client": 0.1, "worker": 2.0, "shard": 0.5, "dispatcher": 0.1},
           "merge_cpu": {"workers": 0.4, "shards": 0.2}, "stall_seconds": 0.0, "bytes_up": 0, "bytes_down": 0,
           "rounds": 10, "peak_rss_mb": {}, "analogy": 0.0, "ws353": 0.0, "simlex": 0.0,
           "shards": {"a": {}, "b": {}},
           "worker_threads_cpu": {"trainers": 1.2, "merger": 0.4, "heartbeat": 0.1, "serving": 0.06, "main": 0.04,
                                  "ended": 0.2},
           "shard_threads_cpu": {"serving": 0.4, "heartbeat": 0.06, "housekeeping": 0.04},
           "flush_cpu": {"workers": 0.1, "shards": 0.05}, "routine_nogil_cpu": {"workers": 0.06, "shards": 0.1},
           "shard_calls": {"merge": [20, 0.15, 0.25], "merge_flush": [4, 0.05, 0.08], "download": [8, 0.01, 0.03]}}
    out = scaling.costs(row, 4, threads=2)
    # the routine rounds' compiled calls released the GIL: 0.06 of the workers' 0.3 s, 0.1 of the shards' 0.25
    assert out["worker_gil_share"] == pytest.approx(1 - 0.06 / 0.3)
    assert out["shard_gil_share"] == pytest.approx(1 - 0.1 / 0.25)
    assert (out["shard_routine_call_us"], out["shard_flush_call_us"], out["shard_setup_call_us"]) == \
        pytest.approx((0.25, 0.08, 0.03))
    assert out["worker_member_cpu"] == pytest.approx(0.2 / (4 * 10.0))  # heartbeat, serving, main
    assert out["worker_other_us"] == pytest.approx((2.0 - 1.0 - 0.4 - 0.2) * 1e6 / 1e6)
    assert out["shard_member_cpu"] == pytest.approx(0.1 / (2 * 10.0))  # its Pyro4 threads serve the merges
    assert out["shard_us"] == pytest.approx((0.5 - 0.1) * 1e6 / 1e6)
    assert out["worker_threads_us"]["trainers"] == pytest.approx(1.2)


def test_the_gil_shares_are_the_runs_measured_ones_unless_given():
    costs = dict(CHEAP, worker_merge_us=1.0, worker_other_us=0.0, shard_us=2.0)
    assumed, details = projection.limits(costs, 8, 16, 10.0)
    assert details["gil_shares"] == {"merges": 1.0, "shards": 1.0}  # nothing measured: all of it held
    measured, details = projection.limits(dict(costs, worker_gil_share=0.25, shard_gil_share=0.5), 8, 16, 10.0)
    assert details["gil_shares"] == {"merges": 0.25, "shards": 0.5}
    assert measured["worker GIL"] == pytest.approx(4 * assumed["worker GIL"])
    assert measured["shard GIL"] == pytest.approx(2 * assumed["shard GIL"])
    given = projection.limits(dict(costs, worker_gil_share=0.25), 8, 16, 10.0, gil_share=1.0)[0]
    assert given["worker GIL"] == pytest.approx(assumed["worker GIL"])
    # held at the nearest measured K, never fitted as a power of K (a share stays a share)
    runs = [dict(costs, K=8, worker_gil_share=0.4), dict(costs, K=16, worker_gil_share=0.8)]
    assert projection.costs_at(runs, 32)[0]["worker_gil_share"] == 0.8


# ---------------------------------------------------------------------------------------------- counting
COUNT = {"count_worker_us": 0.04, "count_shard_us": 0.01, "count_bytes_per_word": 1.0, "tail_us_per_distinct": 1.0,
         "file_bytes_per_word": 6.0}


def test_counting_projection_names_its_limits_and_their_formulas():
    words, k, threads = 3e9, 8, 16
    got = counting.count_projection(COUNT, words, 1e7, k, threads, 10.0)
    share = words / k
    cores = share * 0.05e-6 / (threads * projection.efficiency(threads))
    assert got["limits"]["node cores"] == pytest.approx(cores)
    assert got["limits"]["shard lock"] == pytest.approx(share * 0.01e-6)
    assert got["limits"]["node link"] == pytest.approx(share * 8 * 7 / 8 / 1e10)
    assert got["limits"]["disk"] == pytest.approx(share * 6 / 500e6)
    assert got["limits"]["client tail"] == pytest.approx(10.0)  # 1e7 distinct words at 1 us
    assert got["bottleneck"] == "client tail" and got["seconds"] == pytest.approx(share * 6 / 500e6 + 10.0)
    assert counting.count_projection(COUNT, words, 1e6, k, threads, 10.0)["bottleneck"] == "disk"
    # a slow shard binds; one node has no link to cross
    slow = counting.count_projection(dict(COUNT, count_shard_us=1.0), words, 1e7, k, threads, 10.0)
    assert slow["bottleneck"] == "shard lock"
    assert counting.count_projection(COUNT, words, 1e7, 1, threads, 10.0)["limits"]["node link"] == 0.0
    # Heaps' law through the measured corpus
    assert counting.distinct_words(4e6, 1e6, 1000) == pytest.approx(1000 * 4 ** counting.HEAPS_BETA)


def test_the_benchmark_credits_the_threads_that_ran_at_once():
    """A worker's trainer threads met each other only as far as the machine's cores let them run at once:
    eight workers of two threads on two cores ran one thread's worth each (a one-thread cost, compared
    with gensim's one thread); one worker of two threads ran both at once."""
    scaling = load("scaling")
    assert scaling.concurrent_threads({"K": 8, "threads": 2}, 2) == 1
    assert scaling.concurrent_threads({"K": 2, "threads": 2}, 2) == 1
    assert scaling.concurrent_threads({"K": 1, "threads": 2}, 2) == 2
    assert scaling.concurrent_threads({"K": 2, "threads": 4}, 16) == 4
    assert scaling.concurrent_threads({"K": 1}, 2) == 1


def test_an_extrapolated_k_says_how_the_same_extrapolation_did_one_step_lower(capsys):
    """K beyond the measured carries the check of its method one step lower: the largest measured K
    projected from the two below it, against its projection from its own costs."""
    scaling = load("scaling")
    args = scaling.parse_args(["--reproject", "unused.json", "--project-k", "8,32", "--links", "10"])

    def run(k, merge):
        return dict(CHEAP, K=k, threads=2, shards=k, corpus_file=True, worker_merge_us=merge, shard_us=merge)
    three = [run(2, 0.1), run(4, 0.2), run(8, 0.8)]  # a cost growing faster than the power through 2 and 4 says
    points = scaling.print_projection(three, {"gensim_cf:1": 1.0}, args)
    beyond = next(p for p in points if p["K"] == 32)
    check = beyond["extrapolation_check"]
    assert check["K"] == 8 and check["from"] == [2, 4]
    assert check["error"] == pytest.approx(check["speedup_extrapolated"] / check["speedup_measured"] - 1)
    assert check["error"] > 0  # the power through 2 and 4 underestimates K=8's cost: its speed-up comes out high
    assert "one step lower, K=8 from K=2 and 4" in capsys.readouterr().out
    assert "extrapolation_check" not in next(p for p in points if p["K"] == 8)
    two = scaling.print_projection(three[1:], {"gensim_cf:1": 1.0}, args)
    assert next(p for p in two if p["K"] == 32)["extrapolation_check"]["error"] is None


def test_threads_at_once_are_counted_alike_for_both_sides():
    assert projection.concurrent_threads(2, 8, 2) == 1  # eight 2-thread workers on 2 cores
    assert projection.concurrent_threads(4, 1, 2) == 2  # gensim workers=4 on 2 cores: two at once
    assert projection.concurrent_threads(16, 4, 64) == 16
    assert projection.concurrent_threads(3, 2, None) == 3  # machines of their own
    assert projection.concurrent_threads(0, 1, 2) == 1


def test_this_machine_counts_the_links_outside_training_and_the_rounds_wait_for_cores():
    run = {"K": 2, "threads": 2, "shards": 2, "corpus_file": True, "raw_wps": 5e5, "kernel_us": 1.0,
           "worker_merge_us": 0.8, "shard_us": 0.7, "dispatcher_us": 0.04, "client_us": 0.07,
           "bytes_up_per_word": 70.0, "bytes_down_per_word": 60.0, "rounds_per_word": 1 / 2500,
           "flush_bytes_per_word": 20.0, "worker_gil_share": 1.0, "shard_gil_share": 1.0}
    # on loopback nothing is serial; on a link the session's rows (up, down, and each worker's at join)
    # and the flushes are
    assert machine_projection.serial_seconds(run, 3e6, 2, None) == 0.0
    link = 0.1e9 / 8
    assert machine_projection.serial_seconds(run, 3e6, 2, 0.1, model_bytes=1e7) == pytest.approx(
        2.5 * 1e7 / link + 20.0 * 3e6 / 2 * 0.5 / link)
    plain = machine_projection.this_machine(run, link_gbit=0.1)
    timed = machine_projection.this_machine(run, link_gbit=0.1, words=3e6, model_bytes=1e7)
    assert timed["serial_seconds"] > 0 and timed["model_wps"] == pytest.approx(
        3e6 / (3e6 / plain["model_wps"] + timed["serial_seconds"]))
    # a round measured at 7 ms on loopback, where its CPU is 2.0 + 0.875 ms: that CPU took 2.4x as long
    # with the cores busy; the predicted words/s keep them busy a share u, and the round's CPU waits 1 + 1.4 u
    cpu = 2500 * 0.8e-6 + 2500 * 0.7e-6 / 2
    full = (7e-3 - projection.LOOPBACK_RTT_MS * 1e-3) / cpu
    for rtt_ms in (projection.LOOPBACK_RTT_MS, 4.0):
        p = machine_projection.this_machine(dict(run, round_ms=7.0), rtt_ms=rtt_ms)
        busy = p["model_wps"] * p["node_cpu_us_per_word"] * 1e-6 / 2
        assert p["cores_busy"] == pytest.approx(min(1.0, busy), abs=1e-3)
        assert p["round_stretch"] == pytest.approx(1 + (full - 1) * p["cores_busy"], rel=1e-6)
        assert p["round_seconds"] == pytest.approx(rtt_ms * 1e-3 + p["round_stretch"] * cpu)
        assert p["model_wps"] <= 2 * 2500 / p["round_seconds"] * (1 + 1e-9)
    # through a 4 ms round trip (one call to every shard at once) the cores idle part of the time
    delayed = machine_projection.this_machine(dict(run, round_ms=7.0), rtt_ms=4.0)
    assert delayed["bottleneck"] == "round latency" and 0.5 < delayed["cores_busy"] < 0.9
    assert machine_projection.this_machine(run)["round_stretch"] == 1.0  # unmeasured: a core of its own


def test_this_machine_charges_the_links_cpu_per_byte_to_both_ends():
    run = {"K": 4, "threads": 2, "shards": 4, "corpus_file": True, "kernel_us": 1.0, "worker_merge_us": 0.8,
           "shard_us": 0.7, "dispatcher_us": 0.04, "client_us": 0.07, "bytes_up_per_word": 70.0,
           "bytes_down_per_word": 50.0, "rounds_per_word": 1 / 2500}
    plain = machine_projection.this_machine(run, link_gbit=0.2)
    costly = machine_projection.this_machine(run, link_gbit=0.2, link_ns_per_byte=30.0)
    extra = 30.0 * 1e-3 * 120.0 * 3 / 4  # µs a word: what crosses a link, at 30 ns a byte
    assert costly["node_cpu_us_per_word"] == pytest.approx(plain["node_cpu_us_per_word"] + extra)
    assert costly["round_terms"]["merge_cpu"] == pytest.approx(
        plain["round_terms"]["merge_cpu"] * (0.8 + extra / 2) / 0.8)
    assert costly["model_wps"] < plain["model_wps"]
    # what the rest of the machine spends on a byte (a relay, other processes' packets): its cores, not a round
    elsewhere = machine_projection.this_machine(run, link_gbit=0.2, host_ns_per_byte=30.0)
    assert elsewhere["node_cpu_us_per_word"] == pytest.approx(plain["node_cpu_us_per_word"] + extra)
    assert elsewhere["round_terms"] == pytest.approx(plain["round_terms"])
    assert elsewhere["limits"]["core budget"] < plain["limits"]["core budget"]


def test_a_prediction_at_another_k_keeps_the_workers_joining():
    """The joining (a million rows downloaded by every worker: ~1 µs a word of a 40 M-word run at K=4) is a
    cost of this machine's runs: a prediction at another K left it out and over-predicted K=5 by 31%
    (docs/scaling.rst, "Rows where trained, checked"). It grows with K as the others do."""
    runs = [dict(CHEAP, K=k, threads=2, shards=k, kernel_us=3.0, worker_merge_us=0.5, worker_other_us=0.05,
                 shard_us=0.7, dispatcher_us=0.08, client_us=0.3, rounds_per_word=1 / 185185, worker_setup_us=setup)
            for k, setup in ((2, 0.5), (4, 1.0))]
    costs, label = projection.costs_at(runs, 8)
    assert costs["worker_setup_us"] == pytest.approx(2.0) and "extrapolated" in label
    assert projection.costs_at(runs, 3)[0]["worker_setup_us"] == pytest.approx(0.75, rel=0.01)
    at5 = dict(projection.costs_at(runs, 5)[0], K=5, threads=2, shards=5, corpus_file=True)
    without = dict(at5, worker_setup_us=0.0)
    assert machine_projection.this_machine(at5, cores=2)["model_wps"] < 0.85 * machine_projection.this_machine(without, cores=2)["model_wps"]


def test_pieces_in_flight_overlap_a_rounds_flight_with_its_taking_but_for_the_last_piece():
    """A round of n pieces: the first piece's taking, then per piece the longer of the next piece's taking
    and its own flight (wire, shards, a round trip), and its taking in; one piece, or nothing to take,
    is the serial round (plus a round trip a piece)."""
    assert projection.pipelined(4.0, 2.0, 3.0, 0.5, 1) == pytest.approx(9.5)  # serial: all of it
    assert projection.pipelined(4.0, 2.0, 3.0, 0.0, 4) == pytest.approx(1 + 3 * (1 + 0.5) + 0.75 + 0.5)  # CPU-bound
    assert projection.pipelined(1.0, 2.0, 8.0, 0.0, 4) == pytest.approx(0.25 + 3 * (2 + 0.5) + 2 + 0.5)  # flight
    assert projection.pipelined(0.0, 2.0, 8.0, 0.1, 4) == pytest.approx(2.0 + 8.0 + 4 * 0.1)  # nothing overlaps
    for take, take_in, flight, trip in ((4.0, 2.0, 3.0, 0.1), (1.0, 2.0, 8.0, 0.2)):
        serial = take + take_in + flight + trip
        times = [projection.pipelined(take, take_in, flight, trip, n) for n in (1, 2, 4, 8)]
        assert times[0] == pytest.approx(serial)
        # never slower but for the round trips the pieces add (flight-bound, 8 pieces of 0.2: slower)
        assert all(t <= serial + (n - 1) * trip + 1e-12 for t, n in zip(times, (1, 2, 4, 8)))
        assert min(times) >= max(take + take_in, flight) - 1e-12  # never below the longer side


def test_a_projected_round_counts_its_pieces_only_where_the_run_measured_its_taking():
    """The round's time: ``pieces_overlap`` (negative) joins its terms when the costs name the pieces a
    round went in and the CPU their taking took; older runs (neither) keep the serial round."""
    costs = dict(CHEAP, rounds_per_word=1 / 50_000, worker_merge_us=0.5)

    def at(**more):
        return projection.project(dict(costs, **more), 1.0, 8, 16, 1.0, cores=1000)
    serial = at()
    assert "pieces_overlap" not in serial["round_terms"]
    piped = at(round_pieces=4, worker_take_us=0.3)
    terms = piped["round_terms"]
    assert terms["pieces_overlap"] < 0 and piped["round_seconds"] == pytest.approx(sum(terms.values()))
    flight = terms["wire"] + terms["shard_cpu"]
    assert piped["round_seconds"] == pytest.approx(projection.pipelined(
        terms["merge_cpu"] * 0.6, terms["merge_cpu"] * 0.4, flight, terms["round_trips"], 4))
    assert piped["round_seconds"] < serial["round_seconds"]
    assert at(round_pieces=4)["round_seconds"] == serial["round_seconds"]  # its taking not measured: serial


def test_rounds_in_flight_overlap_a_rounds_flight_with_the_next_rounds_taking():
    """``rounds_in_flight=2`` (and the taking's CPU measured): a round costs its taking in and the longer of
    its taking and its flight (wire, shards, round trips), never more than in turn nor less than the merge
    thread's CPU; without the taking measured, or with one round under way, the round stays serial."""
    costs = dict(CHEAP, rounds_per_word=1 / 50_000, worker_merge_us=0.5)

    def at(link, **more):
        return projection.project(dict(costs, **more), 1.0, 8, 16, link, cores=1000)
    for link in (10.0, 1.0, 0.1):  # merge-bound, then flight-bound
        serial, overlapped = at(link), at(link, rounds_in_flight=2, worker_take_us=0.3)
        terms = overlapped["round_terms"]
        assert overlapped["round_seconds"] == pytest.approx(sum(terms.values()))
        flight = terms["wire"] + terms["shard_cpu"] + terms["round_trips"]
        take, take_in = terms["merge_cpu"] * 0.6, terms["merge_cpu"] * 0.4
        assert overlapped["round_seconds"] == pytest.approx(take_in + max(take, flight))
        assert terms["merge_cpu"] - 1e-12 <= overlapped["round_seconds"] < serial["round_seconds"]
        assert at(link, rounds_in_flight=2)["round_seconds"] == serial["round_seconds"]
        assert at(link, rounds_in_flight=1, worker_take_us=0.3)["round_seconds"] == serial["round_seconds"]
    assert projection.in_flight(3.0, 1.0, 5.0) == 6.0 and projection.in_flight(3.0, 1.0, 2.0) == 4.0


def test_a_rounds_lag_is_its_time_at_the_clusters_rate_over_its_interval():
    """``lag_share``: the words a worker trains while its round is on its way, in intervals. Where the round's
    latency binds with rounds in flight a round lands as the next is due: one interval."""
    assert projection.lag_share(0.05, 8e6, 8, 100_000) == pytest.approx(0.5)
    assert projection.lag_share(0.05, 8e6, 8, 0) == 0.0
    costs = dict(CHEAP, rounds_per_word=1 / 50_000, worker_merge_us=0.5, bytes_up_per_word=40.0,
                 bytes_down_per_word=40.0, rounds_in_flight=2, worker_take_us=0.3)
    bound = projection.project(costs, 1.0, 8, 16, 0.1, cores=1000)
    assert bound["bottleneck"] == "round latency" and bound["lag_share"] == pytest.approx(1.0)
    free = projection.project(costs, 1.0, 8, 16, 100.0, cores=1000)
    assert free["bottleneck"] != "round latency" and 0 < free["lag_share"] < 1
    assert free["lag_share"] == pytest.approx(free["round_seconds"] / free["sync_words"] * free["cluster_wps"] / 8)


def test_a_point_whose_lag_is_beyond_the_limit_is_projected_at_the_interval_the_workers_steer_to():
    """``scaling.within_lag``: the longest interval (down to a quarter) whose interval and lag stay within the
    limit, found on the costs at each interval; a point within it, or with no limit, stays as asked; without
    costs at other intervals one beyond it is marked, not moved."""
    scaling = load("scaling")

    def at(interval, fixed=0.05, asked=100_000.0):
        words = interval or asked  # a round's time: a fixed part and one growing with the interval
        seconds = fixed + words * 2e-7
        wps = 1e7 * min(1.0, words / asked) ** 0.2  # shorter intervals cost speed
        return {"sync_words": words, "lag_share": projection.lag_share(seconds, wps, 8, words), "costs_from": ""}
    asked = at(None)
    assert 1 + asked["lag_share"] > 1.65
    p = scaling.within_lag(at, 1.65)
    assert p["staleness"] <= 1.65 and p["staleness"] == pytest.approx(p["sync_words"] / 1e5 * (1 + p["lag_share"]))
    assert p["staleness"] > 1.64 and p["interval_asked"] == 100_000 and not p["beyond_lag_limit"]
    assert "for the lag" in p["costs_from"]
    longer = at(p["sync_words"] * 1.01)
    assert p["sync_words"] * 1.01 / 1e5 * (1 + longer["lag_share"]) > 1.65  # the longest that holds
    assert scaling.within_lag(at, 3.0)["sync_words"] == 100_000  # within the limit: as asked
    assert scaling.within_lag(at, None)["sync_words"] == 100_000
    marked = scaling.within_lag(at, 1.65, shortened=False)
    assert marked["sync_words"] == 100_000 and marked["beyond_lag_limit"] and "beyond the limit" in marked["costs_from"]
    hopeless = scaling.within_lag(lambda interval: at(interval, fixed=10.0), 1.65)
    assert hopeless["sync_words"] == pytest.approx(25_000) and hopeless["beyond_lag_limit"]
    floor = scaling.within_lag(lambda interval: at(interval, asked=2_200.0), 1.01)  # the workers' floor: not moved
    assert floor["sync_words"] == 2_200 and floor["beyond_lag_limit"] and "at the floor" in floor["costs_from"]


def test_the_cli_summary_says_when_a_projected_point_lags_beyond_the_limit():
    from gensim_distw2v.client import summary
    assert "beyond lag_limit 1.65: its workers would shorten" in summary._lag_note({"lag_share": 1.0}, 1.65, 9_000)
    assert summary._lag_note({"lag_share": 0.3}, 1.65, 9_000) == "; interval and lag 1.30 intervals"
    assert "beyond" not in summary._lag_note({"lag_share": 5.0}, None, 9_000)
    assert "floor: not shortened" in summary._lag_note({"lag_share": 1.0}, 1.65, 2_200)
