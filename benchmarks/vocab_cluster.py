"""The vocabulary counted on the cluster against gensim's ``build_vocab``, and end to end (vocabulary and
training), on the same file, in one run; and what counting projects to on a real cluster.

Starts a :class:`gensim_distw2v.LocalCluster` of ``--workers`` workers of ``--threads`` threads and
``--shards`` shards, then, each repeat, in alternating order: plain gensim (``workers`` = the cluster's
threads) and the cluster each build the vocabulary of ``--corpus`` (``build_vocab(corpus_file=...)``)
and train ``--epochs`` epochs on it (``train(corpus_file=...)``). The two vocabularies must be the same
(words, order, counts, corpus counts: checked every repeat). Prints, medians of the repeats:

* build_vocab's seconds both ways and their ratio, and of it the scan (the words counted: gensim's
  ``scan_vocab``; the cluster's count, ranges to ordered words) and the rest (gensim's own
  ``prepare_vocab`` and ``prepare_weights``, the same code both ways);
* the counting's cost per raw word by role: the workers' CPU (us), the shards' CPU (us), the bytes
  the workers sent; words a second per worker thread (words / the workers' CPU seconds);
* end to end (build_vocab + train) seconds both ways;
* with ``--training-projection`` (a ``scaling.py --json`` file), the projection of counting
  ``--project-words`` words on K nodes of T threads (:func:`gensim_distw2v.count_projection.count_projection`), beside
  the training of ``--project-epochs`` epochs at that file's projected words/s: counting's share
  of the end-to-end time.

    python benchmarks/vocab_cluster.py --corpus /tmp/devmix.txt --workers 2 --threads 1 --shards 2 --repeats 3 \\
        --check-settings --training-projection docs/measurements/scaling-k8-16-t2-cf-1g-look-again-2026-11-28.json --json
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
from gensim_distw2v import count_projection  # noqa: E402 - the counting's model

import gensim.models  # noqa: E402
from gensim import utils  # noqa: E402

from gensim_distw2v import LocalCluster, Word2Vec  # noqa: E402


class TimedGensim(gensim.models.Word2Vec):
    """gensim's model, its scan timed."""

    def scan_vocab(self, *args, **kwargs):
        began = time.perf_counter()
        out = super().scan_vocab(*args, **kwargs)
        self.scan_seconds = time.perf_counter() - began
        return out


def no_digits(word, count, min_count):
    """A trim rule: drop the words with a digit, keep the others by min_count."""
    return utils.RULE_DISCARD if any(ch.isdigit() for ch in word) else utils.RULE_DEFAULT


#: vocabulary settings also checked for equality with gensim (``--check-settings``), once each
CHECKED = {"min_count=1": dict(min_count=1), "min_count=5, max_final_vocab=50000": dict(min_count=5, max_final_vocab=50000),
           "min_count=2, trim_rule=no_digits, sample=0": dict(min_count=2, trim_rule=no_digits, sample=0)}


def check_settings(ns_conf, corpus):
    """Build the vocabulary both ways under each of :data:`CHECKED`: the names checked (an exit if one differs)."""
    for name, params in CHECKED.items():
        params = dict(params)
        trim_rule = params.pop("trim_rule", None)
        theirs = gensim.models.Word2Vec(**params)
        theirs.build_vocab(corpus_file=corpus, trim_rule=trim_rule)
        ours = Word2Vec(distributed=True, ns_conf=ns_conf, **params)
        ours.build_vocab(corpus_file=corpus, trim_rule=trim_rule)
        if state(theirs) != state(ours):
            sys.exit(f"the cluster's vocabulary differs from gensim's under {name}: a bug")
        print(f"{name}: the same vocabulary both ways ({len(ours.wv):,} words)", flush=True)
    return list(CHECKED)


def state(model):
    return (list(model.wv.index_to_key), model.wv.expandos["count"].tolist(), model.corpus_count,
            model.corpus_total_words)


def one(kind, args, ns_conf):
    """One model's build_vocab and train: its timings and the model."""
    params = dict(vector_size=args.vector_size, min_count=args.min_count, sg=args.sg, epochs=args.epochs, seed=1)
    if kind == "gensim":
        model = TimedGensim(workers=args.workers * args.threads, **params)
    else:
        model = Word2Vec(distributed=True, ns_conf=ns_conf, **params)
    cpu, began = time.process_time(), time.perf_counter()
    model.build_vocab(corpus_file=args.corpus)
    vocab_s, vocab_cpu = time.perf_counter() - began, time.process_time() - cpu
    trained = time.perf_counter()
    if args.epochs:
        model.train(corpus_file=args.corpus, total_words=model.corpus_total_words, epochs=args.epochs)
    train_s = time.perf_counter() - trained
    scan_s = model.scan_seconds if kind == "gensim" else model.vocab_stats["count_seconds"]
    return {"vocab_s": vocab_s, "vocab_client_cpu": vocab_cpu, "scan_s": scan_s, "rest_s": vocab_s - scan_s,
            "train_s": train_s, "end_to_end_s": vocab_s + train_s}, model


def project(summary, args):
    """Counting ``--project-words`` on K nodes of T threads, beside the training of the projection file."""
    with open(args.training_projection) as fin:
        trained = json.load(fin)
    raw, distinct = summary["raw_words"], summary["distinct"]
    costs = {"count_worker_us": summary["count_worker_us"], "count_shard_us": summary["count_shard_us"],
             "count_bytes_per_word": summary["count_bytes_per_word"],
             "tail_us_per_distinct": summary["tail_us_per_distinct"],
             "file_bytes_per_word": summary["file_bytes_per_word"]}
    words = args.project_words
    v = count_projection.distinct_words(words, raw, distinct)
    out = []
    for point in trained["projection"]:
        counted = count_projection.count_projection(costs, words, v, point["K"], point["threads"], point["link_gbit"])
        train_s = args.project_epochs * words / point["cluster_wps"]
        many = count_projection.count_projection(costs, words, args.project_many_distinct, point["K"], point["threads"],
                                           point["link_gbit"])["seconds"]  # the same with far more distinct words
        out.append({"K": point["K"], "threads": point["threads"], "link_gbit": point["link_gbit"],
                    "words": words, "distinct": v, "count_s": counted["seconds"], "count_bottleneck":
                    counted["bottleneck"], "count_limits": counted["limits"], "train_s": train_s,
                    "count_share": counted["seconds"] / (counted["seconds"] + train_s),
                    "many_distinct": args.project_many_distinct, "count_s_many": many,
                    "count_share_many": many / (many + train_s)})
    return {"costs": costs, "training_projection": args.training_projection, "points": out}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="a text file, one sentence a line")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="trainer threads per worker")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1, help="epochs trained after the vocabulary (0: none)")
    parser.add_argument("--vector-size", type=int, default=100)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--sg", type=int, default=0)
    parser.add_argument("--training-projection", help="a scaling.py --json file: its projected words/s per point")
    parser.add_argument("--project-words", type=float, default=3e9)
    parser.add_argument("--project-epochs", type=int, default=5)
    parser.add_argument("--project-many-distinct", type=float, default=1e7,
                        help="the projection again with this many distinct words (Heaps' law may understate them)")
    parser.add_argument("--check-settings", action="store_true",
                        help="first check the vocabulary both ways under other settings too (min_count, "
                             "max_final_vocab, trim_rule)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    rows, checked = [], []
    with LocalCluster(n_workers=args.workers, threads_per_worker=args.threads, n_shards=args.shards,
                      log_level="WARNING") as cluster:
        if args.check_settings:
            checked = check_settings(cluster.ns_conf, args.corpus)
        for repeat in range(args.repeats):
            order = ("gensim", "cluster") if repeat % 2 == 0 else ("cluster", "gensim")
            got = {}
            for kind in order:
                got[kind] = one(kind, args, cluster.ns_conf)
            (theirs, g_model), (ours, o_model) = got["gensim"], got["cluster"]
            if state(g_model) != state(o_model):
                sys.exit("the cluster's vocabulary differs from gensim's: a bug")
            stats, raw = o_model.vocab_stats, o_model.corpus_total_words
            row = {"repeat": repeat, "order": list(order), "raw_words": raw, "distinct": stats["count_distinct"],
                   "retained": len(o_model.wv), "gensim": theirs, "cluster": ours,
                   "count_worker_us": 1e6 * stats["count_cpu"] / raw, "count_shard_us": 1e6 * stats["count_shard_cpu"] / raw,
                   "count_bytes_per_word": stats["count_bytes"] / raw, "count_ranges": stats["count_ranges"],
                   "count_words_per_thread_s": raw / max(stats["count_cpu"], 1e-9),
                   "tail_us_per_distinct": 1e6 * (ours["vocab_s"] - stats["count_ranges_seconds"]) / stats["count_distinct"],
                   "file_bytes_per_word": os.path.getsize(args.corpus) / raw}
            rows.append(row)
            print(f"repeat {repeat + 1} ({' then '.join(order)}): {raw:,} words, {row['distinct']:,} distinct, the same "
                  f"vocabulary; build_vocab gensim {theirs['vocab_s']:.2f} s (scan {theirs['scan_s']:.2f}), cluster "
                  f"{ours['vocab_s']:.2f} s (count {ours['scan_s']:.2f}): x{theirs['vocab_s'] / ours['vocab_s']:.2f}, "
                  f"scan x{theirs['scan_s'] / ours['scan_s']:.2f}; end to end gensim {theirs['end_to_end_s']:.1f} s, "
                  f"cluster {ours['end_to_end_s']:.1f} s", flush=True)
    med = statistics.median
    summary = {key: med(r[key] for r in rows) for key in rows[0] if isinstance(rows[0][key], (int, float))}
    for side in ("gensim", "cluster"):
        summary[side] = {key: med(r[side][key] for r in rows) for key in rows[0][side]}
    g, c = summary["gensim"], summary["cluster"]
    summary.update(vocab_ratio=g["vocab_s"] / c["vocab_s"], scan_ratio=g["scan_s"] / c["scan_s"],
                   end_to_end_ratio=g["end_to_end_s"] / c["end_to_end_s"],
                   gensim_vocab_wps=summary["raw_words"] / g["vocab_s"],
                   cluster_vocab_wps=summary["raw_words"] / c["vocab_s"])
    print(f"medians of {args.repeats}: build_vocab gensim {g['vocab_s']:.2f} s, cluster {c['vocab_s']:.2f} s "
          f"(x{summary['vocab_ratio']:.2f}; the scan alone x{summary['scan_ratio']:.2f}); counting per raw word: "
          f"workers {summary['count_worker_us']:.4f} us, shards {summary['count_shard_us']:.4f} us, "
          f"{summary['count_bytes_per_word']:.2f} bytes; {summary['count_words_per_thread_s'] / 1e6:.1f} M words/s a "
          f"worker thread; end to end gensim {g['end_to_end_s']:.1f} s, cluster {c['end_to_end_s']:.1f} s "
          f"(x{summary['end_to_end_ratio']:.2f})")
    projected = None
    if args.training_projection:
        projected = project(summary, args)
        for p in projected["points"]:
            print(f"projected: {p['words']:.3g} words ({p['distinct']:.3g} distinct), K={p['K']} x {p['threads']} "
                  f"threads, {p['link_gbit']:g} Gbit/s: counting {p['count_s']:.0f} s ({p['count_bottleneck']}), "
                  f"{args.project_epochs} epochs {p['train_s']:.0f} s: counting {100 * p['count_share']:.1f} % of the run "
                  f"({100 * p['count_share_many']:.1f} % with {p['many_distinct']:.3g} distinct words)")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "rows": rows, "summary": summary,
                          "checked_settings": checked, "projection": projected}))


if __name__ == "__main__":
    main()
