"""The runs of several ``scaling.py`` JSONs of one configuration, averaged key by key, as one JSON.

Seeds of two configurations run in turn (A B B A: ``scaling.py ... --seeds 1 --first-seed N``) keep the
machine's drift out of their comparison; this puts each configuration's seeds back together, as
``scaling.py --seeds N`` would have (means of every number, by K; the sources' commands kept)::

    python benchmarks/mean_runs.py p4-seed1.json p4-seed2.json > p4.json
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module

#: what must agree between the runs averaged
SAME = ("K", "threads", "shards", "corpus_file", "sg")


def mean_of(runs, missing=None):
    """One run: every number's mean (nested dicts of numbers likewise: a thread group one run lacks counts
    as 0 there), the rest as the first has it; a top-level number averaged over the runs that have it."""
    out = {}
    keys = list(dict.fromkeys(key for run in runs for key in run))
    for key in keys:
        values = [run.get(key, missing) for run in runs]
        present = [v for v in values if v is not None]
        value = present[0]
        if isinstance(value, bool) or key in SAME:
            out[key] = value
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            out[key] = statistics.fmean(present)
        elif all(isinstance(v, dict) for v in present):
            out[key] = mean_of([v if isinstance(v, dict) else {} for v in values], missing=0.0)
        else:
            out[key] = value
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+", help="scaling.py JSONs of one configuration")
    args = parser.parse_args(argv)
    sources = []
    for path in args.json:
        with open(path, encoding="utf-8") as fin:
            sources.append(json.loads(fin.read().strip().splitlines()[-1]))
    by_k = {}
    for data in sources:
        for run in data["runs"]:
            by_k.setdefault(int(run["K"]), []).append(run)
    for k, runs in by_k.items():
        differ = [key for key in SAME if len({json.dumps(run.get(key)) for run in runs}) > 1]
        if differ or len(runs) != len(sources):
            sys.exit(f"K={k}: the runs differ in {', '.join(differ) or 'count'}: not one configuration")
    out = dict(sources[0], provenance=provenance(), sources=[data["provenance"] for data in sources],
               runs=[mean_of(by_k[k]) for k in sorted(by_k)])
    out["args"] = dict(out["args"], seeds=len(sources))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
