"""``python -m gensim_distw2v train CORPUS --output MODEL [options]``: train and save a model.

Reads a text file with one sentence per line and tokens separated by spaces (gensim's
``LineSentence`` format), trains ``gensim_distw2v.Word2Vec`` with gensim's options, saves a model
that ``gensim.models.Word2Vec.load`` opens, and prints a summary.
"""
import argparse
import logging
import os
import sys
import time

logger = logging.getLogger("gensim_distw2v")


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m gensim_distw2v", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train a model on a text file and save it")
    train.add_argument("corpus", help="text file: one sentence per line, tokens separated by spaces")
    train.add_argument("--output", required=True, help="where to save the model (gensim's Word2Vec.save format)")
    gensim_opts = train.add_argument_group("gensim's training options (same names and defaults as gensim)")
    gensim_opts.add_argument("--vector-size", type=int, default=100)
    gensim_opts.add_argument("--window", type=int, default=5)
    gensim_opts.add_argument("--min-count", type=int, default=5)
    gensim_opts.add_argument("--sg", type=int, choices=(0, 1), default=0, help="1: skip-gram, 0: CBOW")
    gensim_opts.add_argument("--hs", type=int, choices=(0, 1), default=0, help="1: hierarchical softmax")
    gensim_opts.add_argument("--negative", type=int, default=5, help="negative samples (0: none)")
    gensim_opts.add_argument("--cbow-mean", type=int, choices=(0, 1), default=1)
    gensim_opts.add_argument("--sample", type=float, default=1e-3, help="down-sampling threshold (0: off)")
    gensim_opts.add_argument("--alpha", type=float, default=0.025)
    gensim_opts.add_argument("--min-alpha", type=float, default=0.0001)
    gensim_opts.add_argument("--epochs", type=int, default=5)
    gensim_opts.add_argument("--seed", type=int, default=1)
    gensim_opts.add_argument("--workers", type=int, default=3, help="training threads")
    gensim_opts.add_argument("--batch-words", type=int, default=10000)
    train.add_argument("--evaluate", action="store_true",
                       help="report analogy accuracy (questions-words.txt) and ws353 / simlex999 Spearman")
    train.add_argument("--quiet", action="store_true", help="log warnings only")
    return parser


def evaluate(wv):
    """gensim's standard word-vector scores on the test data shipped with gensim."""
    from gensim.test.utils import datapath

    analogy, _ = wv.evaluate_word_analogies(datapath("questions-words.txt"))
    ws353 = wv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0]
    simlex = wv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0]
    return {"analogy": analogy, "ws353": ws353, "simlex999": simlex}


def train(args):
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v import Word2Vec

    if not os.path.isfile(args.corpus):
        sys.exit(f"error: corpus file {args.corpus!r} does not exist")
    sentences = LineSentence(args.corpus)
    start = time.perf_counter()
    model = Word2Vec(
        vector_size=args.vector_size, window=args.window, min_count=args.min_count, sg=args.sg, hs=args.hs,
        negative=args.negative, cbow_mean=args.cbow_mean, sample=args.sample, alpha=args.alpha,
        min_alpha=args.min_alpha, epochs=args.epochs, seed=args.seed, workers=args.workers,
        batch_words=args.batch_words)
    model.build_vocab(sentences)
    if not len(model.wv):
        sys.exit(f"error: no word of {args.corpus!r} occurs {args.min_count} times or more; lower --min-count")
    vocab_seconds = time.perf_counter() - start
    start = time.perf_counter()
    effective, raw = model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs)
    train_seconds = time.perf_counter() - start
    model.save(args.output)
    print(f"trained {args.output}: vocabulary {len(model.wv)} words, {model.corpus_count} sentences, "
          f"{raw} raw / {effective} effective words in {train_seconds:.1f} s "
          f"({raw / train_seconds:.0f} raw words/s, {args.workers} local threads); "
          f"vocabulary built in {vocab_seconds:.1f} s")
    if args.evaluate:
        scores = evaluate(model.wv)
        print(f"analogy accuracy {scores['analogy']:.4f}, ws353 Spearman {scores['ws353']:.4f}, "
              f"simlex999 Spearman {scores['simlex999']:.4f}")


def main(argv=None):
    args = build_parser().parse_args(argv)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s",
                        level=logging.WARNING if args.quiet else logging.INFO)
    if args.command == "train":
        train(args)


if __name__ == "__main__":
    main()
