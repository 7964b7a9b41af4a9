"""A worker's merge threads: what M threads take off a merge round's wall time, at a large vocabulary.

In process, no network: a replica of ``--rows`` rows of ``--dim`` values in two matrices (``syn0``,
``syn1neg``), a share of them changed as a round at that vocabulary finds them (``--changed``:
the hot rows and a share of the rest in an every-row round, the hot rows in a routine one), taken
(:meth:`gensim_distw2v.core.replica.Replica.take_delta`, int8 as routine rounds send them) and the
same number of rows applied back (``take_in``, values) with M = 1, 2, ... threads (``--threads``).
Prints, per M and phase, the median wall and CPU milliseconds of ``--repeats`` rounds, the speed-up
over one thread and its efficiency (speed-up / M). On this 2-core machine M above 2 only shares
the cores; a node's M follows its trainer threads (``merge_threads``).

    python benchmarks/merge_threads.py --rows 1070000 --hot 50000 --json
    python benchmarks/merge_threads.py --rows 1070000 --hot 50000 --threads 1 --listed --hold-back 0.3 --json

``--listed``: ``syn0`` read as a worker's rounds read it, its trainers naming the rows they changed.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_070_000)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--hot", type=int, default=50_000, help="rows every round merges (changed in every round)")
    parser.add_argument("--changed", default="0.12,0.4",
                        help="share of the other rows of syn0 and syn1neg changed since the last every-row round")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--listed", action="store_true",
                        help="syn0's rows as a worker reads them: only those its trainers name (Replica.touched)")
    parser.add_argument("--hold-back", type=float, default=0.0, help="of a round's change (a worker's default: 0.3)")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from gensim_distw2v.core.replica import Replica

    rng = np.random.default_rng(args.seed)
    weights = {name: rng.standard_normal((args.rows, args.dim), dtype=np.float32) * 0.1 for name in ("syn0", "syn1neg")}
    shares = dict(zip(weights, (float(x) for x in args.changed.split(","))))
    rows = {name: np.sort(np.concatenate([np.arange(args.hot), args.hot + rng.choice(
        args.rows - args.hot, int(shares[name] * (args.rows - args.hot)), replace=False)])).astype(np.uint32)
        for name in weights}
    results = []
    for m in (int(x) for x in args.threads.split(",")):
        replica = Replica(weights, threads=m, listed={"syn0": args.hot} if args.listed else None)
        for phase, limit in (("routine round", args.hot), ("every-row round", -1)):
            walls, cpus, applies, apply_cpus = [], [], [], []
            for _ in range(args.repeats):
                replica.take_delta(0, args.rows, "float32", exact=True)  # nothing pending (listed: nor waiting)
                for name, changed in rows.items():
                    touched = changed[:args.hot] if limit >= 0 else changed
                    replica.replica[name][touched] += rng.standard_normal((len(touched), args.dim), dtype=np.float32) * 1e-3
                    replica.touched(name, touched)  # (a matrix not listed: nothing)
                helpers, cpu, began = replica.helper_cpu, time.thread_time(), time.perf_counter()
                sent = replica.take_delta(0, args.rows, "int8", args.hold_back, limit)
                walls.append(time.perf_counter() - began)
                cpus.append(time.thread_time() - cpu + replica.helper_cpu - helpers)
                reply = {name: (r, np.asarray(replica.base[name][r]), None) for name, (r, _v, _s) in sent.items()}
                helpers, cpu, began = replica.helper_cpu, time.thread_time(), time.perf_counter()
                replica.take_in({}, reply)
                applies.append(time.perf_counter() - began)
                apply_cpus.append(time.thread_time() - cpu + replica.helper_cpu - helpers)
            row = {"threads": m, "phase": phase, "rows_sent": int(sum(len(v[0]) for v in sent.values())),
                   "take_ms": 1e3 * statistics.median(walls), "take_cpu_ms": 1e3 * statistics.median(cpus),
                   "apply_ms": 1e3 * statistics.median(applies), "apply_cpu_ms": 1e3 * statistics.median(apply_cpus)}
            results.append(row)
    base = {r["phase"]: r for r in results if r["threads"] == 1}
    print(f"{args.rows:,} rows x {args.dim} (syn0, syn1neg{', syn0 listed' if args.listed else ''}), hot {args.hot:,}, "
          f"hold-back {args.hold_back}, seed {args.seed}, medians of {args.repeats}")
    print(f"{'M':>3} {'phase':<16}{'rows':>10}{'take ms':>9}{'CPU':>7}{'apply ms':>10}{'CPU':>7}{'speed-up':>10}"
          f"{'efficiency':>11}")
    for r in results:
        one = base.get(r["phase"])
        total, total1 = r["take_ms"] + r["apply_ms"], one["take_ms"] + one["apply_ms"] if one else None
        r["speedup"] = total1 / total if total1 else None
        r["efficiency"] = r["speedup"] / r["threads"] if r["speedup"] else None
        print(f"{r['threads']:>3} {r['phase']:<16}{r['rows_sent']:>10,}{r['take_ms']:>9.1f}{r['take_cpu_ms']:>7.1f}"
              f"{r['apply_ms']:>10.1f}{r['apply_cpu_ms']:>7.1f}{r['speedup']:>10.2f}{r['efficiency']:>11.2f}")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "results": results}))


if __name__ == "__main__":
    main()
