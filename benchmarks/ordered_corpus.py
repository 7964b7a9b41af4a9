"""A corpus file laid out in an order, as real corpora come (by article, date, source): for checking that
training from a file does not depend on the order of its lines.

``--order sorted``: the lines sorted (as bytes). ``--order topics``: the lines grouped by topic: a
quick gensim model (one CBOW epoch) gives every line the mean of its words' vectors, k-means
(``scipy.cluster.vq.kmeans2``) clusters those into ``--clusters`` groups, and the file is written
group by group, each group's lines in their first order. ``--order shuffled``: the lines shuffled
with ``--seed`` (devmix's own order).

    python benchmarks/ordered_corpus.py --corpus /tmp/devmix.txt --order topics --out /tmp/devmix-topics.txt
"""
import argparse
import logging
import sys

import numpy as np


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--order", required=True, choices=("sorted", "topics", "shuffled"))
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--max-words", type=int, default=0, help="the corpus's first lines up to this many words")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def read_lines(path, max_words):
    """The corpus's first lines up to ``max_words`` words (all of them with 0)."""
    lines, words = [], 0
    with open(path, "rb") as fin:
        for line in fin:
            lines.append(line if line.endswith(b"\n") else line + b"\n")
            words += len(line.split())
            if max_words and words >= max_words:
                break
    return lines


def topic_order(lines, clusters, seed):
    """The lines' order grouped by k-means of their mean word vectors."""
    from gensim.models import Word2Vec
    from scipy.cluster.vq import kmeans2

    sentences = [line.decode("utf-8", "replace").split() for line in lines]
    model = Word2Vec(sentences, vector_size=50, min_count=5, epochs=1, sg=0, workers=2, seed=seed)
    wv = model.wv
    normed = wv.get_normed_vectors()
    means = np.zeros((len(lines), wv.vector_size), dtype=np.float32)
    for i, sentence in enumerate(sentences):  # per line, once: a tool, not a hot path
        known = [wv.key_to_index[w] for w in sentence if w in wv.key_to_index]
        if known:
            means[i] = normed[known].mean(axis=0)
    _, label = kmeans2(means.astype(np.float64), clusters, seed=seed, minit="++")
    return np.argsort(label, kind="stable"), label


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    lines = read_lines(args.corpus, args.max_words)
    if args.order == "sorted":
        order = sorted(range(len(lines)), key=lines.__getitem__)
    elif args.order == "shuffled":
        order = np.random.default_rng(args.seed).permutation(len(lines))
    else:
        order, label = topic_order(lines, args.clusters, args.seed)
        sizes = np.bincount(label, minlength=args.clusters)
        print(f"{args.clusters} groups of {sizes.min()}-{sizes.max()} lines (median {int(np.median(sizes))})",
              file=sys.stderr)
    with open(args.out, "wb") as fout:
        for i in order:
            fout.write(lines[i])
    print(f"wrote {args.out}: {len(lines)} lines, order {args.order}")


if __name__ == "__main__":
    main()
