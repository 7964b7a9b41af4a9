"""Per-word costs of two installs of the package, measured interleaved in one run.

A change that must not move the costs (a restructuring, a hardening) is checked by running the
same cluster runs with the package before and after it, alternating: for each seed and K, one run
with ``--before`` Python, one with ``--after`` Python, so that drift of the machine (other load,
thermal state) falls on both alike. Each run is ``compare_gensim.py``'s single-run mode (a fresh
LocalCluster of K workers x ``--threads-per-worker`` threads, the public API only), and its costs per trained raw word are
``scaling.py``'s (:func:`scaling.costs`). It prints, per K, each cost's median over the seeds for
both installs and their ratio (after / before), and flags ratios outside ``--tolerance``.

    python benchmarks/before_after.py --corpus /tmp/devmix.txt --max-words 3000000 --epochs 1 \\
        --workers 2,8 --threads-per-worker 2 --seeds 4 --before /work/before/.venv/bin/python \\
        --after .venv/bin/python --json

``--corpus-file`` trains from the file (``dist_cf``), ``--min-count`` sets the vocabulary's size (a
synthetic corpus's million rows at 3, ``benchmarks/vocab_costs.py``).
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
import scaling  # noqa: E402 - the per-word costs

COSTS = ("kernel_us", "worker_merge_us", "worker_routine_us", "worker_flush_us", "shard_us", "dispatcher_us", "client_us", "bytes_up_per_word",
         "bytes_down_per_word", "rounds_per_word", "raw_wps")


def one_run(python, base_args, k, threads, seed, vocab_path, corpus_path, shards="1", mode="dist"):
    """One cluster run of ``python``'s install (``shards``: a count, or ``K`` for one per worker; ``mode``:
    ``dist``, or ``dist_cf`` from the corpus file): its :func:`scaling.costs`."""
    shards = str(k) if shards == "K" else shards
    out = subprocess.run([python, compare_gensim.__file__, *base_args, "--shards", shards, "--threads-per-worker",
                          str(threads), "--_one",
                          mode, str(k), str(seed), vocab_path, corpus_path], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        sys.exit(f"{python} K={k} seed={seed} failed:\n{out.stderr[-5000:]}")
    return scaling.costs(json.loads(out.stdout.strip().splitlines()[-1]), k, threads, corpus_file=mode == "dist_cf")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--before", required=True, help="Python of the install before the change")
    parser.add_argument("--after", default=sys.executable, help="Python of the install after it (default: this one)")
    parser.add_argument("--workers", default="2,8")
    parser.add_argument("--threads-per-worker", type=int, default=2,
                        help="trainer threads of each worker (default 2: real workers run several)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds 1..N")
    parser.add_argument("--sg", type=int, default=0, choices=(0, 1))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-words", type=int, default=3_000_000)
    parser.add_argument("--tolerance", type=float, default=0.05, help="flag ratios beyond 1 +- this (default 0.05)")
    parser.add_argument("--sentences", default="list", choices=("list", "lines"),
                        help="the corpus the client streams: its sentences in a list (default, the same path before "
                             "and after) or a LineSentence (which an install with workers_read has its workers read)")
    parser.add_argument("--sync-words", type=int, default=None,
                        help="the merge interval of both (default: the package's, from the corpus and K)")
    parser.add_argument("--shards", default="1", help="parameter shards: a count, or K for one per worker (default 1)")
    parser.add_argument("--min-count", type=int, default=5, help="the vocabulary's min_count (a larger vocabulary: lower)")
    parser.add_argument("--corpus-file", action="store_true", help="train from the corpus file (dist_cf)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.workers.split(",")]
    base_args = ["--corpus", args.corpus, "--sg", str(args.sg), "--epochs", str(args.epochs),
                 "--sentences", args.sentences, "--min-count", str(args.min_count)] \
        + ([] if args.sync_words is None else ["--sync-words", str(args.sync_words)])
    runs = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="before_after_") as workdir:
        one_args = compare_gensim.parse_args(base_args + ["--max-words", str(args.max_words)])
        vocab_path, corpus_path, words, vocab = compare_gensim.prepare(one_args, workdir)
        print(f"corpus {words} words, vocabulary {vocab}; sg={args.sg} epochs={args.epochs} seeds 1..{args.seeds}; "
              f"workers of {args.threads_per_worker} threads",
              flush=True)
        for seed in range(1, args.seeds + 1):
            for k in ks:
                # alternate which goes first, so that neither always runs on a machine warmed by the other
                order = ("before", "after") if (seed + k) % 2 else ("after", "before")
                for label in order:
                    python = args.before if label == "before" else args.after
                    row = one_run(python, base_args, k, args.threads_per_worker, seed, vocab_path, corpus_path,
                                  args.shards, "dist_cf" if args.corpus_file else "dist")
                    runs[label].setdefault(k, []).append(row)
                    print(f"  seed {seed} K={k} {label:>6}: {row['raw_wps']:.0f} raw words/s, worker merge "
                          f"{row['worker_merge_us']:.3f} us, shard {row['shard_us']:.3f} us, dispatcher "
                          f"{row['dispatcher_us']:.3f} us per word", flush=True)
    summary, flagged = [], []
    print(f"\nmedians over seeds 1..{args.seeds}: before / after (ratio)")
    for k in ks:
        row = {"K": k}
        for cost in COSTS:
            before = statistics.median(r[cost] for r in runs["before"][k])
            after = statistics.median(r[cost] for r in runs["after"][k])
            ratio = after / before if before else float("nan")
            row[cost] = {"before": before, "after": after, "ratio": ratio}
            if cost != "raw_wps" and before and abs(ratio - 1) > args.tolerance:
                flagged.append(f"K={k} {cost} x{ratio:.3f}")
        summary.append(row)
        print(f"K={k}: " + ", ".join(f"{cost} {row[cost]['before']:.4g} / {row[cost]['after']:.4g} "
                                      f"({row[cost]['ratio']:.3f})" for cost in COSTS))
    print("outside the tolerance: " + (", ".join(flagged) if flagged else "none"))
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "summary": summary, "flagged": flagged,
                          "runs": {label: {str(k): rows for k, rows in by_k.items()} for label, by_k in runs.items()}}))


if __name__ == "__main__":
    main()
