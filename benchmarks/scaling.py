"""Per-role cost per trained word at K workers, and what it projects for a real cluster.

Runs plain gensim (``workers=1``, in memory and in ``corpus_file`` mode) and the cluster at each K
of ``--workers`` (K workers x 1 thread on this machine), each run a fresh process (through
``compare_gensim.py``'s single-run mode), and reports per trained raw word:

* ``kernel_us``: the workers' trainer threads' CPU in jobs;
* ``worker_merge_us``: the workers' CPU in merge rounds;
* ``shard_us``: the parameter shards' CPU, whole processes (folding merge parts and replying, and
  serving the weights' downloads and heartbeats), summed over the P shards of ``--shards``;
* ``dispatcher_us``: the dispatcher's CPU (coordination only: jobs, round reports, progress,
  heartbeats);
* ``client_us``: the client's CPU (reading and encoding the corpus, in iterable mode);
* bytes up and down per worker per trained word, merge rounds per worker per second;
* quality (analogy points, ws353 and simlex Spearman) against gensim ``workers=1``.

CPU figures are CPU time, not wall time, so running 8 workers on 2 cores (oversubscribed) does not
inflate them the way it inflates wall time; what it still distorts (caches shared, more context
switches) makes them pessimistic. From these it projects K nodes of T threads on links of L Gbit/s
(the model: ``docs/scaling.rst`` and :func:`project`):

* a node: ``T * e(T) * 1e6 / (kernel_us + worker_merge_us)`` words/s, ``e(T) = 1 - 0.08 log2 T``
  (the threading efficiency gensim's own benchmarks show: about 0.6 at 32 threads);
* the shards: ``P * 1e6 / shard_us`` for CPU (``shard_us`` summed over the shards, assumed to
  split evenly, which the interleaved rows make so);
* the links (full duplex): with one shard per node (P = K, the default), a node's link carries
  its worker's traffic and its shard's (``1/P`` of every worker's, the same again), so
  ``L / 8 / (bytes up + bytes down per word)`` each way; with shards on other hosts, a worker's
  link ``L / 8 / max(bytes up, bytes down)`` and the shards' ``P * L / 8 / max(...)``;
* the dispatcher: ``1e6 / dispatcher_us``; the client (iterable mode): ``1e6 / client_us``;
* the cluster: the least of ``K x`` the node limits and the shared ones; its bottleneck is that
  least one; against one T-thread node of plain gensim in ``corpus_file`` mode,
  ``T * e(T) * (gensim corpus_file words/s at 1 thread)``.

    python benchmarks/scaling.py --corpus /tmp/devmix.txt --workers 2,4,8 --sg 0 --epochs 3 --json
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module
import compare_gensim  # noqa: E402 - the single-run machinery and the corpus preparation


def efficiency(threads):
    """Threading efficiency of word2vec on one node: 1 at one thread, 0.6 at 32 (gensim's benchmarks)."""
    return max(0.1, 1.0 - 0.08 * math.log2(max(1, threads)))


def costs(row, k):
    """Per trained raw word, one cluster run's costs per role (see the module's docstring)."""
    raw = row["raw_words"]
    cpu = row["cpu_seconds"]
    us = 1e6 / max(1, raw)
    return {"K": k, "seed": row["seed"], "raw_wps": row["raw_wps"], "kernel_us": row["kernel_cpu"] * us,
            "worker_merge_us": row["merge_cpu"]["workers"] * us, "shard_us": cpu.get("shard", 0.0) * us,
            "shard_merge_us": row["merge_cpu"]["shards"] * us, "dispatcher_us": cpu.get("dispatcher", 0.0) * us,
            "client_us": cpu["client"] * us, "stall_share": row["stall_seconds"] / max(1e-9, k * row["seconds"]),
            "bytes_up_per_word": row["bytes_up"] / max(1, raw), "bytes_down_per_word": row["bytes_down"] / max(1, raw),
            "rounds_per_word": row["rounds"] / max(1, raw), "rss_mb": row["peak_rss_mb"],
            "analogy": row["analogy"], "ws353": row["ws353"], "simlex": row["simlex"]}


def project(run, gensim_cf_wps, k, threads, link_gbit, shards=None):
    """Words/s of K nodes of ``threads`` threads on ``link_gbit`` links, from one run's per-word costs,
    its bottleneck, and the speed-up over one node of plain gensim (corpus_file mode). ``shards``:
    P shard processes (default: one per node, P = K)."""
    shards = k if shards is None else shards
    e = efficiency(threads)
    link = link_gbit * 1e9 / 8
    wire = max(run["bytes_up_per_word"], run["bytes_down_per_word"], 1e-9)
    limits = {
        "worker CPU": k * threads * e * 1e6 / max(1e-9, run["kernel_us"] + run["worker_merge_us"]),
        "shard CPU": shards * 1e6 / max(1e-9, run["shard_us"]),
        "dispatcher CPU": 1e6 / max(1e-9, run["dispatcher_us"]),
        "client CPU": 1e6 / max(1e-9, run["client_us"]),
    }
    if shards == k:  # a shard beside each worker: a node's link carries both ways of both, each direction
        limits["node link"] = k * link / max(1e-9, run["bytes_up_per_word"] + run["bytes_down_per_word"])
    else:
        limits.update({"worker link": k * link / wire, "shard link": shards * link / wire})
    bottleneck = min(limits, key=limits.get)
    single = threads * e * gensim_cf_wps
    cluster = limits[bottleneck]
    return {"K": k, "threads": threads, "link_gbit": link_gbit, "shards": shards, "cluster_wps": cluster,
            "single_node_wps": single,
            "speedup": cluster / single, "bottleneck": bottleneck,
            "merges_per_worker_per_s": run["rounds_per_word"] * cluster / k}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--workers", default="2,4,8")
    parser.add_argument("--sg", type=int, default=0, choices=(0, 1))
    parser.add_argument("--hs", type=int, default=0, choices=(0, 1), help="hierarchical softmax (negative=0)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--max-words", type=int, default=0, help="use the corpus's first lines up to this many words")
    parser.add_argument("--sync-words", type=int, default=None,
                        help="merge interval of every K (default: the package's, which shrinks with K): a fixed one "
                             "separates the servers' cost per merge from the schedule's merges per word")
    parser.add_argument("--sync", default=None, help="sync mode of the measured runs (default: the package's)")
    parser.add_argument("--hold-back", type=float, default=None, help="hold-back share (default: the package's)")
    parser.add_argument("--shards", default="1",
                        help="parameter shards of the measured runs: a number, or K for one per worker (default 1)")
    parser.add_argument("--project-shards", type=int, default=None,
                        help="shards in the projection (default: one per node, P = K)")
    parser.add_argument("--threads", type=int, default=16, help="threads per node in the projection")
    parser.add_argument("--links", default="1,10", help="link speeds in Gbit/s in the projection")
    parser.add_argument("--project-k", default="2,4,8,16,32", help="node counts in the projection")
    parser.add_argument("--corpus-file", action="store_true",
                        help="measure the cluster in corpus_file mode (workers read their byte ranges; the client "
                             "and dispatcher carry no corpus) rather than from an iterable")
    parser.add_argument("--no-hmac", action="store_true",
                        help="unkeyed clusters (default: keyed, as a real cluster must be: HMAC's cost counted)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.workers.split(",")]
    if args.shards != "K" and not (args.shards.isdigit() and int(args.shards) >= 1):
        parser.error(f"--shards must be a number >= 1 or K, got {args.shards!r}")

    def shards_at(k):
        return k if args.shards == "K" else int(args.shards)
    base_args = ["--corpus", args.corpus, "--sg", str(args.sg), "--hs", str(args.hs), "--epochs", str(args.epochs)]
    if args.sync_words:
        base_args += ["--sync-words", str(args.sync_words)]
    if args.sync:
        base_args += ["--sync", args.sync]
    if args.hold_back is not None:
        base_args += ["--hold-back", str(args.hold_back)]
    if args.no_hmac:
        base_args += ["--no-hmac"]
    rows = {}
    dist_mode = "dist_cf" if args.corpus_file else "dist"
    with tempfile.TemporaryDirectory(prefix="scaling_") as workdir:
        one_args = compare_gensim.parse_args(base_args + ["--max-words", str(args.max_words)])
        vocab_path, corpus_path, words, vocab = compare_gensim.prepare(one_args, workdir)
        print(f"corpus {words} words, vocabulary {vocab}; sg={args.sg} epochs={args.epochs} seeds={args.seeds}",
              flush=True)
        for seed in range(1, args.seeds + 1):
            for mode, k in [("gensim", 1), ("gensim_cf", 1)] + [(dist_mode, k) for k in ks]:
                out = subprocess.run([sys.executable, compare_gensim.__file__, *base_args, "--shards", str(shards_at(k)),
                                      "--_one", mode, str(k),
                                      str(seed), vocab_path, corpus_path], capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    sys.exit(f"{mode} K={k} seed={seed} failed:\n{out.stderr[-5000:]}")
                row = json.loads(out.stdout.strip().splitlines()[-1])
                rows.setdefault((mode, k), []).append(row)
                print(f"  seed {seed} {mode} K={k}: {row['raw_wps']:.0f} raw words/s, analogy {row['analogy']:.4f} "
                      f"ws353 {row['ws353']:.4f} simlex {row['simlex']:.4f}", flush=True)
    ref = rows[("gensim", 1)]
    gensim_cf_wps = statistics.fmean(r["raw_wps"] for r in rows[("gensim_cf", 1)])
    runs = []
    print(f"\nper trained raw word, mean of {args.seeds} seed(s); quality against gensim workers=1")
    print(f"{'K':>3}{'P':>3}{'kernel us':>10}{'w merge us':>11}{'shard us':>9}{'/shard':>8}{'disp us':>9}{'client us':>10}"
          f"{'B/w up':>8}{'B/w dn':>8}{'rounds/Mw':>10}{'stall':>7}{'shard RSS':>10}{'analogy':>9}{'ws353':>8}"
          f"{'simlex':>8}")
    for k in ks:
        each = [costs(r, k) for r in rows[(dist_mode, k)]]
        run = {key: statistics.fmean(c[key] for c in each) for key in each[0] if key not in ("K", "seed", "rss_mb")}
        run["quality_delta"] = {q: run[q] - statistics.fmean(r[q] for r in ref) for q in ("analogy", "ws353", "simlex")}
        run["per_shard_us"] = run["shard_us"] / shards_at(k)
        run.update(K=k, sg=args.sg, shards=shards_at(k), shard_rss_mb=max(c["rss_mb"].get("shard", 0.0) for c in each),
                   dispatcher_rss_mb=max(c["rss_mb"].get("dispatcher", 0.0) for c in each))
        runs.append(run)
        qd = run["quality_delta"]
        print(f"{k:>3}{run['shards']:>3}{run['kernel_us']:>10.3f}{run['worker_merge_us']:>11.3f}{run['shard_us']:>9.3f}"
              f"{run['per_shard_us']:>8.3f}"
              f"{run['dispatcher_us']:>9.3f}{run['client_us']:>10.3f}{run['bytes_up_per_word']:>8.1f}"
              f"{run['bytes_down_per_word']:>8.1f}{1e6 * run['rounds_per_word']:>10.1f}{run['stall_share']:>7.1%}"
              f"{run['shard_rss_mb']:>10.0f}"
              f"{100 * qd['analogy']:>+9.2f}{qd['ws353']:>+8.4f}{qd['simlex']:>+8.4f}")
    first = runs[0]
    last = runs[-1]
    print("K=%d / K=%d per word: shard CPU x%.2f (per shard x%.2f), worker merge CPU x%.2f, bytes down x%.2f, merge "
          "rounds x%.2f; shard CPU per byte moved x%.2f"
          % (last["K"], first["K"], last["shard_us"] / max(1e-9, first["shard_us"]),
             last["per_shard_us"] / max(1e-9, first["per_shard_us"]),
             last["worker_merge_us"] / max(1e-9, first["worker_merge_us"]),
             last["bytes_down_per_word"] / max(1e-9, first["bytes_down_per_word"]),
             last["rounds_per_word"] / max(1e-12, first["rounds_per_word"]),
             (last["shard_us"] / max(1e-9, last["bytes_up_per_word"] + last["bytes_down_per_word"]))
             / max(1e-12, first["shard_us"] / max(1e-9, first["bytes_up_per_word"] + first["bytes_down_per_word"]))))
    projection = []
    by_k = {r["K"]: r for r in runs}
    print(f"\nprojection: nodes of {args.threads} threads, "
          f"{args.project_shards or 'one'} shard(s){'' if args.project_shards else ' per node'}; plain gensim corpus_file at 1 "
          f"thread {gensim_cf_wps:.0f} words/s here; each K uses the costs measured at the nearest K measured")
    print(f"{'K':>3}{'Gbit/s':>7}{'cluster w/s':>13}{'1 node w/s':>12}{'speed-up':>9}{'merges/s':>9}  bottleneck")
    for k in [int(x) for x in args.project_k.split(",")]:
        nearest = by_k[min(by_k, key=lambda m: (abs(math.log2(m) - math.log2(k)), -m))]
        for link in [float(x) for x in args.links.split(",")]:
            p = project(nearest, gensim_cf_wps, k, args.threads, link, args.project_shards)
            projection.append(p)
            print(f"{k:>3}{link:>7g}{p['cluster_wps']:>13.0f}{p['single_node_wps']:>12.0f}{p['speedup']:>9.2f}"
                  f"{p['merges_per_worker_per_s']:>9.1f}  {p['bottleneck']}")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "gensim_cf_wps": gensim_cf_wps, "runs": runs,
                          "projection": projection}))


if __name__ == "__main__":
    main()
