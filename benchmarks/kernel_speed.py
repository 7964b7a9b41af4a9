"""Kernel speed against gensim, side by side in one run.

Trains the same corpus with the same hyper-parameters three ways, T threads each, and prints
words/s, the ratios and peak RSS (medians over --repeats runs, the modes interleaved so that
machine noise hits them alike):

* ``kernel``: gensim_distw2v's job kernel, T threads in one process pulling pre-encoded jobs
  (gensim's own job cuts and learning rates). The timing covers training only: turning tokens
  into vocabulary indices happens before the clock starts (on a cluster the client does it) and
  is reported apart as ``encode``.
* ``gensim``: ``gensim.models.Word2Vec.train(sentences, workers=T)`` over sentences held in
  memory (no disk reads in the timing); includes gensim's per-token Python lookups, as gensim
  users pay them.
* ``gensim_corpus_file``: ``train(corpus_file=PATH, workers=T)``: includes reading and
  tokenizing the file, in gensim's C++ reader, without the GIL.

Every measurement runs in a fresh subprocess, so the peak RSS is that mode's own; the vocabulary
is built once and shared. Words/s are raw corpus words per second of ``train()`` wall time.

    python benchmarks/kernel_speed.py --corpus /tmp/devmix.txt --sg 1 --threads 1 --json
"""
import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from provenance import provenance  # a sibling module (the script's folder is on sys.path)

MODES = ("kernel", "gensim", "gensim_corpus_file")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line, tokens separated by spaces")
    parser.add_argument("--sg", type=int, default=1, choices=(0, 1))
    parser.add_argument("--hs", type=int, default=0, choices=(0, 1))
    parser.add_argument("--negative", type=int, default=None, help="default: 5, or 0 with --hs 1")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--vector-size", type=int, default=100)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--max-words", type=int, default=3_000_000,
                        help="use the first lines of the corpus up to this many words (0: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--_one", nargs=3, metavar=("MODE", "MODEL", "CORPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.negative is None:
        args.negative = 0 if args.hs else 5
    return args


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(args, mode, model_path, corpus_path):
    """One measurement in this (fresh) process; prints a JSON line."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    model = gensim.models.Word2Vec.load(model_path)
    model.workers = args.threads
    total_words = model.corpus_total_words
    result = {"mode": mode}
    if mode == "kernel":
        from gensim_distw2v.core.jobs import iter_epoch_jobs
        from gensim_distw2v.core.kernel import train_jobs, trainer_for_model

        sentences = LineSentence(corpus_path)
        start = time.perf_counter()
        jobs = [(job.indices, job.offsets, job.alpha)
                for epoch in range(args.epochs)
                for job in iter_epoch_jobs(sentences, model.wv.key_to_index, batch_words=model.batch_words,
                                           cur_epoch=epoch, epochs=args.epochs, start_alpha=model.alpha,
                                           end_alpha=model.min_alpha, total_examples=model.corpus_count)]
        result["encode_seconds"] = time.perf_counter() - start
        trainer = trainer_for_model(model)
        rngs = [np.random.RandomState(model.seed + t) for t in range(args.threads)]
        start = time.perf_counter()
        effective, _ = train_jobs(trainer, jobs, threads=args.threads, rngs=rngs)
        seconds = time.perf_counter() - start
    elif mode == "gensim":
        sentences = list(LineSentence(corpus_path))
        start = time.perf_counter()
        effective, _ = model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs)
        seconds = time.perf_counter() - start
    else:
        start = time.perf_counter()
        effective, _ = model.train(corpus_file=corpus_path, total_words=total_words, epochs=args.epochs)
        seconds = time.perf_counter() - start
    result.update(seconds=seconds, raw_wps=total_words * args.epochs / seconds, effective_wps=effective / seconds,
                  effective_words=effective, peak_rss_mb=peak_rss_mb())
    print(json.dumps(result))


def prepare(args, workdir):
    """Cut the corpus to --max-words and build the vocabulary once; return (model path, corpus path, words)."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    corpus_path = os.path.join(workdir, "corpus.txt")
    words = 0
    with open(args.corpus, encoding="utf8") as fin, open(corpus_path, "w", encoding="utf8") as fout:
        for line in fin:
            if args.max_words and words >= args.max_words:
                break
            words += len(line.split())
            fout.write(line)
    model = gensim.models.Word2Vec(
        vector_size=args.vector_size, window=args.window, min_count=args.min_count, sg=args.sg, hs=args.hs,
        negative=args.negative, workers=args.threads, seed=1)
    model.build_vocab(LineSentence(corpus_path))
    model_path = os.path.join(workdir, "vocab.model")
    model.save(model_path)
    return model_path, corpus_path, words, len(model.wv)


def main(argv=None):
    args = parse_args(argv)
    if args._one:
        return run_one(args, *args._one)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=logging.WARNING)
    passthrough = [f"--sg={args.sg}", f"--hs={args.hs}", f"--negative={args.negative}", f"--epochs={args.epochs}",
                   f"--threads={args.threads}", f"--corpus={args.corpus}"]
    runs = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="kernel_speed_") as workdir:
        model_path, corpus_path, words, vocab = prepare(args, workdir)
        print(f"corpus: {words} words ({args.corpus}, first {args.max_words or 'all'}), vocabulary {vocab}; "
              f"sg={args.sg} hs={args.hs} negative={args.negative} vector_size={args.vector_size} "
              f"window={args.window} epochs={args.epochs} threads={args.threads}; {args.repeats} repeats",
              flush=True)
        for repeat in range(args.repeats):
            for mode in MODES:
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), *passthrough, "--_one", mode, model_path, corpus_path],
                    capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    sys.exit(f"{mode} run failed:\n{out.stderr}")
                result = json.loads(out.stdout.strip().splitlines()[-1])
                runs[mode].append(result)
                print(f"  repeat {repeat + 1}: {mode:<19} {result['raw_wps']:>10.0f} raw words/s "
                      f"({result['seconds']:.2f} s)", flush=True)

    med = {mode: {key: statistics.median(r[key] for r in runs[mode])
                  for key in ("raw_wps", "effective_wps", "seconds", "peak_rss_mb")} for mode in MODES}
    encode = statistics.median(r["encode_seconds"] for r in runs["kernel"])
    ratio = med["kernel"]["raw_wps"] / med["gensim"]["raw_wps"]
    ratio_cf = med["kernel"]["raw_wps"] / med["gensim_corpus_file"]["raw_wps"]
    print(f"\nmedians of {args.repeats} runs, {args.threads} thread(s):")
    print(f"{'mode':<20}{'raw words/s':>14}{'effective/s':>14}{'train s':>10}{'peak RSS MB':>13}")
    for mode in MODES:
        m = med[mode]
        print(f"{mode:<20}{m['raw_wps']:>14.0f}{m['effective_wps']:>14.0f}{m['seconds']:>10.2f}"
              f"{m['peak_rss_mb']:>13.0f}")
    print(f"kernel / gensim: {ratio:.2f}x   kernel / gensim corpus_file: {ratio_cf:.2f}x")
    print("kernel timing: training only, jobs pre-encoded (encoding them took "
          f"{encode:.2f} s, {words * args.epochs / encode:.0f} words/s, not included); gensim: train() over "
          "in-memory token lists, incl. its per-token lookups; corpus_file: train() incl. reading the file")
    if args.json:
        print(json.dumps({
            "provenance": provenance(),
            "threads": args.threads, "sg": args.sg, "hs": args.hs, "words": words, "epochs": args.epochs,
            "kernel_wps": med["kernel"]["raw_wps"], "gensim_wps": med["gensim"]["raw_wps"],
            "gensim_corpus_file_wps": med["gensim_corpus_file"]["raw_wps"], "ratio": ratio,
            "ratio_corpus_file": ratio_cf, "kernel_encode_seconds": encode,
            "peak_rss_mb": {mode: med[mode]["peak_rss_mb"] for mode in MODES},
            "runs": runs,
        }))


if __name__ == "__main__":
    main()
