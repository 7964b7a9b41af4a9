"""The quality matrix: the cluster against gensim on the same file in the same mode, from
``compare_gensim.py --json`` records.

For every record given, each distributed mode's means (``dist``: an iterable; ``dist_cf``: a corpus
file) against gensim's in the same mode and at the same K (``gensim``, ``gensim_cf``): the
differences in analogy points, ws353 and SimLex Spearman, and whether the cluster is within the
tolerances of gensim (no more than 1.5 points or 0.02 below it; above it is no miss), beside
gensim's own spread (its runs of the same mode at the record's other Ks: how far gensim moves from
itself on that file). Later
records replace earlier ones of the same file, model, K, mode and learning-rate schedule, so give
them oldest first; a later record of other seeds (``compare_gensim.py ... --first-seed 3``, the same
package) adds to the earlier one instead: the case's differences are then the means over all its
seeds, weighted by their number::

    python benchmarks/quality_matrix.py docs/measurements/a.json docs/measurements/b.json --json
"""
import argparse
import json
import os
import sys

POINTS, SPEARMAN = 1.5, 0.02  # the tolerances: analogy points, Spearman


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", help="compare_gensim.py --json records, oldest first")
    parser.add_argument("--json", action="store_true", help="end with one JSON object of the rows")
    return parser.parse_args(argv)


def rows_of(path):
    """The matrix's rows of one record."""
    with open(path) as fin:
        record = json.load(fin)
    args = record["args"]
    corpus = os.path.basename(args["corpus"])
    if args.get("max_words"):
        corpus += f" (first {args['max_words'] / 1e6:g} M words)"
    by = {(row["mode"], row["k"]): row for row in record["table"]}
    # gensim against itself: its runs of the same mode at other Ks in the record (threads, not seeds, differ)
    spread = {}
    for (mode, _k), row in by.items():
        if mode.startswith("gensim"):
            for metric in ("ws353", "simlex"):
                values = [r[metric] for (m, _), r in by.items() if m == mode]
                spread[mode, metric] = max(values) - min(values) if len(values) > 1 else None
    out = []
    for (mode, k), row in sorted(by.items()):
        theirs = by.get(("gensim" + mode[4:], k)) if mode.startswith("dist") else None
        if theirs is None:
            continue
        delta = {"analogy_points": 100 * (row["analogy"] - theirs["analogy"]),
                 "ws353": row["ws353"] - theirs["ws353"], "simlex": row["simlex"] - theirs["simlex"]}
        rate = (args.get("corpus_file_rate") or "linear") if mode == "dist_cf" else "linear"
        out.append({"corpus": corpus, "model": "skip-gram" if args["sg"] else "CBOW", "k": k,
                    "mode": "corpus_file" if mode == "dist_cf" else "iterable", "rate": rate,
                    "seeds": args.get("seeds", 1), "first_seed": args.get("first_seed", 1), **delta,
                    "gensim_ws353_spread": spread.get(("gensim" + mode[4:], "ws353")),
                    "gensim_simlex_spread": spread.get(("gensim" + mode[4:], "simlex")),
                    "within": within(delta),
                    "source": os.path.basename(path)})
    return out


def within(row):
    """Whether a row's differences are within the tolerances (above gensim is no miss)."""
    return row["analogy_points"] >= -POINTS and row["ws353"] >= -SPEARMAN and row["simlex"] >= -SPEARMAN


def pooled(earlier, later):
    """``later`` added to ``earlier`` if its seeds are others (means weighted by seeds), else ``later``."""
    def seeds(row):
        first = row.get("first_seed", 1)
        return set(range(first, first + row["seeds"]))
    if earlier is None or seeds(earlier) & seeds(later):
        return later
    n, m = earlier["seeds"], later["seeds"]
    row = dict(later, seeds=n + m, first_seed=min(earlier.get("first_seed", 1), later.get("first_seed", 1)),
               source=f"{earlier['source']} + {later['source']}")
    for key in ("analogy_points", "ws353", "simlex"):
        row[key] = (n * earlier[key] + m * later[key]) / (n + m)
    for key in ("gensim_ws353_spread", "gensim_simlex_spread"):  # the larger of the two runs' spreads
        row[key] = max((r[key] for r in (earlier, later) if r[key] is not None), default=None)
    row["within"] = within(row)
    return row


def _fmt(value):
    return "  -   " if value is None else f"{value:.4f}"


def main(argv=None):
    args = parse_args(argv)
    latest = {}
    for path in args.records:
        for row in rows_of(path):
            key = (row["corpus"], row["model"], row["k"], row["mode"], row["rate"])
            latest[key] = pooled(latest.get(key), row)
    rows = sorted(latest.values(), key=lambda r: (r["corpus"], r["model"], r["k"], r["mode"], r["rate"]))
    for row in rows:
        print(f"{row['corpus'][:40]:40s} {row['model']:9s} K={row['k']:<2d} {row['mode']:11s} {row['rate']:6s} "
              f"{row['seeds']} seeds "
              f"{row['analogy_points']:+6.2f} {row['ws353']:+.4f} {row['simlex']:+.4f} "
              f"{'within' if row['within'] else 'MISS':6s} gensim's spread {_fmt(row['gensim_ws353_spread'])} "
              f"{_fmt(row['gensim_simlex_spread'])}  {row['source']}")
    print(f"{sum(r['within'] for r in rows)} of {len(rows)} within {POINTS} points and {SPEARMAN} Spearman")
    if args.json:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from provenance import provenance
        print(json.dumps({"provenance": provenance(), "rows": rows,
                          "within": sum(r["within"] for r in rows), "cases": len(rows)}))


if __name__ == "__main__":
    main()
