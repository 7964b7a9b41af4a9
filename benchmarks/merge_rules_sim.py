"""The merge rules of the design's evidence (``docs/merge_rule.rst``), plugged into the simulator.

Exploration, not the product: ``gensim_distw2v/merge.py`` holds the rules the cluster runs. This
script adds rules to ``benchmarks/mergesim.py`` (a synchronous merge simulator: K replicas,
each trained by gensim's own ``train()``, merged every S words) and runs it with its own
arguments (``--json`` too). The rules (the simulator merges all K replicas at once, so its
"damp" is the synchronous analogue of the cluster's rule: the summed delta of a row is divided by
``1 + (K - 1) rho``, rho the mean pairwise agreement of the K deltas, clipped to [0, 1]):

``sum``                      mergesim's own
``cosdamp``                  damp all rows of both matrices
``cd0`` / ``cd1``            damp syn0 only / syn1neg only
``cdtop1000``                damp the 1,000 most frequent rows of both
``cd0t1000``                 damp syn0 and the 1,000 most frequent syn1neg rows (the default's analogue)
``adasum`` / ``adasumpos``   AdaSum tree over the K deltas (with negative agreement counted as 0)
``tierH:R``                  sum; rows [0, H) merged R times per round of S words, the rest once

    python benchmarks/merge_rules_sim.py devmix.txt --K 4 --S 10000 --rule cd0t1000 --sg 1 --epochs 3 --seed 1 --json
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mergesim  # noqa: E402 - the simulator, a sibling script

orig = mergesim.merge


def adasum2(a, b, positive=False):
    """AdaSum of two row-wise deltas; ``positive``: disagreement (negative dot) counts as none."""
    dot = np.einsum("ij,ij->i", a, b)[:, None]
    if positive:
        dot = np.maximum(dot, 0)
    na = np.einsum("ij,ij->i", a, a)[:, None]
    nb = np.einsum("ij,ij->i", b, b)[:, None]
    ca = np.where(na > 0, dot / (2 * np.where(na > 0, na, 1)), 0)
    cb = np.where(nb > 0, dot / (2 * np.where(nb > 0, nb, 1)), 0)
    return a * (1 - ca) + b * (1 - cb)


def adasum_pos2(a, b):
    return adasum2(a, b, positive=True)


def tree(f, ds):
    ds = list(ds)
    while len(ds) > 1:
        nxt = [f(ds[i], ds[i + 1]) for i in range(0, len(ds) - 1, 2)]
        if len(ds) % 2:
            nxt.append(ds[-1])
        ds = nxt
    return ds[0]


def seq(f, ds):
    acc = ds[0]
    for d in ds[1:]:
        acc = acc + (f(acc, d) - acc)  # = f(acc, d)
    return acc


def cosdamp(ds, power=1.0):
    K = len(ds)
    total = np.sum(ds, axis=0)
    sq = sum(np.einsum("ij,ij->i", d, d) for d in ds)
    tt = np.einsum("ij,ij->i", total, total)
    # mean pairwise cosine-like agreement: (|sum|^2 - sum|d|^2) / ((K-1) sum|d|^2)
    rho = np.where(sq > 0, (tt - sq) / ((K - 1) * np.where(sq > 0, sq, 1)), 0)
    rho = np.clip(rho, 0, 1) ** power
    return total / (1 + (K - 1) * rho)[:, None]


_calls = [0]


def merge(rule, base, deltas):
    which = _calls[0] % 2  # 0: syn0, 1: syn1neg (mergesim merges b0 then b1)
    _calls[0] += 1
    if (rule.startswith("cd0") or rule.startswith("cd1")) and not rule.startswith("cd0t"):
        if int(rule[2]) == which:
            p = float(rule[3:] or 1)
            return base + cosdamp(deltas, p)
        return base + np.sum(deltas, axis=0)
    if rule == "adasum":
        return base + tree(adasum2, deltas)
    if rule == "adasumpos":
        return base + tree(adasum_pos2, deltas)
    if rule == "adaseq":
        return base + seq(adasum_pos2, deltas)
    if rule.startswith("cd0t"):  # syn0: all rows damped; syn1neg: top N rows damped
        top = int(rule[4:])
        if which == 0:
            return base + cosdamp(deltas, 1.0)
        out = np.sum(deltas, axis=0)
        out[:top] = cosdamp([d[:top] for d in deltas], 1.0)
        return base + out
    if rule.startswith("cdtop"):
        top = int(rule[5:])
        out = np.sum(deltas, axis=0)
        out[:top] = cosdamp([d[:top] for d in deltas], 1.0)
        return base + out
    if rule.startswith("cosdamp"):
        p = float(rule[7:] or 1)
        return base + cosdamp(deltas, p)
    return orig(rule, base, deltas)


mergesim.merge = merge


def main_tier():
    """--rule tierH:R : sum rule; rows [0,H) (the most frequent) merged R times per round of S words."""
    import argparse

    from gensim.models.word2vec import LineSentence

    ap = argparse.ArgumentParser()
    ap.add_argument("corpus"); ap.add_argument("--K", type=int, default=2); ap.add_argument("--S", type=int, default=100000)
    ap.add_argument("--rule", default="tier1000:4"); ap.add_argument("--sg", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=3); ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    H, R = map(int, a.rule[4:].split(":"))
    hp = dict(sg=a.sg, vector_size=100, window=5, min_count=5, negative=5, sample=1e-3, alpha=0.025,
              min_alpha=0.0001, epochs=a.epochs)
    corpus = list(LineSentence(a.corpus))
    model, alpha_at, shards, lengths, rounds, cuts, replicas = mergesim.setup(a, hp, corpus, per_round=R)
    b0, b1, done = model.wv.vectors.copy(), model.syn1neg.copy(), 0
    bytes_up = 0
    for _ in range(a.epochs):
        for rnd in range(rounds):
            words = sum(sum(lengths[i][lo:hi]) for i, (lo, hi) in enumerate(c[rnd] for c in cuts))
            a0, a1 = alpha_at(done), alpha_at(done + words)
            full = (rnd + 1) % R == 0 or rnd == rounds - 1
            hi_row = len(b0) if full else H
            d0 = np.zeros((hi_row, b0.shape[1])); d1 = np.zeros((hi_row, b0.shape[1]))
            for i, rep in enumerate(replicas):
                lo, hi = cuts[i][rnd]
                piece = shards[i][lo:hi]
                rep.train(piece, total_examples=len(piece), epochs=1, start_alpha=a0, end_alpha=a1)
                x0 = rep.wv.vectors[:hi_row] - b0[:hi_row]; x1 = rep.syn1neg[:hi_row] - b1[:hi_row]
                bytes_up += (np.any(x0 != 0, axis=1).sum() + np.any(x1 != 0, axis=1).sum()) * 200
                d0 += x0; d1 += x1
            b0[:hi_row] += d0.astype(np.float32); b1[:hi_row] += d1.astype(np.float32)
            for rep in replicas:
                rep.wv.vectors[:hi_row] = b0[:hi_row]
                rep.syn1neg[:hi_row] = b1[:hi_row]
            done += words
    print("%d\t%d\t%s\t%.4f\t%.4f\t%.4f\t%.3f\tup B/word %.0f" % (a.K, a.S, a.rule, *mergesim.evaluate(replicas[0].wv),
          np.abs(b0).max(), bytes_up / done))


if __name__ == "__main__" and "tier" in " ".join(sys.argv):
    main_tier()
    sys.exit()

if __name__ == "__main__":
    mergesim.main()
