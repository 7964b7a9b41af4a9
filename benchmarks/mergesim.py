#!/usr/bin/env python3
"""Simulate data-parallel word2vec with periodic merges, to compare merge rules on quality.

K replicas start from the same initial weights; replica i trains on lines i, i+K, ... of the
corpus.  In each round every replica trains (gensim's own train(), one thread) on its next
~S words with the learning rate of the *global* schedule, then the deltas D_i = W_i - B of
wv.vectors and syn1neg are merged into the new base B, which every replica continues from.
Replicas only interact at merges, so running them one after another simulates a cluster.

Rules: mean (B + mean D_i), rowmean (per row, over the replicas that changed it),
sum (B + sum D_i: a parameter server applying every push), hybF (mean for the F most
frequent words, sum for the rest). Add your own in merge().

    python benchmarks/mergesim.py CORPUS --K 4 --S 10000 --rule sum [--sg 1] [--epochs 3] [--seed 1]
    python benchmarks/mergesim.py CORPUS --baseline        # plain gensim, workers=1, for comparison

Prints one tab-separated line: K, S, rule, analogy, ws353, simlex, max |w| (a blow-up shows
there first); with ``--json``, a JSON record of the same and where it came from (the docs'
tables are made from those). Quality only: it says nothing about speed.
``benchmarks/merge_rules_sim.py`` adds the rules the cluster's design was chosen from.
"""
import argparse
import copy
import json
import math
import os
import sys

import numpy as np
from gensim.models import Word2Vec
from gensim.models.word2vec import LineSentence
from gensim.test.utils import datapath

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance  # noqa: E402 - a sibling module


def evaluate(wv):
    analogy = wv.evaluate_word_analogies(datapath("questions-words.txt"))[0]
    ws = wv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0]
    sl = wv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0]
    return analogy, ws, sl


def merge(rule, base, deltas):
    total = np.sum(deltas, axis=0)
    touched = np.sum([np.any(d != 0, axis=1) for d in deltas], axis=0)[:, None]
    if rule == "mean":
        return base + total / len(deltas)
    if rule == "rowmean":
        return base + total / np.maximum(touched, 1)
    if rule == "sum":
        return base + total
    if rule.startswith("hyb"):
        scale = np.ones((len(base), 1))
        top = int(rule[3:])
        scale[:top] = 1.0 / np.maximum(touched[:top], 1)
        return base + total * scale
    raise ValueError(f"unknown rule {rule}")


def chunks(lengths, rounds):
    """Cut a shard (list of sentence lengths) into `rounds` consecutive pieces of about equal words."""
    target, cuts, acc, start = sum(lengths) / rounds, [], 0, 0
    for i, n in enumerate(lengths):
        acc += n
        if acc >= target * (len(cuts) + 1) and len(cuts) < rounds - 1:
            cuts.append((start, i + 1))
            start = i + 1
    cuts.append((start, len(lengths)))
    return cuts


def setup(a, hp, corpus, per_round=1):
    """The run's pieces: the model with its vocabulary, the learning rate at a count of words done,
    the K shards of the corpus and their sentence lengths, the rounds per epoch (``per_round`` per
    S words), each shard's cut into them, and K replicas (seeded apart)."""
    model = Word2Vec(workers=1, seed=a.seed, **hp)
    model.build_vocab(corpus)
    total = model.corpus_total_words * a.epochs

    def alpha_at(done):
        return max(hp["min_alpha"], hp["alpha"] - (hp["alpha"] - hp["min_alpha"]) * done / total)

    shards = [corpus[i::a.K] for i in range(a.K)]
    lengths = [[len(s) for s in shard] for shard in shards]
    rounds = max(1, math.ceil(max(map(sum, lengths)) / a.S)) * per_round
    cuts = [chunks(lens, rounds) for lens in lengths]
    replicas = []
    for i in range(a.K):
        r = copy.deepcopy(model)
        r.random = np.random.RandomState(a.seed * 100 + i)
        replicas.append(r)
    return model, alpha_at, shards, lengths, rounds, cuts, replicas


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--S", type=int, default=100_000, help="words per replica per round")
    ap.add_argument("--rule", default="sum")
    ap.add_argument("--sg", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", action="store_true")
    ap.add_argument("--json", action="store_true", help="also print a JSON record")
    a = ap.parse_args()
    hp = dict(sg=a.sg, vector_size=100, window=5, min_count=5, negative=5, sample=1e-3, alpha=0.025,
              min_alpha=0.0001, epochs=a.epochs)
    corpus = list(LineSentence(a.corpus))
    if a.baseline:
        m = Word2Vec(corpus, workers=1, seed=a.seed, **hp)
        report(a, 1, None, "gensim", evaluate(m.wv), np.abs(m.wv.vectors).max())
        return
    model, alpha_at, shards, lengths, rounds, cuts, replicas = setup(a, hp, corpus)
    b0, b1, done = model.wv.vectors.copy(), model.syn1neg.copy(), 0
    for _ in range(a.epochs):
        for rnd in range(rounds):
            words = sum(sum(lengths[i][lo:hi]) for i, (lo, hi) in enumerate(c[rnd] for c in cuts))
            a0, a1 = alpha_at(done), alpha_at(done + words)
            d0, d1 = [], []
            for i, rep in enumerate(replicas):
                lo, hi = cuts[i][rnd]
                piece = shards[i][lo:hi]
                rep.train(piece, total_examples=len(piece), epochs=1, start_alpha=a0, end_alpha=a1)
                d0.append(rep.wv.vectors.astype(np.float64) - b0)
                d1.append(rep.syn1neg.astype(np.float64) - b1)
            b0 = merge(a.rule, b0, d0).astype(np.float32)
            b1 = merge(a.rule, b1, d1).astype(np.float32)
            if not (np.isfinite(b0).all() and np.isfinite(b1).all()):
                report(a, a.K, a.S, a.rule, None, float("inf"))
                return
            for rep in replicas:
                rep.wv.vectors[...] = b0
                rep.syn1neg[...] = b1
            done += words
    report(a, a.K, a.S, a.rule, evaluate(replicas[0].wv), np.abs(b0).max())


def report(a, k, s, rule, scores, max_abs, **extra):
    """Print the run's line (and, with ``--json``, its record)."""
    if scores is None:
        print(f"{k}\t{s}\t{rule}\tdiverged (non-finite weights)")
    else:
        print("%d\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.3f" % (k, s or "-", rule, *scores, max_abs))
    if a.json:
        names = ("analogy", "ws353", "simlex")
        print(json.dumps({"provenance": provenance(), "K": k, "S": s, "rule": rule, "sg": a.sg, "epochs": a.epochs,
                          "seed": a.seed, **dict(zip(names, scores or (None,) * 3)),
                          "max_abs": None if scores is None else float(max_abs), **extra}))


if __name__ == "__main__":
    main()
