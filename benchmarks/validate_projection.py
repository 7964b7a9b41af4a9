"""The projection's model tested out of sample: fitted on some clusters, it predicts others before they run.

It measures the per-word costs (``scaling.costs``) of the *fitted* clusters (``--fit``, default K=2
and K=8 workers of 2 threads, corpus_file mode), then for each case: predicts its words/s on this
machine with the model (``projection.costs_at`` for the costs at its K, ``projection.this_machine``
for its limits, every process on ``--machine-cores`` cores), prints the prediction, and only then
runs the case and measures it. The cases (``--cases``, all by default):

* ``k-between``: a K between the fitted ones (K=4 x 2);
* ``k-above``: a K above them (K=12 x 2: the costs extrapolated as a power of K);
* ``one-thread``: workers of one thread, from costs measured with two (K=4 x 1);
* ``iterable``: sentences from a list in memory, which the client encodes (K=4 x 2), from the
  corpus_file fit plus the client's encoding cost measured in process beforehand
  (``gensim_distw2v.core.jobs.iter_epoch_jobs`` over the corpus, CPU per word);
* ``vocabulary``: another corpus (``--other-corpus``: another vocabulary, not fitted; K=4 x 2).

Every run trains at the same fixed interval (``--sync-words``), so the cases differ only in what
they name. Prints predicted and measured words/s and per-role costs for each; the last line (with
``--json``) is one JSON object with ``cases: [{name, predicted_wps, measured_wps, error}]``. The
shaped-link cases (bandwidth with ``tc tbf`` between network namespaces, round trips added by a
delaying relay) are not here yet: the latency and bandwidth terms are unvalidated (docs/scaling.rst).

    python benchmarks/validate_projection.py --corpus devmix.txt --max-words 3000000 --other-corpus synth.txt --json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module
import compare_gensim  # noqa: E402 - the single-run machinery
import projection  # noqa: E402 - the model
import scaling  # noqa: E402 - the per-word costs of a run

CASES = {"k-between": (4, 2, "dist_cf", False), "k-above": (12, 2, "dist_cf", False),
         "one-thread": (4, 1, "dist_cf", False), "iterable": (4, 2, "dist", False),
         "vocabulary": (4, 2, "dist_cf", True)}
SHOWN = ("kernel_us", "worker_merge_us", "worker_other_us", "shard_us", "dispatcher_us", "client_us")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--other-corpus", help="a corpus of another vocabulary (the vocabulary case)")
    parser.add_argument("--max-words", type=int, default=3_000_000)
    parser.add_argument("--fit", default="2x2,8x2", help="the fitted clusters, KxT")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {','.join(CASES)}")
    parser.add_argument("--sync-words", type=int, default=10_000, help="every run's interval")
    parser.add_argument("--sg", type=int, default=0, choices=(0, 1))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--machine-cores", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in args.cases.split(","):
        if name not in CASES:
            parser.error(f"--cases: {name!r} is not one of {', '.join(CASES)}")
    if "vocabulary" in args.cases.split(",") and not args.other_corpus:
        parser.error("the vocabulary case needs --other-corpus")
    return args


def run(args, mode, k, threads, corpus):
    """One cluster run in a fresh process (``compare_gensim.py``'s single-run mode); its per-word costs."""
    vocab, path = corpus
    base = ["--corpus", path, "--sg", str(args.sg), "--epochs", "1", "--sync-words", str(args.sync_words),
            "--shards", str(k), "--threads-per-worker", str(threads), "--sentences", "list"]
    out = subprocess.run([sys.executable, compare_gensim.__file__, *base, "--_one", mode, str(k), str(args.seed),
                          vocab, path], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"{mode} K={k} x {threads} failed:\n{out.stderr[-4000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    return dict(scaling.costs(row, k, threads, mode == "dist_cf"), shards=k)


def encode_cost(path, vocab_path, max_words=1_000_000):
    """The client's CPU per word encoding sentences into jobs (what it does for an iterable), in process."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v.core.jobs import iter_epoch_jobs

    model = gensim.models.Word2Vec.load(vocab_path)
    sentences, words = [], 0
    for sentence in LineSentence(path):
        sentences.append(sentence)
        words += len(sentence)
        if words >= max_words:
            break
    began = time.process_time()
    for _ in iter_epoch_jobs(sentences, model.wv.key_to_index, batch_words=10_000, cur_epoch=0, epochs=1,
                             start_alpha=0.025, end_alpha=0.0001, total_words=words):
        pass
    return (time.process_time() - began) * 1e6 / words


def predict(args, fitted, k, threads, mode, client_us):
    """Words/s of K x ``threads`` in ``mode`` on this machine, from the fitted runs."""
    costs, label = projection.costs_at(fitted, k)
    costs = dict(costs, K=k, threads=threads, shards=k, corpus_file=mode == "dist_cf")
    if client_us is not None:
        costs["client_us"] = client_us
    measured_at = max(scaling.concurrent_threads(run, args.machine_cores) for run in fitted)
    at_once = scaling.concurrent_threads({"K": k, "threads": threads}, args.machine_cores)
    # a trainer thread's CPU per word as it was measured (its threads at once), at the case's threads at once
    costs["kernel_us"] *= projection.efficiency(measured_at) / projection.efficiency(at_once)
    model = projection.this_machine(costs, cores=args.machine_cores, kernel_threads=threads)
    return model, costs, label


def main(argv=None):
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="validate_") as workdir:
        corpora = {}
        for key, path in (("main", args.corpus), ("other", args.other_corpus)):
            if path:
                one = compare_gensim.parse_args(["--corpus", path, "--max-words", str(args.max_words)])
                folder = os.path.join(workdir, key)
                os.makedirs(folder)
                vocab, cut, words, size = compare_gensim.prepare(one, folder)
                corpora[key] = (vocab, cut)
                print(f"{key} corpus: {words:,} words, vocabulary {size:,}", flush=True)
        fitted = []
        for item in args.fit.split(","):
            k, t = (int(x) for x in item.split("x"))
            costs = run(args, "dist_cf", k, t, corpora["main"])
            fitted.append(costs)
            print(f"fitted K={k} x {t}: {costs['raw_wps']:,.0f} words/s; " +
                  ", ".join(f"{key} {costs[key]:.3f}" for key in SHOWN), flush=True)
        client_us = encode_cost(corpora["main"][1], corpora["main"][0])
        print(f"the client's encoding, measured in process: {client_us:.3f} us a word", flush=True)
        cases = []
        for name in args.cases.split(","):
            k, t, mode, other = CASES[name]
            model, costs, label = predict(args, fitted, k, t, mode, client_us if mode == "dist" else None)
            print(f"\n{name}: K={k} x {t} {mode}{' (other corpus)' if other else ''}: predicted "
                  f"{model['model_wps']:,.0f} words/s ({model['bottleneck']}; costs {label})", flush=True)
            measured = run(args, mode, k, t, corpora["other" if other else "main"])
            error = model["model_wps"] / measured["raw_wps"] - 1
            print(f"  measured {measured['raw_wps']:,.0f} words/s: error {error:+.1%}")
            print("  per word, predicted / measured: " + ", ".join(
                f"{key} {costs[key]:.3f} / {measured[key]:.3f}" for key in SHOWN), flush=True)
            cases.append({"name": name, "K": k, "threads": t, "mode": mode, "other_corpus": other,
                          "predicted_wps": model["model_wps"], "measured_wps": measured["raw_wps"], "error": error,
                          "bottleneck": model["bottleneck"], "costs_from": label,
                          "predicted": {key: costs[key] for key in SHOWN},
                          "measured": {key: measured[key] for key in SHOWN}})
    worst = max(abs(c["error"]) for c in cases)
    print(f"\n{len(cases)} cases, errors " + ", ".join(f"{c['name']} {c['error']:+.1%}" for c in cases)
          + f"; within 20%: {sum(abs(c['error']) <= 0.2 for c in cases)} of {len(cases)} (worst {worst:.1%}, "
          f"median {statistics.median(abs(c['error']) for c in cases):.1%})")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "fitted": fitted, "client_us": client_us,
                          "cases": cases}))


if __name__ == "__main__":
    main()
