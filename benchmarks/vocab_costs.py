"""Per-word costs against the vocabulary's size, and the projection at a projected corpus's vocabulary.

Reads ``scaling.py`` JSONs measured at one K on corpora of several vocabularies (``--runs``: e.g.
devmix's 44 k rows and synthetic corpora of 0.5-2 M rows, ``synth_corpus.py --zipf 1.05
--topic-words 500000 --function-share 0.3`` at ``--min-count`` 5, 3 and 2), prints each role's CPU and
bytes per word by vocabulary, and fits each cost as a power of the vocabulary through the two
measured vocabularies nearest the asked one (beyond the largest: through the two largest, a falling
cost held). Then it takes the runs of ``--headline`` (a ``scaling.py`` JSON at the base vocabulary,
the first of ``--runs``, with gensim's CPU per word: ``gensim_us``), multiplies every
vocabulary-dependent cost and gensim's own CPU per word by its fitted ratio at ``--vocabulary`` over
the base's, and projects them (``scaling.print_projection``): what K nodes would do at that
vocabulary. Each cost's ratio is a measurement at one K carried to another; the corpora differ in more
than their vocabularies (word lengths, subsampling): both are stated with the figures.

    python benchmarks/vocab_costs.py --runs devmix-k4.json,mc5-k4.json,mc3-k4.json \\
        --headline scaling-k8-16-t2-cf-1g-symmetric-2026-11-28.json --vocabulary 1.5e6 --json
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module
import scaling  # noqa: E402 - the projection's printing, with its options

#: the per-word costs that grow with the rows a round scans and moves (the kernel too: its rows fall out of cache)
VOCAB_KEYS = ("kernel_us", "worker_merge_us", "worker_routine_us", "worker_flush_us", "worker_other_us",
              "worker_setup_us", "shard_us", "shard_routine_us", "shard_flush_us", "shard_setup_us",
              "shard_routine_call_us", "shard_flush_call_us", "shard_setup_call_us", "bytes_up_per_word",
              "bytes_down_per_word", "flush_bytes_per_word", "worker_routine_nogil_us", "shard_routine_nogil_us")
#: the per-word costs the shards' count changes (more shards a node: more parts a round, each of fewer rows)
SHARD_KEYS = ("worker_merge_us", "worker_routine_us", "worker_flush_us", "worker_take_us", "worker_routine_nogil_us",
              "shard_us", "shard_routine_call_us", "shard_flush_call_us", "shard_setup_call_us", "shard_routine_nogil_us",
              "bytes_up_per_word", "bytes_down_per_word", "flush_bytes_per_word")
#: the routine rounds' per-word costs, which the interval changes (the flushes' and the session's do not)
INTERVAL_KEYS = ("worker_routine_us", "worker_take_us", "worker_routine_nogil_us", "shard_routine_call_us",
                 "shard_routine_nogil_us", "routine_bytes_up", "routine_bytes_down")
SHOWN = ("kernel_us", "worker_routine_us", "worker_flush_us", "shard_us", "dispatcher_us", "bytes_up_per_word",
         "bytes_down_per_word")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True,
                        help="scaling JSONs at one K, comma-separated, the base vocabulary first")
    parser.add_argument("--headline", help="a scaling JSON at the base vocabulary to project at --vocabulary")
    parser.add_argument("--vocabulary", type=float, default=None, help="rows of the projected corpus's vocabulary")
    parser.add_argument("--json", action="store_true")
    # the projection's options, as scaling.py's
    projecting = scaling.parse_args(["--reproject", "-"])
    for key in ("threads", "cores", "links", "extrapolate", "gil_share",
                "shard_gil_share", "job_python_us", "rtt_ms", "round_trips", "model_sync", "machine_cores",
                "transport_ns_per_byte", "project_shards", "lag_limit"):
        parser.set_defaults(**{key: getattr(projecting, key)})
    parser.set_defaults(shards_per_node=None)  # (set by --shards-from, from what it measured)
    parser.add_argument("--project-k", dest="project_k", default="8,16,32")
    parser.add_argument("--mergers", type=int, default=1, help="merger threads per worker in the projection")
    parser.add_argument("--fold-threads", type=int, default=1,
                        help="parts a shard folds at once in the projection (at most the workers' pieces)")
    parser.add_argument("--project-corpus-words", dest="project_corpus_words", type=float, default=1e9)
    parser.add_argument("--overlap-from", metavar="JSON",
                        help="a scaling JSON whose run gives the share of the routine merge CPU that takes a round "
                             "and the rounds in flight or pieces it went in (default: the run of --runs nearest "
                             "--vocabulary): a run of a newer package at that vocabulary, the fit left as it is")
    parser.add_argument("--shards-from", metavar="JSON,JSON",
                        help="two scaling JSONs at one K and vocabulary, one shard per worker and then m: each cost of "
                             "SHARD_KEYS times its ratio between them, projected with m shards per node")
    parser.add_argument("--intervals-from", metavar="JSON,JSON[,...]",
                        help="scaling JSONs at one K and vocabulary, the headline's interval first, then others: each "
                             "projected K at the interval the package's rule gives it for --project-corpus-words "
                             "((8 / K) ** 2 of K=8's beyond eight workers), its routine rounds' costs as measured there")
    return parser.parse_args(argv)


def load(path, vocabulary=True):
    """A scaling JSON, with gensim's CPU per word (and, with ``vocabulary``, its corpus's vocabulary)."""
    with open(path, encoding="utf-8") as fin:
        data = json.load(fin)
    if not data.get("gensim_us") or (vocabulary and not data.get("corpus")):
        sys.exit(f"{path}: no gensim_us{' or corpus vocabulary' if vocabulary else ''}: measured before "
                 "scaling.py recorded them")
    return data


def ratio(points, key, vocabulary, base):
    """``c(vocabulary) / c(base)`` for ``key``: a power of the vocabulary through the measured points nearest
    it (``points``: ``[(vocabulary, costs)]`` sorted), a falling cost held beyond the largest."""
    def at(v):
        vs = [p[0] for p in points]
        if v in vs:
            return points[vs.index(v)][1][key]
        lo = max([p for p in points if p[0] < v] or points[:1], key=lambda p: p[0])
        hi = min([p for p in points if p[0] > v] or points[-1:], key=lambda p: p[0])
        if lo is hi:  # beyond the measured: through the two largest (or smallest)
            lo, hi = (points[-2], points[-1]) if v > points[-1][0] else (points[0], points[1])
        c0, c1 = lo[1][key], hi[1][key]
        if c0 <= 0 or c1 <= 0:
            return max(c0, c1)
        b = math.log(c1 / c0) / math.log(hi[0] / lo[0])
        if v > points[-1][0] and b < 0:
            return c1
        return c0 * (v / lo[0]) ** b
    base_cost = at(base)
    return at(vocabulary) / base_cost if base_cost > 0 else 1.0


def scaled(run, factors):
    """``run`` with each vocabulary-dependent cost times its factor, and the totals rebuilt from their
    parts: a worker's merges from its routine rounds and its flushes, the shards' CPU from what they
    spend per interval and their flushes' and session's calls, the bytes from the routine and the
    flushes' (each part scaled by its own fit; scaling a total by its own while a part of it, which
    :func:`gensim_distw2v.projection.at_corpus` later takes out, grows faster could leave it negative)."""
    out = dict(run, **{key: run[key] * factors[key] for key in factors if key in run})
    if {"worker_flush_us", "worker_routine_us"} <= factors.keys() and "worker_flush_us" in run:
        out["worker_merge_us"] = (run["worker_merge_us"] - run["worker_flush_us"]) * factors["worker_routine_us"] \
            + out["worker_flush_us"]
    calls = ("shard_routine_call_us", "shard_flush_call_us", "shard_setup_call_us")
    if set(calls) <= factors.keys() and all(key in run for key in calls):
        fixed = run["shard_flush_call_us"] + run["shard_setup_call_us"]
        out["shard_us"] = max(0.0, run["shard_us"] - fixed) * factors["shard_routine_call_us"] \
            + out["shard_flush_call_us"] + out["shard_setup_call_us"]
    if "flush_bytes_per_word" in factors and "flush_bytes_per_word" in run:
        for way in ("bytes_up_per_word", "bytes_down_per_word"):
            if way in factors:
                flush = run["flush_bytes_per_word"] / 2
                out[way] = max(0.0, run[way] - flush) * factors[way] + out["flush_bytes_per_word"] / 2
    return out


def regil(run):
    """``run`` with its GIL-held shares of the routine rounds (``worker_gil_share``, ``shard_gil_share``)
    as its scaled costs give them: the compiled (GIL-free) part grows with the rows a round scans and
    moves, the Python around it much less (at 44 k rows about half a worker's merge CPU held the GIL,
    at 1.07 M a quarter), so a share carried from the base vocabulary would overstate it."""
    for role, total in (("worker", "worker_routine_us"), ("shard", "shard_routine_call_us")):
        nogil = run.get(f"{role}_routine_nogil_us")
        if nogil is not None and run.get(total):
            run[f"{role}_gil_share"] = min(1.0, max(0.0, 1.0 - nogil / run[total]))
    return run


def reshard_factors(paths):
    """``(factors, m)`` from ``--shards-from``: each of :data:`SHARD_KEYS`' ratio between a run of P = m K
    shards and one of P = K at the same K, vocabulary and interval (means of their seeds), and m."""
    measured = []
    for path in paths.split(","):
        with open(path, encoding="utf-8") as fin:
            measured.append(json.load(fin)["runs"][0])
    if len(measured) != 2:
        sys.exit(f"--shards-from: want two JSONs, got {len(measured)}")
    one, more = measured
    if int(one["K"]) != int(more["K"]) or int(one["shards"]) != int(one["K"]) or int(more["shards"]) % int(more["K"]):
        sys.exit(f"--shards-from: want P = K then P = m K at one K, got K={one['K']} P={one['shards']} and "
                 f"K={more['K']} P={more['shards']}")
    factors = {key: more[key] / one[key] for key in SHARD_KEYS if one.get(key) and key in more}
    return factors, int(more["shards"]) // int(more["K"])


def _routine_bytes(run):
    return dict(run, **{f"routine_bytes_{way}": max(0.0, run[f"bytes_{way}_per_word"] - run["flush_bytes_per_word"] / 2)
                        for way in ("up", "down")})


def at_intervals(paths, corpus_words, sg):
    """``at_interval(k, runs, interval=None)`` for :func:`scaling.print_projection` from ``--intervals-from``: the
    runs' routine costs (:data:`INTERVAL_KEYS`) times their measured ratio at the interval K nodes merge at
    (``interval``, or :func:`gensim_distw2v.core.schedule.default_sync_words` for the corpus; a power of the
    interval through the nearest measured, a cost that falls beyond the longest held) over the first JSON's (the
    headline's) interval; the totals rebuilt from their parts, the rounds a word one over the interval."""
    from gensim_distw2v.core.schedule import default_sync_words

    points = []
    for path in paths.split(","):
        with open(path, encoding="utf-8") as fin:
            data = json.load(fin)
        run = _routine_bytes(data["runs"][0])
        points.append((float(data["args"]["sync_words"]), run))
    if len({(int(r["K"]), int(r["shards"])) for _, r in points}) != 1 or len(points) < 2:
        sys.exit("--intervals-from: want two or more runs of one K and shard count at different intervals")
    base = points[0][0]
    points.sort(key=lambda p: p[0])

    def adjust(k, runs, interval=None):
        interval = float(interval or default_sync_words(k, corpus_words, sg=bool(sg)))
        if interval == base:
            return runs, ""
        factors = {key: ratio(points, key, interval, base) for key in INTERVAL_KEYS if all(key in r for _, r in points)}
        out = []
        for run in runs:
            run = _routine_bytes(run)
            new = dict(run, **{key: run[key] * f for key, f in factors.items() if key in run}, rounds_per_word=1 / interval)
            new["worker_merge_us"] = run["worker_merge_us"] + new["worker_routine_us"] - run["worker_routine_us"]
            new["shard_us"] = run["shard_us"] + new["shard_routine_call_us"] - run["shard_routine_call_us"]
            for way in ("up", "down"):
                new[f"bytes_{way}_per_word"] = new[f"routine_bytes_{way}"] + run["flush_bytes_per_word"] / 2
            out.append(regil(new))
        return out, (f", at {interval:,.0f} words a round: routine costs x{factors['worker_routine_us']:.2f} (workers), "
                     f"x{factors['shard_routine_call_us']:.2f} (shards)")
    return adjust


def pieced(run, nearest):
    """``run`` with the pieces a round goes in (``round_pieces``), its rounds in flight
    (``rounds_in_flight``) and the share of its routine merge CPU that takes them (``worker_take_us``), as
    ``nearest`` (the measured run of the vocabulary nearest the projected one, or ``--overlap-from``'s)
    measured them: a run from before pieces in flight (the headline's) has none, and its round would be
    counted serial (:func:`gensim_distw2v.projection.pipelined`, :func:`~gensim_distw2v.projection.in_flight`)."""
    if nearest.get("worker_take_us") and nearest.get("worker_routine_us") and "worker_routine_us" in run:
        share = min(1.0, nearest["worker_take_us"] / nearest["worker_routine_us"])
        run = dict(run, worker_take_us=share * run["worker_routine_us"], round_pieces=nearest.get("round_pieces", 1),
                   rounds_in_flight=nearest.get("rounds_in_flight", 1))
    return run


def main(argv=None):
    args = parse_args(argv)
    measured = [load(path) for path in args.runs.split(",")]
    points = []
    names = "".join(f"{key[:-3] if key.endswith('_us') else key[:8]:>15}" for key in SHOWN)
    print(f"{'vocabulary':>11}{'K':>3}{'T':>3}{names}  gensim cf us (1 thread)")
    for data in measured:
        run = data["runs"][0]
        points.append((data["corpus"]["vocabulary"], dict(run, gensim_cf_us=data["gensim_us"]["gensim_cf:1"])))
        print(f"{data['corpus']['vocabulary']:>11,}{run['K']:>3}{run['threads']:>3}"
              + "".join(f"{run[key]:>15.3f}" for key in SHOWN) + f"  {data['gensim_us']['gensim_cf:1']:.3f}")
    base = points[0][0]
    points.sort(key=lambda p: p[0])
    kept = SHOWN + ("gensim_cf_us",)
    out = {"provenance": provenance(), "args": vars(args),
           "points": [{"vocabulary": v, **{key: c[key] for key in kept}} for v, c in points]}
    if args.headline and args.vocabulary:
        head = load(args.headline, vocabulary=False)  # (at the base vocabulary: the caller's word)
        factors = {key: ratio(points, key, args.vocabulary, base) for key in VOCAB_KEYS
                   if all(key in c for _, c in points)}
        gensim_factor = ratio(points, "gensim_cf_us", args.vocabulary, base)
        print(f"\nat {args.vocabulary:,.0f} rows against {base:,} (the headline's): "
              + ", ".join(f"{key} x{value:.2f}" for key, value in factors.items())
              + f"; gensim's CPU x{gensim_factor:.2f}")
        nearest = min(points, key=lambda p: abs(math.log(p[0] / args.vocabulary)))[1] if not args.overlap_from \
            else load(args.overlap_from, vocabulary=False)["runs"][0]
        runs = [scaled(r, factors) for r in head["runs"]]
        if args.shards_from:  # m shards a node: their costs as measured against one, the same K and rows
            shard_factors, args.shards_per_node = reshard_factors(args.shards_from)
            print(f"{args.shards_per_node} shards a node against one: "
                  + ", ".join(f"{key} x{value:.2f}" for key, value in shard_factors.items()))
            runs = [dict(r, **{key: r[key] * value for key, value in shard_factors.items() if key in r}) for r in runs]
            out["shard_factors"] = shard_factors
        runs = [pieced(regil(r), nearest) for r in runs]
        at_interval = None
        if args.intervals_from:
            at_interval = at_intervals(args.intervals_from, args.project_corpus_words, head["runs"][0].get("sg", 0))
        gensim_us = {key: value * gensim_factor for key, value in head["gensim_us"].items()}
        same_threads = [run for run in runs if run["threads"] == runs[-1]["threads"]]
        out.update(factors=factors, gensim_factor=gensim_factor, headline=args.headline,
                   projection=scaling.print_projection(same_threads, gensim_us, args, at_interval) or [])
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
