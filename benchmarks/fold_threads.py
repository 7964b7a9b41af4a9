"""A shard's folds on several threads: what holding each part's rows only lets F threads fold at once.

In process, no network: one shard's rows (``--rows`` of ``--dim`` values in ``syn0`` and ``syn1neg``:
a shard's share of a large vocabulary) and ``--workers`` workers, each sending every round the change
of its hot rows (``--hot``, the shard's share of them), int8 as routine rounds send it, in
``--pieces`` pieces in row order (:func:`gensim_distw2v.core.schedule.round_pieces`), and taking the
reply (what :meth:`gensim_distw2v.core.merge.GlobalWeights.apply` returns). The workers' parts are
folded by F threads (``--threads``), each serving its share of the workers as a shard's connections
do; ``--locks one`` folds every part under one lock (as before: a part waited for any other). Prints, per F, locks and
pieces, the median wall milliseconds of a round of all workers over ``--repeats`` runs, and the
speed-up over one thread. On this 2-core machine F above 2 only shares the cores.

    python benchmarks/fold_threads.py --rows 134000 --hot 6250 --workers 8 --json
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=134_000, help="the shard's rows (1.07 M over 8 shards)")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--hot", type=int, default=6_250, help="the shard's hot rows, each worker's change each round")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--pieces", default="1,4", help="a round's pieces (each a part to the shard)")
    parser.add_argument("--locks", default="rows,one", help="rows: a part holds its rows; one: one lock for all")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of every worker per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def deltas(rng, hot, dim, pieces):
    """A worker's round: per piece, ``(lo, hi, {matrix: (rows, int8 levels, scales)})``."""
    from gensim_distw2v.core.schedule import round_pieces

    out = []
    for lo, hi in round_pieces([(0, hot)], hot, pieces, piece_rows=256):
        rows = np.arange(lo, hi, dtype=np.uint32)
        part = {name: (rows, rng.integers(-127, 128, (len(rows), dim), dtype=np.int8),
                       rng.uniform(1e-5, 1e-4, len(rows)).astype(np.float32)) for name in ("syn0", "syn1neg")}
        out.append((lo, hi, part))
    return out


def one_run(args, threads, pieces, locks, seed):
    """Wall seconds of ``--rounds`` rounds of every worker, folded by ``threads`` threads."""
    from gensim_distw2v.core import merge

    rng = np.random.default_rng(seed)
    weights = {name: rng.uniform(-0.1, 0.1, (args.rows, args.dim)).astype(np.float32) for name in ("syn0", "syn1neg")}
    g = merge.GlobalWeights(weights, rule="damp", damp_rows={"syn0": 100, "syn1neg": 100}, codec="int8",
                            delta_rows=args.hot)
    one = threading.Lock() if locks == "one" else contextlib.nullcontext()
    for worker in range(args.workers):
        g.add_worker(worker)
    rounds = [[deltas(rng, args.hot, args.dim, pieces) for _ in range(args.rounds)] for _ in range(args.workers)]

    def serve(mine):
        for r in range(args.rounds):
            for worker in mine:
                for lo, hi, part in rounds[worker][r]:
                    with one:
                        g.apply(worker, lo, hi, part, 0.3, exact=False, hot_rows=args.hot)
    groups = [list(range(args.workers))[t::threads] for t in range(threads)]
    helpers = [threading.Thread(target=serve, args=(group,)) for group in groups]
    began = time.perf_counter()
    for helper in helpers:
        helper.start()
    for helper in helpers:
        helper.join()
    return time.perf_counter() - began


def main(argv=None):
    args = parse_args(argv)
    rows = []
    for locks in args.locks.split(","):
        for pieces in (int(p) for p in args.pieces.split(",")):
            base = None
            for threads in (int(t) for t in args.threads.split(",")):
                runs = [one_run(args, threads, pieces, locks, args.seed + i) for i in range(args.repeats)]
                ms = 1e3 * statistics.median(runs) / args.rounds
                base = base or ms
                rows.append({"locks": locks, "pieces": pieces, "F": threads, "round_ms": ms,
                             "runs_ms": [1e3 * r / args.rounds for r in runs], "speedup": base / ms})
                print(f"locks {locks:4s} pieces {pieces}  F={threads}: a round of {args.workers} workers "
                      f"{ms:7.2f} ms (median of {args.repeats}), x{base / ms:.2f} over one thread", flush=True)
    if args.json:
        print(json.dumps({"params": vars(args), "rows": rows, "provenance": provenance()}))


if __name__ == "__main__":
    main()
