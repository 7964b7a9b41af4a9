"""Quality against plain gensim as a function of corpus size, merge interval and K: the law behind the
default interval, measured on synthetic corpora with a known answer.

For each corpus size of ``--sizes`` it writes a synthetic corpus (``synth_corpus.py``: Zipf's and
Heaps' laws, topical co-occurrence, a truth list of word pairs), then for each model of ``--models``
and each seed runs the simulator (``clustersim.py``: K replicas with the cluster's own kernel and merge
code, plain gensim ``workers=1`` beside them in the same process) at every K of ``--workers``, at the
package's default interval (``default_sync_words``) and at each multiple of it in ``--scales``.
Prints, per (model, K, size, interval): the words a worker trains between merges, the merges a worker
makes in an epoch, and the truth list's Spearman against gensim's (mean over seeds); then which of the
two candidate laws fits: the loss as a function of the words per merge, or of the merges per epoch
(the current rule holds the merges per epoch constant, at 5,400 / (8 / K)^x); ``--json`` prints one
JSON object last.

    python benchmarks/quality_law.py --sizes 4e6,12e6,40e6,120e6 --workers 8,16 --models cbow --epochs 1
    python benchmarks/quality_law.py --sizes 4e6,12e6 --workers 2,4,8,16 --models cbow,sg,sg-hs --seeds 2
    python benchmarks/quality_law.py --generator discourse --sizes 12e6,40e6,120e6 --workers 8,16 --epochs 1
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

GENERATORS = {"topics": "synth_corpus.py", "discourse": "discourse_corpus.py"}
MODELS = {"cbow": ["--sg", "0"], "sg": ["--sg", "1"], "sg-hs": ["--sg", "1", "--hs", "1"]}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4e6,12e6", help="corpus sizes in tokens, comma-separated")
    parser.add_argument("--workers", default="8,16", help="K values")
    parser.add_argument("--models", default="cbow", help=f"of {','.join(MODELS)}")
    parser.add_argument("--scales", default="1", help="intervals as multiples of the default one (e.g. 0.25,1,4)")
    parser.add_argument("--intervals", default="",
                        help="also fixed intervals, in words a merge, the same at every corpus size (e.g. 2222,7407): "
                             "the law's other candidate, words per merge, measured directly")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--vector-size", type=int, default=100)
    parser.add_argument("--corpus-dir", default=None,
                        help="where the corpora are written (default: a temporary folder); one already there is reused")
    parser.add_argument("--generator", default="topics", choices=GENERATORS,
                        help="the synthetic corpus: synth_corpus.py's topics (a coarse answer: the truth list) or "
                             "discourse_corpus.py's drifting discourse (an answer at the words' grain: analogies)")
    parser.add_argument("--corpus", default=None,
                        help="a real corpus instead (one size, its own; the law's score is the analogies', ws353 and "
                             "simlex kept beside it)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"--models: {name!r} is not one of {', '.join(MODELS)}")
    return args


def corpus_for(size, directory, generator="topics"):
    """The synthetic corpus of ``size`` tokens in ``directory`` (written once, by ``generator``'s script);
    ``(path, pairs path)``. A corpus already there is reused whichever wrote it: its ``.json`` says which."""
    path = os.path.join(directory, f"synth-{size:.0f}.txt")
    pairs = os.path.join(directory, f"synth-{size:.0f}.pairs.tsv")
    if not (os.path.exists(path) and os.path.exists(pairs)):
        subprocess.run([sys.executable, os.path.join(HERE, GENERATORS[generator]), "--words", str(size), "--out",
                        path], check=True)
    meta = os.path.splitext(path)[0] + ".json"
    if os.path.exists(meta):  # a corpus already there: written by the generator asked for?
        with open(meta, encoding="utf-8") as fin:
            wrote = json.load(fin).get("generator", "topics")
        if wrote != generator:
            sys.exit(f"{path} was written by the {wrote} generator, not {generator}: use another --corpus-dir")
    return path, pairs


def corpus_words(path):
    """Tokens of a corpus file (a real one's size, for its intervals)."""
    with open(path, "rb") as fin:
        return sum(len(line.split()) for line in fin)


def default_interval(k, words, sg):
    from gensim_distw2v.core.schedule import default_sync_words

    return default_sync_words(k, words, sg=sg)


def simulate(args, path, pairs, model, ks, seed, sync_words=None, words=0, baseline=None):
    """One clustersim run (every K of ``ks`` at one interval rule); its JSON (plain gensim's scores trained
    too, unless ``baseline`` has them already)."""
    cmd = [sys.executable, os.path.join(HERE, "clustersim.py"), "--corpus", path, "--workers", ",".join(map(str, ks)),
           *MODELS[model], "--epochs", str(args.epochs), "--seed", str(seed), "--vector-size", str(args.vector_size),
           "--json"]
    if pairs:
        cmd += ["--pairs", pairs]
    if words > 30e6:
        cmd += ["--stream"]
    if sync_words:
        cmd += ["--sync-words", str(sync_words)]
    if baseline:
        cmd += ["--no-baseline"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"clustersim failed ({model}, seed {seed}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fit(points, x_key):
    """Least squares of the loss against log10(x): slope, intercept, R^2 (of points with a loss)."""
    xs = [math.log10(p[x_key]) for p in points]
    ys = [p["loss"] for p in points]
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-12
    return {"slope": slope, "intercept": intercept, "r2": 1 - ss_res / ss_tot}


def main(argv=None):
    args = parse_args(argv)
    ks = [int(k) for k in args.workers.split(",")]
    scales = [float(s) for s in args.scales.split(",")]
    fixed = [int(float(w)) for w in args.intervals.split(",") if w]
    sizes = [float(s) for s in args.sizes.split(",")] if not args.corpus else [float(corpus_words(args.corpus))]
    points = []
    with tempfile.TemporaryDirectory(prefix="quality_law_") as tmp:
        directory = args.corpus_dir or tmp
        os.makedirs(directory, exist_ok=True)
        for size in sizes:
            path, pairs = (args.corpus, None) if args.corpus else corpus_for(size, directory, args.generator)
            # the law's score (the others are kept too): a real corpus's analogies, a synthetic one's (its finer
            # answer) where it has them, else its pairs' similarity
            metric = "analogy" if args.corpus else "truth_analogy" if os.path.exists(
                os.path.splitext(path)[0] + ".analogies.txt") else "truth"
            for model in args.models.split(","):
                baseline = {}  # gensim workers=1 of each seed: deterministic, trained once
                for scale in scales + [("words", w) for w in fixed]:
                    runs = {}
                    for seed in range(1, args.seeds + 1):
                        if scale == 1:
                            out = simulate(args, path, pairs, model, ks, seed, words=size,
                                           baseline=baseline.get(seed))
                            baseline.setdefault(seed, out.get("gensim"))
                            for run in out["runs"]:
                                runs.setdefault(run["K"], []).append((run, baseline[seed]))
                        else:  # an interval rule of its own at each K: one run a K
                            for k in ks:
                                words = size
                                sync = scale[1] if isinstance(scale, tuple) else \
                                    max(100, int(round(scale * default_interval(k, words, model != "cbow"))))
                                out = simulate(args, path, pairs, model, [k], seed, sync, words=size,
                                               baseline=baseline.get(seed))
                                baseline.setdefault(seed, out.get("gensim"))
                                runs.setdefault(k, []).append((out["runs"][0], baseline[seed]))
                    for k, each in sorted(runs.items()):
                        run0 = each[0][0]
                        epoch_words = run0.get("corpus_words") or size
                        rule = default_interval(k, size, model != "cbow")
                        point = {"model": model, "K": k, "size": size, "seeds": len(each),
                                 "scale": run0["sync_words"] / rule if isinstance(scale, tuple) else scale,
                                 "sync_words": run0["sync_words"], "epochs": args.epochs,
                                 "merges_per_epoch": (epoch_words / k) / run0["sync_words"] if epoch_words else None,
                                 "gensim": statistics.fmean(g[metric] for _, g in each),
                                 "cluster": statistics.fmean(r[metric] for r, _ in each),
                                 "loss": statistics.fmean(g[metric] - r[metric] for r, g in each),
                                 "metric": metric,
                                 "losses": {key: statistics.fmean(g[key] - r[key] for r, g in each)
                                            for key in ("analogy", "ws353", "simlex", "truth", "truth_analogy")
                                            if key in run0}}
                        points.append(point)
                        print(f"{model:6} K={k:<3} {size / 1e6:7.1f} M words x{point['scale']:<5.3g} interval "
                              f"{point['sync_words']:>8,} words ({point['merges_per_epoch'] or 0:8.0f} merges a worker "
                              f"an epoch): {metric} gensim {point['gensim']:.4f} cluster {point['cluster']:.4f} "
                              f"loss {point['loss']:+.4f}", flush=True)
    laws = {}
    for model in args.models.split(","):
        for k in ks:
            mine = [p for p in points if p["model"] == model and p["K"] == k and p["merges_per_epoch"]]
            laws[f"{model}:K={k}"] = {"words_per_merge": fit(mine, "sync_words"),
                                      "merges_per_epoch": fit(mine, "merges_per_epoch")}
            law = laws[f"{model}:K={k}"]
            if law["words_per_merge"] and law["merges_per_epoch"]:
                print(f"{model} K={k}: loss = {law['words_per_merge']['intercept']:+.4f} "
                      f"{law['words_per_merge']['slope']:+.4f} log10(words per merge), R^2 "
                      f"{law['words_per_merge']['r2']:.2f}; = {law['merges_per_epoch']['intercept']:+.4f} "
                      f"{law['merges_per_epoch']['slope']:+.4f} log10(merges per epoch), R^2 "
                      f"{law['merges_per_epoch']['r2']:.2f}")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "points": points, "laws": laws}))


if __name__ == "__main__":
    main()
