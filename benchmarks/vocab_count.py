"""Counting a corpus file's words for the vocabulary: one thread of the package's compiled counter
(:class:`gensim_distw2v._counts.WordCounts`, by byte ranges as workers read them) against gensim's
own scan (``Word2Vec.scan_vocab(corpus_file=...)``, one Python thread), in one run.

Both must find the same words, in the same order, with the same counts, raw words and sentences
(checked every repeat). Prints each one's seconds and words a second (medians of ``--repeats``,
CPU and wall) and their ratio::

    python benchmarks/vocab_count.py --corpus devmix.txt --repeats 3 --json

Not yet the cluster's counting (issue 35: workers counting ranges, their tables merged): this is
the per-thread cost that counting will have on each worker.
"""
import argparse
import json
import logging
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module

from gensim.models.word2vec import Word2Vec  # noqa: E402

from gensim_distw2v._counts import WordCounts  # noqa: E402
from gensim_distw2v.io.corpusfile import RangeReader  # noqa: E402

RANGE_BYTES = 16 * 1024 * 1024  # a range's bytes: as a worker would take them


def ours(path):
    """``(raw vocabulary in first-occurrence order, raw words, sentences)`` by the compiled counter."""
    size, table, raw, sentences = os.path.getsize(path), WordCounts(), 0, 0
    with RangeReader(path) as reader:
        for lo in range(0, size, RANGE_BYTES):
            got = reader.count(lo, min(size, lo + RANGE_BYTES), table)
            raw, sentences = raw + got[0], sentences + got[1]
    words, offsets, counts, _firsts = table.arrays()
    data = words.tobytes()
    vocab = {data[offsets[i]:offsets[i + 1]].decode("utf8"): int(counts[i]) for i in range(len(counts))}
    return vocab, raw, sentences


def gensims(path):
    """The same by gensim's ``scan_vocab``."""
    model = Word2Vec()
    raw, sentences = model.scan_vocab(corpus_file=path, progress_per=10 ** 9)
    return dict(model.raw_vocab), raw, sentences


def timed(fn, path):
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(path)
    return out, time.process_time() - cpu, time.perf_counter() - wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="a text file, one sentence a line")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    logging.getLogger("gensim").setLevel(logging.WARNING)
    rows = []
    for repeat in range(args.repeats):
        theirs, g_cpu, g_wall = timed(gensims, args.corpus)
        mine, o_cpu, o_wall = timed(ours, args.corpus)
        if mine != theirs or list(mine[0]) != list(theirs[0]):
            sys.exit("the counts differ from gensim's: a bug")
        raw = theirs[1]
        rows.append({"raw_words": raw, "distinct": len(theirs[0]), "sentences": theirs[2],
                     "gensim_cpu": g_cpu, "gensim_wall": g_wall, "ours_cpu": o_cpu, "ours_wall": o_wall})
        print(f"repeat {repeat + 1}: {raw:,} words, {len(theirs[0]):,} distinct, the same both ways; gensim "
              f"{g_wall:.2f} s ({raw / g_wall / 1e6:.2f} M words/s), the compiled counter {o_wall:.2f} s "
              f"({raw / o_wall / 1e6:.2f} M words/s): x{g_wall / o_wall:.2f}", flush=True)
    summary = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    summary["ratio_wall"] = summary["gensim_wall"] / summary["ours_wall"]
    summary["ours_words_per_s"] = summary["raw_words"] / summary["ours_wall"]
    summary["gensim_words_per_s"] = summary["raw_words"] / summary["gensim_wall"]
    print(f"medians of {args.repeats}: gensim {summary['gensim_words_per_s'] / 1e6:.2f} M words/s, the counter "
          f"{summary['ours_words_per_s'] / 1e6:.2f} M words/s a thread (x{summary['ratio_wall']:.2f})")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "rows": rows, "summary": summary}))


if __name__ == "__main__":
    main()
