"""Per-role cost per trained word at K workers, and what it projects for a real cluster.

Runs plain gensim (``workers=1``, in memory and in ``corpus_file`` mode; also at ``workers=N`` for each
N of ``--gensim-workers``) and the cluster at each K of ``--workers`` (K workers x
``--threads-per-worker`` threads on this machine), each run a fresh process (through
``compare_gensim.py``'s single-run mode), and reports per trained raw word:

* ``kernel_us``: the workers' trainer threads' CPU in jobs;
* ``worker_merge_us``: the workers' CPU in merge rounds;
* ``worker_other_us``: the rest of the workers' process CPU (fetching and decoding jobs, Pyro4's
  calls): Python, counted as GIL-held; their clock-driven threads (heartbeats, Pyro4's housekeeping)
  apart, as ``worker_member_cpu`` (CPU seconds a second per worker; ``shard_member_cpu`` likewise);
* ``shard_us``: the parameter shards' CPU, whole processes (folding merge parts and replying, and
  serving the weights' downloads and heartbeats), summed over the P shards of ``--shards``;
* ``dispatcher_us``: the dispatcher's CPU (coordination only: jobs, round reports, progress,
  heartbeats);
* ``client_us``: the client's CPU (reading and encoding the corpus, in iterable mode);
* bytes up and down per worker per trained word, merge rounds per worker per word;
* quality (analogy points, ws353 and simlex Spearman) against gensim ``workers=1``.

CPU figures are CPU time, not wall time, so running 8 workers on 2 cores (oversubscribed) does not
inflate them the way it inflates wall time; what it still distorts (caches shared, more context
switches) makes them pessimistic. From these it projects K nodes of T threads on links of L Gbit/s
with the model of :mod:`projection` (``docs/scaling.rst``): one limit per serial resource (trainer
threads, merger threads, the worker's GIL, shard fold threads and GIL, dispatcher, client, links),
a node's cores budgeted among its roles, and a merge round's latency against the interval's
training time; the cluster's words/s is the least limit. It also checks the model against this
machine: the model of the 2-core host (every process on its cores, loopback) for each measured
configuration, next to the words/s measured.

    python benchmarks/scaling.py --corpus /tmp/devmix.txt --workers 2,4,8 --sg 0 --epochs 3 --json
    python benchmarks/scaling.py --corpus /tmp/devmix.txt --workers 1 --threads-per-worker 2 --gensim-workers 2
    python benchmarks/scaling.py --check docs/measurements/scaling-interval-cbow-devmix-2026-11-24.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module
import compare_gensim  # noqa: E402 - the single-run machinery and the corpus preparation
import projection  # noqa: E402 - the model
from gensim_distw2v import machine_projection  # noqa: E402 - the model of this machine
from gensim_distw2v.core.schedule import FEW_WORKERS, shortest_interval  # noqa: E402
from gensim_distw2v.config.choices import COLD_OUTPUT_DOWN  # noqa: E402
from gensim_distw2v.config.settings import LAG_LIMIT  # noqa: E402

efficiency = projection.efficiency
SHOWN = ("trainer threads", "merger threads", "worker GIL", "shard fold threads", "dispatcher CPU", "client CPU",
         "core budget", "round latency")  # the projection table's columns (the JSON has every limit)


def costs(row, k, threads=1, corpus_file=False):
    """Per trained raw word, one cluster run's costs per role (see the module's docstring)."""
    raw = row["raw_words"]
    cpu = row["cpu_seconds"]
    us = 1e6 / max(1, raw)
    out = {"K": k, "threads": threads, "corpus_file": corpus_file, "seed": row["seed"], "raw_wps": row["raw_wps"],
           "kernel_us": row["kernel_cpu"] * us,
           "worker_merge_us": row["merge_cpu"]["workers"] * us, "shard_us": cpu.get("shard", 0.0) * us,
           "shard_merge_us": row["merge_cpu"]["shards"] * us, "dispatcher_us": cpu.get("dispatcher", 0.0) * us,
           "client_us": cpu["client"] * us, "stall_share": row["stall_seconds"] / max(1e-9, k * row["seconds"]),
           "bytes_up_per_word": row["bytes_up"] / max(1, raw), "bytes_down_per_word": row["bytes_down"] / max(1, raw),
           "rounds_per_word": row["rounds"] / max(1, raw), "rss_mb": row["peak_rss_mb"],
           # a merge round's mean wall time on its worker (flushes among them: one a worker and epoch)
           "round_ms": 1e3 * row.get("merge_seconds", 0.0) / max(1, row["rounds"]),
           "analogy": row["analogy"], "ws353": row["ws353"], "simlex": row["simlex"]}
    # of the merge CPU and bytes, the epoch flushes' (exact rounds: every row, float32): a cost per epoch and
    # worker, not per interval, so a short corpus overstates it per word; routine_* is the rest (per interval)
    flush = row.get("flush_cpu", {"workers": 0.0, "shards": 0.0})
    out.update(worker_flush_us=flush["workers"] * us, shard_flush_us=flush["shards"] * us,
               flush_bytes_per_word=row.get("exact_bytes", 0) / max(1, raw),
               worker_routine_us=(row["merge_cpu"]["workers"] - flush["workers"]) * us,
               shard_routine_us=(row["merge_cpu"]["shards"] - flush["shards"]) * us,
               epoch_words_per_worker=raw / max(1, row.get("epochs", 1)) / max(1, k))
    # the shards' serving of the session's transfers (the weights' upload, the workers' downloads at join and
    # the client's at the end): per session, like the workers' joining (the handlers' CPU; Pyro4's around them
    # stays in shard_us)
    shard_calls = row.get("shard_calls") or {}
    out["shard_setup_us"] = sum(c[1] for op, c in shard_calls.items() if op in projection.SESSION_CALLS) * us
    if any(len(c) > 2 and c[2] > 0 for c in shard_calls.values()):
        # the whole calls' CPU, transport included (measured since 2026-11-27): the session's transfers,
        # the epochs' flushes and the routine merges, each as it cost
        out["shard_setup_call_us"] = sum(c[2] for op, c in shard_calls.items() if op in projection.SESSION_CALLS) * us
        out["shard_flush_call_us"] = shard_calls.get("merge_flush", [0, 0.0, 0.0])[2] * us
        out["shard_routine_call_us"] = shard_calls.get("merge", [0, 0.0, 0.0])[2] * us
    # of the routine rounds' CPU, the compiled calls' (folding, taking and applying parts): they release the
    # GIL, so the GIL-held share of a worker's merges and of a shard's routine calls is measured, not assumed
    # (since 2026-11-27; the Python and the transport around them are counted as held)
    nogil = row.get("routine_nogil_cpu")
    if nogil and (nogil.get("workers") or nogil.get("shards")):
        out["worker_routine_nogil_us"], out["shard_routine_nogil_us"] = nogil["workers"] * us, nogil["shards"] * us
        out["worker_gil_share"] = min(1.0, max(0.0, 1.0 - out["worker_routine_nogil_us"]
                                               / max(1e-12, out["worker_routine_us"])))
        if out.get("shard_routine_call_us"):
            out["shard_gil_share"] = min(1.0, max(0.0, 1.0 - out["shard_routine_nogil_us"] / out["shard_routine_call_us"]))
    if row.get("take_cpu"):  # of a worker's routine rounds, the taking of their pieces (what pieces in flight overlap)
        out["worker_take_us"] = row["take_cpu"] * us
    out["round_pieces"] = row.get("round_pieces", 1)
    out["rounds_in_flight"] = row.get("rounds_in_flight", 1)
    out["overlapped_share"] = row.get("overlapped", 0) / max(1, row.get("rounds", 0))
    if row.get("shard_traffic"):  # the shards' bytes beyond the workers' merges: the session's transfers, mostly
        out["shard_session_bytes_per_word"] = max(0, row["shard_traffic"] - row["bytes_up"] - row["bytes_down"]) \
            / max(1, raw)
    if row.get("dispatcher_calls"):  # what of the dispatcher's CPU grows with the words, what with time
        members = k + len(row.get("shards") or {}) + 1
        out.update(projection.dispatcher_split(row["dispatcher_calls"], cpu.get("dispatcher", 0.0), raw, members,
                                               row["seconds"]))
    # the workers' CPU joining the session (join, weights' download, replica): per session and worker, so
    # spread over a longer corpus like the flushes (projection.at_corpus)
    out["worker_setup_us"] = row.get("setup_cpu", 0.0) * us
    if "worker" in cpu:  # the worker processes' CPU outside kernels, merge rounds and joining
        out["worker_other_us"] = max(0.0, cpu["worker"] * us - out["kernel_us"] - out["worker_merge_us"]
                                     - out["worker_setup_us"])
    # of the processes' CPU, their clock-driven threads' (heartbeats, Pyro4's housekeeping and accepting): a
    # share of a core per node whatever the speed, not a cost per word (measured by thread since 2026-11-27)
    for role, key, per_word in (("worker", "worker_member_cpu", "worker_other_us"), ("shard", "shard_member_cpu",
                                                                                    "shard_us")):
        groups = row.get(f"{role}_threads_cpu")
        nodes = k if role == "worker" else len(row.get("shards") or {}) or 1
        if groups and per_word in out:
            clock = sum(groups.get(group, 0.0) for group in projection.PER_SECOND_GROUPS[role])
            out[key] = clock / max(1e-9, nodes * row["seconds"])
            out[per_word] = max(0.0, out[per_word] - clock * us)
            out[f"{role}_threads_us"] = {group: seconds * us for group, seconds in sorted(groups.items())}
    return out


def shard_placement(args):
    """Where the projection puts the shards, in words (``shards_per_node``: ``vocab_costs.py --shards-from``
    only, which measured what more shards a node cost; this script's runs did not)."""
    if getattr(args, "shards_per_node", None):
        return f"{args.shards_per_node} shards per node"
    return f"{args.project_shards} shard hosts" if args.project_shards else "one shard per node"


def model_options(args):
    """:func:`projection.limits`'s options from the command line."""
    return {"mergers": args.mergers, "fold_threads": args.fold_threads, "gil_share": args.gil_share,
            "shard_gil_share": args.shard_gil_share, "job_python_us": args.job_python_us,
            "round_trips": args.round_trips, "sync": args.model_sync,
            "shards_per_node": getattr(args, "shards_per_node", None)}


def project(run, gensim_us, k, threads, link_gbit, shards=None, **options):
    """Words/s of K nodes of ``threads`` threads on ``link_gbit`` links from one run's per-word costs
    (:func:`projection.project`; ``run["threads"]``: the trainer threads its kernel costs were
    measured with; ``gensim_us``: plain gensim's corpus_file CPU per word measured with as many)."""
    options.setdefault("kernel_threads", int(run.get("threads", 1)))
    options.setdefault("gensim_threads", options["kernel_threads"])
    options.setdefault("corpus_file", bool(run.get("corpus_file", False)))
    return projection.project(run, gensim_us, k, threads, link_gbit, shards, **options)


def check_this_machine(runs, args):
    """The model of this host for each measured run, next to its measured words/s; printed."""
    print(f"\nthis machine: the model of {args.machine_cores} shared cores (every process; loopback, round trip "
          f"{projection.LOOPBACK_RTT_MS} ms) against the words/s measured (target: ratio within 0.75-1.25)")
    print(f"{'K':>3}{'T':>3}{'P':>3}{'mode':>6}{'model w/s':>11}{'measured':>10}{'ratio':>7}  bottleneck (next)")
    out = []
    for run in runs:
        options = model_options(args)
        options.pop("sync")
        c = machine_projection.this_machine(run, cores=args.machine_cores, sync=args.model_sync, **options)
        ranked = sorted((v, n) for n, v in c["limits"].items() if v is not None)
        following = next((f"{n} {v:.0f}" for v, n in ranked if n != c["bottleneck"]), "")
        print(f"{c['K']:>3}{c['threads']:>3}{c['shards']:>3}{'cf' if run.get('corpus_file') else 'iter':>6}"
              f"{c['model_wps']:>11.0f}{c['measured_wps'] or float('nan'):>10.0f}{c['ratio'] or float('nan'):>7.2f}  "
              f"{c['bottleneck']} ({following})")
        out.append(c)
    return out


def _share(given, runs, key):
    """The GIL share the projection uses, as the table's header says it: given, or each run's measured."""
    if given is not None:
        return f"{given:g}"
    return "measured " + "/".join(f"{r[key]:.2f}" if key in r else "1" for r in runs) + " (K=" \
        + "/".join(str(r["K"]) for r in runs) + ")"


def concurrent_threads(run, machine_cores):
    """How many of a measured run's worker threads ran at once on the machine that measured it
    (:func:`projection.concurrent_threads` of its K workers on ``machine_cores``)."""
    return projection.concurrent_threads(run.get("threads", 1), run["K"], machine_cores)


def print_projection(runs, gensim_us, args, at_interval=None):
    """The projection to K nodes of ``--threads`` threads, every K of ``--project-k``, against one node of
    plain gensim whose threads are credited as the cluster's: ``gensim_us`` (``{"gensim_cf:N": CPU µs per
    word}``) at as many threads as ran at once in a measured worker (:func:`concurrent_threads`), both
    through the same efficiency curve; returns its records (None: no gensim run at that count).
    ``at_interval(k, runs)``: the measured runs' costs as they would be at the interval K nodes merge at,
    and how they were had (``vocab_costs.py --intervals-from``; default: as measured)."""
    at_once = min(concurrent_threads(run, args.machine_cores) for run in runs)
    reference = gensim_us.get(f"gensim_cf:{at_once}")
    if not reference:
        print(f"\nno projection: it needs plain gensim in corpus_file mode at workers={at_once}")
        return None
    print(f"\nprojection: nodes of {args.threads} threads and {args.cores or args.threads} cores, "
          f"{shard_placement(args)}, "
          f"{args.mergers} merger thread(s), {args.fold_threads} fold thread(s) a shard, GIL share "
          f"{_share(args.gil_share, runs, 'worker_gil_share')} (merges) / "
          f"{_share(args.shard_gil_share, runs, 'shard_gil_share')} (shards), {args.round_trips} round trips a round "
          f"({'rtt %g ms' % args.rtt_ms if args.rtt_ms is not None else 'rtt 0.1 ms on 10 GbE, 0.2 ms on 1 GbE'}), "
          f"sync {args.model_sync}; plain gensim corpus_file {reference:.3f} us of CPU a word at "
          f"{at_once} thread(s) here, the cluster's kernel {runs[-1]['kernel_us']:.3f} us with {at_once} of its "
          f"threads at once (both "
          f"through e(T) = 1 - {projection.EFFICIENCY_SLOPE:g} log2 T); /node: over K worker nodes and one head "
          f"node; "
          f"K beyond the measured: {args.extrapolate}")
    print(f"{'K':>3}{'Gbit/s':>7}{'cluster w/s':>13}{'1 node w/s':>12}{'speed-up':>9}{'/node':>6}{'round ms':>9}"
          f"{'intvl ms':>9}{'stale':>6}"
          + "".join(f"{name[:11]:>12}" for name in SHOWN) + "  bottleneck; costs")
    out = []
    scaled = [projection.at_corpus(run, args.project_corpus_words, args.transport_ns_per_byte) for run in runs]
    if args.project_corpus_words:
        print("epoch flushes: " + "; ".join(f"K={run['K']} {how}" for run, (_, how) in zip(runs, scaled)))

    def at(measured, k, link, interval=None):
        note = ""
        if at_interval is not None:  # (before the flushes are spread: the routine rounds' part changes)
            measured, note = at_interval(k, measured, interval)
        measured = [projection.at_corpus(run, args.project_corpus_words, args.transport_ns_per_byte)[0]
                    for run in measured]
        at_k, label = projection.costs_at(measured, k, args.extrapolate)
        label += note
        at_k["threads"], at_k["corpus_file"] = runs[-1].get("threads", 1), runs[-1].get("corpus_file", False)
        p = project(at_k, reference, k, args.threads, link, args.project_shards, cores=args.cores,
                    rtt_ms=args.rtt_ms, kernel_threads=at_once, gensim_threads=at_once, **model_options(args))
        p["costs_from"], p["costs"] = label, {key: at_k[key] for key in projection.COSTS if key in at_k}
        return p

    def point(measured, k, link):  # (the workers steer their intervals from eight on: settings.lag_limit)
        return within_lag(lambda interval: at(measured, k, link, interval),
                          lag_limit(args) if k >= FEW_WORKERS else None, shortened=at_interval is not None)
    largest = max(int(run["K"]) for run in runs)
    for k in [int(x) for x in args.project_k.split(",")]:
        for link in [float(x) for x in args.links.split(",")]:
            p = point(runs, k, link)
            label = p["costs_from"]
            if k > largest:  # an extrapolation: the same one a step lower, against what was measured there
                p["extrapolation_check"] = extrapolation_check(runs, largest, link, point)
                label += f" ({p['extrapolation_check']['label']})"
            out.append(p)
            if p["above_linear"]:  # the cluster's threads run gensim's kernel: more than K x is a fault of the model
                print(f"ERROR: K={k} projected above {k} x one node ({p['speedup']:.2f}x) with no measured mechanism")
            print(f"{k:>3}{link:>7g}{p['cluster_wps']:>13.0f}{p['single_node_wps']:>12.0f}{p['speedup']:>9.2f}"
                  f"{p['speedup_per_node']:>6.2f}"
                  f"{1e3 * p['round_seconds']:>9.2f}{1e3 * p['interval_seconds']:>9.2f}{p['staleness']:>6.2f}"
                  + "".join(f"{p['limits'][n] / 1e6:>11.2f}M" if p["limits"][n] is not None else f"{'-':>12}"
                            for n in SHOWN) + f"  {p['bottleneck']}; {label}")
    return out


def lag_limit(args):
    """``--lag-limit`` as a number (the package's ``settings.LAG_LIMIT`` by default; None for 'none')."""
    value = getattr(args, "lag_limit", None)
    if value is None:
        return LAG_LIMIT
    return None if str(value).lower() == "none" else float(value)


def within_lag(at, limit, shortened=True):
    """The projected point ``at(interval)`` (None: the interval asked for) where its interval and its rounds'
    lag (:func:`projection.lag_share`) together stay within ``limit`` intervals asked for, as the workers steer
    their intervals (``settings.lag_limit``): the longest interval, down to the shortest they may take
    (``schedule.shortest_interval``), that keeps them there, found by bisection on the costs at each interval. Adds
    ``staleness`` (interval and lag over the interval asked for), ``interval_asked`` and ``lag_limit``; without
    costs at other intervals (``shortened=False``) a point beyond the limit is only marked
    (``beyond_lag_limit``: its quality is not shown)."""
    p = at(None)
    asked = p["sync_words"]
    p.update(staleness=1 + p["lag_share"], interval_asked=asked, lag_limit=limit, beyond_lag_limit=False)
    if limit is None or p["staleness"] <= limit or not asked:
        return p
    if not shortened:
        p["beyond_lag_limit"] = True
        p["costs_from"] += f"; interval and lag {p['staleness']:.2f} intervals, beyond the limit {limit:g}"
        return p
    shortest = shortest_interval(asked) / asked
    if shortest >= 1.0:  # (an interval at the floor is not shortened: marked)
        p["beyond_lag_limit"] = True
        p["costs_from"] += f"; interval and lag {p['staleness']:.2f} intervals, at the floor: not shortened"
        return p
    low, high, best = shortest, 1.0, None
    for _ in range(14):
        share = (low + high) / 2
        q = at(share * asked)
        stale = share * (1 + q["lag_share"])
        if stale <= limit:
            low, best = share, (q, stale)
        else:
            high = share
    if best is None:  # (even a quarter of the interval lags beyond the limit)
        q = at(shortest * asked)
        best = (q, shortest * (1 + q["lag_share"]))
    q, stale = best
    q.update(staleness=stale, interval_asked=asked, lag_limit=limit, beyond_lag_limit=stale > limit)
    q["costs_from"] += (f"; interval {q['sync_words']:,.0f} words for the lag (limit {limit:g}: "
                        f"{p['staleness']:.2f} intervals at {asked:,.0f})")
    return q


def extrapolation_check(runs, largest, link, point):
    """The extrapolation beyond the measured Ks tried one step lower: the largest measured K projected from the
    Ks below it (its costs a power of K through the two next largest), against its projection from its own
    costs: ``{"K", "from", "speedup_extrapolated", "speedup_measured", "error", "label"}`` (with fewer than
    three measured Ks: ``error`` None, the label says so)."""
    below = [run for run in runs if int(run["K"]) < largest]
    ks = sorted(int(run["K"]) for run in below)
    if len(ks) < 2:
        return {"K": largest, "from": ks, "error": None,
                "label": "unchecked: measure three Ks to try this extrapolation one step lower"}
    guessed, measured = point(below, largest, link)["speedup"], point(runs, largest, link)["speedup"]
    error = guessed / measured - 1
    return {"K": largest, "from": ks[-2:], "speedup_extrapolated": guessed, "speedup_measured": measured,
            "error": error, "label": f"one step lower, K={largest} from K={ks[-2]} and {ks[-1]}: {error:+.0%}"}


def _found_runs(data, default_cf):
    """The lists of measured runs in a scaling JSON (this script's, or a file of several such
    results), each run with ``threads`` and ``corpus_file`` (older runs: 1 thread, the args' mode)."""
    if isinstance(data, dict):
        runs = data.get("runs")
        if isinstance(runs, list) and runs and isinstance(runs[0], dict) and "kernel_us" in runs[0]:
            cf = bool((data.get("args") or {}).get("corpus_file", default_cf))
            yield [dict(r, threads=r.get("threads", 1), corpus_file=r.get("corpus_file", cf)) for r in runs]
            return
        for value in data.values():
            yield from _found_runs(value, default_cf)
    elif isinstance(data, list):
        for value in data:
            yield from _found_runs(value, default_cf)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", help="the corpus (required unless --check)")
    parser.add_argument("--workers", default="2,4,8",
                        help="clusters measured: K workers, or KxT (K workers of T threads), e.g. 8,16 or 2x1,1x2 "
                             "(T defaults to --threads-per-worker)")
    parser.add_argument("--gensim-modes", default="gensim,gensim_cf",
                        help="plain gensim's modes run (default both; the projection's reference is gensim_cf)")
    parser.add_argument("--threads-per-worker", type=int, default=1,
                        help="trainer threads of each measured worker (LocalCluster(threads_per_worker=...))")
    parser.add_argument("--gensim-workers", default="1",
                        help="plain gensim baselines also run at workers=N for each N here (e.g. 2), words/s printed "
                             "side by side with the cluster's (workers=1 always runs: the quality reference and "
                             "the projection's single-thread speed)")
    parser.add_argument("--sg", type=int, default=0, choices=(0, 1))
    parser.add_argument("--hs", type=int, default=0, choices=(0, 1), help="hierarchical softmax (negative=0)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first-seed", type=int, default=1, help="the seeds are this one and those after it")
    parser.add_argument("--max-words", type=int, default=0, help="use the corpus's first lines up to this many words")
    parser.add_argument("--min-count", type=int, default=5,
                        help="gensim's min_count (default 5; lower it for a larger vocabulary of the same corpus)")
    parser.add_argument("--sync-words", type=int, default=None,
                        help="merge interval of every K (default: the package's, which shrinks with K): a fixed one "
                             "separates the servers' cost per merge from the schedule's merges per word")
    parser.add_argument("--sync", default=None, help="sync mode of the measured runs (default: the package's)")
    parser.add_argument("--hold-back", type=float, default=None, help="hold-back share (default: the package's)")
    parser.add_argument("--cold-every", type=int, default=None,
                        help="merge the cold rows every n-th round (default: the package's)")
    parser.add_argument("--cold-output-every", type=int, default=None,
                        help="of the rounds that merge cold rows, every n-th sends syn1neg's (default: the package's)")
    parser.add_argument("--cold-output-down", choices=COLD_OUTPUT_DOWN, default=None,
                        help="which rare syn1neg rows those rounds bring down (default: the package's)")
    parser.add_argument("--round-pieces", type=int, default=None,
                        help="a routine round's pieces in flight (default: the package's)")
    parser.add_argument("--rounds-in-flight", type=int, default=None,
                        help="a worker's routine rounds under way at once (default: the package's)")
    parser.add_argument("--lag-limit", default=None,
                        help="interval plus lag kept within this many intervals, or 'none' (default: the package's)")
    parser.add_argument("--shards", default="1",
                        help="parameter shards of the measured runs: a number, or K for one per worker (default 1)")
    parser.add_argument("--project-shards", type=int, default=None,
                        help="shard hosts of their own in the projection (default: one shard per node, P = K)")
    parser.add_argument("--threads", type=int, default=16, help="threads (trainer threads) per node in the projection")
    parser.add_argument("--cores", type=int, default=None, help="cores per node in the projection (default --threads)")
    parser.add_argument("--links", default="1,10", help="link speeds in Gbit/s in the projection")
    parser.add_argument("--project-k", default="2,4,8,16,32", help="node counts in the projection")
    parser.add_argument("--extrapolate", default="fit", choices=("fit", "hold"),
                        help="K beyond the largest measured: each K-dependent cost as a power of K through the two "
                             "largest measured Ks (fit), or the largest's costs (hold)")
    parser.add_argument("--mergers", type=int, default=1, help="merger threads per worker in the projection")
    parser.add_argument("--fold-threads", type=int, default=1,
                        help="parts a shard folds at once in the projection (at most the workers' pieces)")
    parser.add_argument("--gil-share", type=float, default=None,
                        help="share of a worker's merge CPU holding the GIL (default: as measured, all but the "
                             "routine rounds' compiled calls; 1 where a run did not measure it)")
    parser.add_argument("--shard-gil-share", type=float, default=None,
                        help="share of a shard's CPU holding the GIL (default: as measured, all but the routine "
                             "parts' compiled folds and replies; 1 where a run did not measure it)")
    parser.add_argument("--job-python-us", type=float, default=None,
                        help="a worker's GIL-held CPU per word besides merges (default: the measured "
                             f"worker_other_us, else {projection.DEFAULT_JOB_PYTHON_US})")
    parser.add_argument("--rtt-ms", type=float, default=None,
                        help="round trip in the projection (default 0.1 ms on 10 GbE and faster, 0.2 ms below)")
    parser.add_argument("--round-trips", type=int, default=projection.DEFAULT_ROUND_TRIPS,
                        help="round trips a merge round waits for in turn (default: merge to every shard, round_done)")
    parser.add_argument("--model-sync", default="ssp", choices=("ssp", "bsp", "asp"),
                        help="sync mode the projection models (default ssp: bounded staleness)")
    parser.add_argument("--machine-cores", type=int, default=2, help="cores of this machine in the check (default 2)")
    parser.add_argument("--project-corpus-words", type=float, default=None,
                        help="raw words per epoch of the projected corpus (e.g. 1e9 with --sync-words 185185): the "
                             "epoch flushes' costs, per epoch and worker, are spread over its words (default: as "
                             "measured, which a short corpus overstates)")
    parser.add_argument("--transport-ns-per-byte", type=float, default=1.5,
                        help="the shards' transport CPU per byte moved (default 1.5 ns: benchmarks/transport_cost.py "
                             "with HMAC, 2026-11-27): with --project-corpus-words, the transport of the epoch flushes "
                             "and of the session's transfers is spread like their handlers' CPU (0: not)")
    parser.add_argument("--check", nargs="+", metavar="JSON",
                        help="run nothing: the model of this machine against the runs of these scaling JSONs")
    parser.add_argument("--reproject", metavar="JSON",
                        help="run nothing: project the runs of this scaling JSON (one with gensim_us) again")
    parser.add_argument("--corpus-file", action="store_true",
                        help="measure the cluster in corpus_file mode (workers read their byte ranges; the client "
                             "and dispatcher carry no corpus) rather than from an iterable")
    parser.add_argument("--sentences", default="lines", choices=("lines", "list"),
                        help="iterable runs train from a LineSentence of the file (default: gensim's producer reads "
                             "it; the workers read it themselves) or from its sentences in a list in memory")
    parser.add_argument("--no-workers-read", action="store_true",
                        help="the client streams the LineSentence itself (workers_read=False)")
    parser.add_argument("--no-hmac", action="store_true",
                        help="unkeyed clusters (default: keyed, as a real cluster must be: HMAC's cost counted)")
    parser.add_argument("--no-channel", action="store_true",
                        help="shards without the bulk channel: merges go by Pyro4 (default: by the channel)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    if args.shards != "K" and not (args.shards.isdigit() and int(args.shards) >= 1):
        parser.error(f"--shards must be a number >= 1 or K, got {args.shards!r}")
    if not args.check and not args.reproject and not args.corpus:
        parser.error("--corpus is required (unless --check or --reproject)")
    if args.threads_per_worker < 1 or args.mergers < 1 or args.fold_threads < 1:
        parser.error("--threads-per-worker, --mergers and --fold-threads must be >= 1")
    return args


def clusters(spec, threads):
    """``--workers``'s items as ``(K, T)``: ``"8"`` is K=8 of ``threads`` threads, ``"2x1"`` K=2 of 1."""
    out = []
    for item in spec.split(","):
        k, _, t = item.strip().partition("x")
        if not k.isdigit() or int(k) < 1 or (t and (not t.isdigit() or int(t) < 1)):
            raise ValueError(f"--workers: {item!r} is not K or KxT (K, T >= 1)")
        out.append((int(k), int(t) if t else threads))
    return out


def measure(args, ks, shards_at):
    """Run gensim and the cluster, each run a fresh process; ``{(mode, k): [rows]}``."""
    base_args = ["--corpus", args.corpus, "--sg", str(args.sg), "--hs", str(args.hs), "--epochs", str(args.epochs),
                 "--min-count", str(args.min_count)]
    if args.sync_words:
        base_args += ["--sync-words", str(args.sync_words)]
    if args.sync:
        base_args += ["--sync", args.sync]
    if args.hold_back is not None:
        base_args += ["--hold-back", str(args.hold_back)]
    if args.cold_every is not None:
        base_args += ["--cold-every", str(args.cold_every)]
    if args.cold_output_every is not None:
        base_args += ["--cold-output-every", str(args.cold_output_every)]
    if args.cold_output_down is not None:
        base_args += ["--cold-output-down", args.cold_output_down]
    if args.round_pieces is not None:
        base_args += ["--round-pieces", str(args.round_pieces)]
    if args.rounds_in_flight is not None:
        base_args += ["--rounds-in-flight", str(args.rounds_in_flight)]
    if args.lag_limit is not None:
        base_args += ["--lag-limit", args.lag_limit]
    if args.no_hmac:
        base_args += ["--no-hmac"]
    if args.no_channel:
        base_args += ["--no-channel"]
    base_args += ["--sentences", args.sentences] + (["--no-workers-read"] if args.no_workers_read else [])
    rows = {}
    dist_mode = "dist_cf" if args.corpus_file else "dist"
    # gensim at workers=1, at each --gensim-workers, and with as many threads as each measured worker has (its
    # CPU per word there is what the projection's one-node reference takes: the same kind of time, the same T)
    gensim_ns = sorted({1} | {int(n) for n in args.gensim_workers.split(",") if n} | {t for _, t in ks})
    modes = [m for m in ("gensim", "gensim_cf") if m in args.gensim_modes.split(",")]
    with tempfile.TemporaryDirectory(prefix="scaling_") as workdir:
        one_args = compare_gensim.parse_args(base_args + ["--max-words", str(args.max_words)])
        vocab_path, corpus_path, words, vocab = compare_gensim.prepare(one_args, workdir)
        print(f"corpus {words} words, vocabulary {vocab}; sg={args.sg} epochs={args.epochs} seeds={args.seeds}; "
              f"clusters (K, T): {ks}", flush=True)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            plan = [(m, n) for n in gensim_ns for m in modes] + [(dist_mode, kt) for kt in ks]
            for mode, k in plan:
                k, t = k if mode == dist_mode else (k, 1)
                key = (k, t) if mode == dist_mode else k
                out = subprocess.run([sys.executable, compare_gensim.__file__, *base_args, "--shards", str(shards_at(k)),
                                      "--threads-per-worker", str(t), "--_one", mode, str(k),
                                      str(seed), vocab_path, corpus_path], capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    sys.exit(f"{mode} K={k} seed={seed} failed:\n{out.stderr[-5000:]}")
                row = json.loads(out.stdout.strip().splitlines()[-1])
                rows.setdefault((mode, key), []).append(row)
                print(f"  seed {seed} {mode} {f'K={k} x T={t}' if mode == dist_mode else f'workers={k}'}: "
                      f"{row['raw_wps']:.0f} raw "
                      f"words/s, analogy {row['analogy']:.4f} ws353 {row['ws353']:.4f} simlex {row['simlex']:.4f}",
                      flush=True)
    return rows, dist_mode, gensim_ns, {"words": words, "vocabulary": vocab}


def summarise(args, ks, rows, dist_mode, shards_at):
    """Per-word costs of each K, means over seeds; printed; returns the runs."""
    ref = rows.get(("gensim", 1)) or rows.get(("gensim_cf", 1))  # the quality reference: gensim workers=1
    runs = []
    print(f"\nper trained raw word, mean of {args.seeds} seed(s); quality against gensim workers=1")
    print(f"{'K':>3}{'T':>3}{'P':>3}{'kernel us':>10}{'w merge us':>11}{'w other':>8}{'shard us':>9}{'/shard':>8}"
          f"{'disp us':>9}{'client us':>10}{'B/w up':>8}{'B/w dn':>8}{'rounds/Mw':>10}{'stall':>7}{'shard RSS':>10}"
          f"{'analogy':>9}{'ws353':>8}{'simlex':>8}")
    for k, t in ks:
        each = [costs(r, k, t, args.corpus_file) for r in rows[(dist_mode, (k, t))]]
        run = {key: statistics.fmean(c[key] for c in each) for key in each[0]
               if key not in ("K", "seed", "rss_mb", "threads", "corpus_file") and not isinstance(each[0][key], dict)}
        for key in (key for key in each[0] if isinstance(each[0][key], dict)):  # by thread group: means too
            run[key] = {name: statistics.fmean(c[key].get(name, 0.0) for c in each)
                        for name in sorted(set().union(*(c[key] for c in each)))}
        run["quality_delta"] = {q: run[q] - statistics.fmean(r[q] for r in ref) if ref else float("nan")
                                for q in ("analogy", "ws353", "simlex")}  # (nan: no gensim run beside it)
        run["per_shard_us"] = run["shard_us"] / shards_at(k)
        run.update(K=k, threads=t, corpus_file=args.corpus_file, sg=args.sg, shards=shards_at(k),
                   shard_rss_mb=max(c["rss_mb"].get("shard", 0.0) for c in each),
                   dispatcher_rss_mb=max(c["rss_mb"].get("dispatcher", 0.0) for c in each))
        runs.append(run)
        qd = run["quality_delta"]
        print(f"{k:>3}{run['threads']:>3}{run['shards']:>3}{run['kernel_us']:>10.3f}{run['worker_merge_us']:>11.3f}"
              f"{run.get('worker_other_us', float('nan')):>8.3f}{run['shard_us']:>9.3f}{run['per_shard_us']:>8.3f}"
              f"{run['dispatcher_us']:>9.3f}{run['client_us']:>10.3f}{run['bytes_up_per_word']:>8.1f}"
              f"{run['bytes_down_per_word']:>8.1f}{1e6 * run['rounds_per_word']:>10.1f}{run['stall_share']:>7.1%}"
              f"{run['shard_rss_mb']:>10.0f}"
              f"{100 * qd['analogy']:>+9.2f}{qd['ws353']:>+8.4f}{qd['simlex']:>+8.4f}")
    for run in runs:
        if "dispatcher_word_us" in run:
            print(f"K={run['K']}: the dispatcher's {run['dispatcher_us']:.3f} us a word: "
                  f"{run['dispatcher_word_us']:.4f} us with the words (jobs), {run.get('dispatcher_session_us', 0.0):.4f} us per session (set-up, "
                  f"joining, transfers, epochs), the rest per member and second: "
                  f"{1e3 * run['dispatcher_member_cpu']:.3f} ms of CPU a second each "
                  f"({run['dispatcher_calls_per_member_s']:.2f} calls/s, "
                  f"{run['dispatcher_overhead_us_per_call']:.0f} us a call beyond its handler)")
        if run.get("worker_setup_us") or run.get("shard_setup_us"):
            print(f"K={run['K']}: per session (spread over a longer corpus by --project-corpus-words): the workers' "
                  f"joining {run['worker_setup_us']:.3f} us a word (not in 'w other'), the shards' serving of the "
                  f"session's transfers {run.get('shard_setup_us', 0.0):.3f} us (in 'shard us')")
        for role in ("worker", "shard"):
            if f"{role}_threads_us" in run:
                print(f"K={run['K']}: the {role}s' threads, us a word: " + ", ".join(
                    f"{group} {value:.3f}" for group, value in run[f"{role}_threads_us"].items())
                      + f"; by the clock ({', '.join(projection.PER_SECOND_GROUPS[role])}): "
                      f"{1e3 * run[f'{role}_member_cpu']:.2f} ms of CPU a second each, not per word")
        if "worker_flush_us" in run:
            print(f"K={run['K']}: of the merge CPU per word, routine rounds (per interval) worker "
                  f"{run['worker_routine_us']:.3f} us, shards {run['shard_routine_us']:.3f} us; epoch flushes (per epoch "
                  f"of {run['epoch_words_per_worker']:,.0f} words a worker) worker {run['worker_flush_us']:.3f} us, shards "
                  f"{run['shard_flush_us']:.3f} us, {run['flush_bytes_per_word']:.1f} B/w")
    first, last = runs[0], runs[-1]
    if len(runs) > 1:
        print("K=%d / K=%d per word: shard CPU x%.2f (per shard x%.2f), worker merge CPU x%.2f, bytes down x%.2f, "
              "merge rounds x%.2f; shard CPU per byte moved x%.2f"
              % (last["K"], first["K"], last["shard_us"] / max(1e-9, first["shard_us"]),
                 last["per_shard_us"] / max(1e-9, first["per_shard_us"]),
                 last["worker_merge_us"] / max(1e-9, first["worker_merge_us"]),
                 last["bytes_down_per_word"] / max(1e-9, first["bytes_down_per_word"]),
                 last["rounds_per_word"] / max(1e-12, first["rounds_per_word"]),
                 (last["shard_us"] / max(1e-9, last["bytes_up_per_word"] + last["bytes_down_per_word"]))
                 / max(1e-12, first["shard_us"] / max(1e-9, first["bytes_up_per_word"] + first["bytes_down_per_word"]))))
    return runs


def side_by_side(args, runs, rows, gensim_ns):
    """The cluster's words/s over plain gensim's at each ``--gensim-workers``; printed. Returns gensim's
    words/s and its CPU per raw word (its whole process), each by ``"mode:workers"``."""
    gensim_wps = {f"{mode}:{n}": statistics.fmean(r["raw_wps"] for r in rows[(mode, n)])
                  for n in gensim_ns for mode in ("gensim", "gensim_cf") if (mode, n) in rows}
    gensim_us = {f"{mode}:{n}": statistics.fmean(1e6 * r["cpu_seconds"]["process"] / max(1.0, r["raw_wps"] * r["seconds"])
                                                 for r in rows[(mode, n)])
                 for n in gensim_ns for mode in ("gensim", "gensim_cf") if (mode, n) in rows}
    same = "gensim_cf" if args.corpus_file else "gensim"
    print(f"\nraw words/s, cluster against plain gensim in this run (the cluster from "
          f"{'a corpus file' if args.corpus_file else 'an iterable'}: against gensim's same mode, and corpus_file)")
    for run in runs:
        for n in gensim_ns:
            mine = run["raw_wps"]
            ratios = run.setdefault("vs_gensim", {})
            for mode in dict.fromkeys((same, "gensim_cf")):
                if f"{mode}:{n}" in gensim_wps:
                    ratios[f"{mode}:{n}"] = mine / gensim_wps[f"{mode}:{n}"]
            print(f"  K={run['K']} x T={run['threads']}: {mine:.0f}; gensim workers={n}: "
                  + ", ".join(f"{mode} {gensim_wps[f'{mode}:{n}']:.0f} (cluster/{mode} {ratios[f'{mode}:{n}']:.2f})"
                              for mode in dict.fromkeys((same, "gensim_cf")) if f"{mode}:{n}" in gensim_wps))
    print("CPU per raw word, us (whole process for gensim; the trainer threads' for the cluster's kernel): "
          + ", ".join(f"gensim {key} {value:.3f}" for key, value in sorted(gensim_us.items()))
          + "; " + ", ".join(f"cluster K={run['K']} x T={run['threads']} kernel {run['kernel_us']:.3f}" for run in runs))
    for n in gensim_ns:  # the efficiency of n threads this machine shows, as CPU per word at 1 thread over at n
        if n > 1 and f"gensim_cf:{n}" in gensim_us and "gensim_cf:1" in gensim_us:
            print(f"gensim corpus_file: CPU per word at 1 thread / at {n} threads = "
                  f"{gensim_us['gensim_cf:1'] / gensim_us[f'gensim_cf:{n}']:.3f} (the curve assumes "
                  f"e({n}) = {projection.efficiency(n):.3f} for both sides)")
    return gensim_wps, gensim_us


def main(argv=None):
    args = parse_args(argv)
    if args.reproject:
        reproject(args)
        return
    if args.check:
        checked = []
        for path in args.check:
            with open(path, encoding="utf-8") as fin:
                data = json.load(fin)
            for runs in _found_runs(data, args.corpus_file):
                print(f"\n{path}")
                checked += check_this_machine(runs, args)
        if args.json:
            print(json.dumps({"provenance": provenance(), "args": vars(args), "this_machine": checked}))
        return
    try:
        ks = clusters(args.workers, args.threads_per_worker)
    except ValueError as err:
        sys.exit(str(err))

    def shards_at(k):
        return k if args.shards == "K" else int(args.shards)
    rows, dist_mode, gensim_ns, corpus = measure(args, ks, shards_at)
    runs = summarise(args, ks, rows, dist_mode, shards_at)
    gensim_wps, gensim_us = side_by_side(args, runs, rows, gensim_ns)
    gensim_cf_wps = gensim_wps.get("gensim_cf:1")
    machine = check_this_machine(runs, args)
    # the projection: the runs of the last thread count measured (costs_at interpolates over K), against
    # gensim's corpus_file CPU per word with as many threads as their workers had
    same_threads = [run for run in runs if run["threads"] == runs[-1]["threads"]]
    projected = print_projection(same_threads, gensim_us, args) or []
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "corpus": corpus,
                          "gensim_cf_wps": gensim_cf_wps,
                          "gensim_wps": gensim_wps, "gensim_us": gensim_us, "runs": runs, "this_machine": machine,
                          "projection": projected}))


def reproject(args):
    """``--reproject FILE``: the projection of a scaling JSON's runs (with gensim's CPU per word: this script's
    since 2026-11-28) by today's model, under this command line's projection options; nothing is run."""
    with open(args.reproject, encoding="utf-8") as fin:
        data = json.load(fin)
    if not data.get("gensim_us"):
        sys.exit(f"{args.reproject} has no gensim_us (gensim's CPU per word): it predates the symmetric projection")
    runs = [dict(r, threads=r.get("threads", 1)) for r in data["runs"]]
    for key in ("project_corpus_words", "transport_ns_per_byte"):
        if getattr(args, key) is None:
            setattr(args, key, data["args"].get(key))
    same_threads = [run for run in runs if run["threads"] == runs[-1]["threads"]]
    projected = print_projection(same_threads, data["gensim_us"], args) or []
    if args.json:
        print(json.dumps({"provenance": provenance(), "source": {"file": args.reproject,
                                                                 "provenance": data.get("provenance")},
                          "args": vars(args), "gensim_us": data["gensim_us"], "runs": runs,
                          "projection": projected}))


if __name__ == "__main__":
    main()
