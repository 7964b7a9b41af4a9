"""CPU of one routine merge round, per role, against P parameter shards: the cluster's own code
(the worker's deltas, split by shard and packed; each shard's checks, fold and reply; the worker
taking the replies in), in one process and without Pyro, so that the fixed cost per shard call
shows apart from the network and from the other processes of a run.

A worker of a devmix-sized model (43,726 rows x 100 dimensions, 1,134 hot rows, 162 damped) has
changed, since its last round, 800 of the hot rows and 400 others of ``syn0`` and ``syn1neg``, and
names 600 wanted rows; K = P workers share the shards (the others' changes are what it is sent).
Prints, per P, the medians over ``--repeats`` blocks of ``--rounds`` rounds: the worker's CPU per
round, the shards' CPU per round and per call, and what a call adds (the slope over P)::

    python benchmarks/round_cost.py --shards 1,2,4,8

``docs/schedule.rst`` has the figures before and after the calls were made cheaper.
"""
import argparse
import json
import statistics
import time

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.core.merge import GlobalWeights
from gensim_distw2v.core.replica import Replica
from provenance import provenance  # a sibling module (the script's folder is on sys.path)

ROWS, SIZE, HOT, DAMPED = 43_726, 100, 1_134, 162
NAMES = ("syn0", "syn1neg")


class Rig:
    """K workers' replicas (the others only write) and P shards over a random model."""

    def __init__(self, n_shards, seed):
        self.rng = np.random.default_rng(seed)
        weights = {n: (self.rng.standard_normal((ROWS, SIZE)) * 0.1).astype(np.float32) for n in NAMES}
        self.layout = ShardLayout(n_shards)
        self.k = n_shards
        self.shards = []
        for p in range(n_shards):
            g = GlobalWeights({n: np.ascontiguousarray(self.layout.rows_of(w, p)) for n, w in weights.items()},
                              "damp", {n: self.layout.count(DAMPED, p) for n in NAMES}, "int8",
                              delta_rows=self.layout.count(HOT, p))
            for rank in range(self.k):
                g.add_worker(rank)
                for n in NAMES:
                    g.download(n, 0, len(g.weights[n]), rank)
            self.shards.append(g)
        self.replicas = [Replica({n: w.copy() for n, w in weights.items()}) for _ in range(self.k)]

    def train(self, rank):
        """What a worker changes in an interval (not timed)."""
        for n in NAMES:
            rows = np.concatenate([self.rng.choice(HOT, 800, replace=False),
                                   self.rng.choice(np.arange(HOT, ROWS), 400, replace=False)])
            self.replicas[rank].replica[n][rows] += self.rng.standard_normal((len(rows), SIZE)).astype(np.float32) * 1e-3

    def shard_call(self, p, msg):
        """A shard's side of one call: the checks, the fold and the reply (as ``Shard.merge``)."""
        g = self.shards[p]
        part = protocol.MergePart.from_wire(msg, n_rows=len(g.weights["syn0"]), vector_size=SIZE, weights=list(NAMES))
        missed, values = g.apply(part.rank, part.lo, part.hi, part.matrices, part.hold_back, part.exact,
                                 hot_rows=part.hot_rows, wanted=part.wanted)
        return protocol.MergeReply(matrices={n: protocol.pack_deltas(*d) for n, d in missed.items() if len(d[0])},
                               values={n: protocol.pack_deltas(*v) for n, v in values.items() if len(v[0])}).to_wire()

    def round(self, rank):
        """One routine round of worker ``rank``: ``(worker CPU, shards' CPU)`` in seconds."""
        layout, replica = self.layout, self.replicas[rank]
        wanted = np.sort(self.rng.choice(np.arange(HOT, ROWS), 600, replace=False)).astype(np.uint32)
        shard_cpu = 0.0
        start = time.thread_time()
        deltas = replica.take_delta(0, ROWS, "int8", 0.3, hot_rows=HOT)
        split = {n: layout.split(*d) for n, d in deltas.items() if len(d[0])}
        wanted_split = layout.split(wanted[np.searchsorted(wanted, HOT):])
        for p in range(len(self.shards)):
            lo, hi = layout.local_range(0, ROWS, p)
            msg = protocol.MergePart(session="s", rank=rank, lo=lo, hi=hi, hold_back=0.3, exact=False, token="t",
                                 matrices={n: protocol.pack_deltas(*d[p]) for n, d in split.items() if len(d[p][0])},
                                 hot_rows=layout.count(HOT, p),
                                 wanted=protocol.pack_wanted(wanted_split[p][0], lo, hi)).to_wire()
            before = time.thread_time()
            out = self.shard_call(p, msg)
            shard_cpu += time.thread_time() - before
            reply = protocol.MergeReply.from_wire(out)
            got = []
            for key in ("matrices", "values"):
                got.append({})
                for n, m in getattr(reply, key).items():
                    rows, values, scales = protocol.unpack_deltas(m, n, SIZE, lo, hi, "merge reply")
                    got[-1][n] = (layout.to_global(rows, p), values, scales)
            replica.take_in(*got)
        return time.thread_time() - start - shard_cpu, shard_cpu


def measure(n_shards, rounds, repeats, seed):
    rig = Rig(n_shards, seed)
    blocks = []
    for block in range(repeats + 1):
        worker = shards = 0.0
        for i in range(rounds):
            rank = i % rig.k
            rig.train(rank)
            w, s = rig.round(rank)
            worker, shards = worker + w, shards + s
        if block:  # the first block warms up
            blocks.append((worker / rounds * 1e6, shards / rounds * 1e6))
    worker_us = statistics.median(b[0] for b in blocks)
    shards_us = statistics.median(b[1] for b in blocks)
    return {"P": n_shards, "worker_us_per_round": worker_us, "shards_us_per_round": shards_us,
            "shard_us_per_call": shards_us / n_shards}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=100, help="rounds per block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks (medians reported)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [measure(int(p), args.rounds, args.repeats, args.seed) for p in args.shards.split(",")]
    print(f"routine round of one worker, {ROWS} rows x {SIZE}, {HOT} hot; medians of {args.repeats} x "
          f"{args.rounds} rounds, seed {args.seed}")
    print(f"{'P':>3}{'worker us/round':>17}{'shards us/round':>17}{'us/call':>9}")
    for r in rows:
        print(f"{r['P']:>3}{r['worker_us_per_round']:>17.0f}{r['shards_us_per_round']:>17.0f}"
              f"{r['shard_us_per_call']:>9.0f}")
    if len(rows) > 1:
        ps = [r["P"] for r in rows]
        for key in ("worker_us_per_round", "shards_us_per_round"):
            slope = np.polyfit(ps, [r[key] for r in rows], 1)[0]
            print(f"each shard more adds {slope:.0f} us of {key.split('_')[0]} CPU to a round")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "rows": rows}))


if __name__ == "__main__":
    main()
