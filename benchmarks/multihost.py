"""The cluster across "hosts": each process in its own network namespace, every link 1 Gbit/s.

For each K in --workers it builds a small network on this machine: a switch namespace with a
Linux bridge, a head namespace (name server, dispatcher and the client) and K worker hosts (a
worker and a parameter shard each), each joined to the switch by a veth pair whose both ends are
shaped with ``tc qdisc ... tbf rate 1gbit`` (a 1 Gbit/s NIC each way). It trains the corpus
through that cluster, HMAC-signed as any non-loopback cluster must be, and reports:

* merge share: the workers' time in merge rounds over K x the wall time of ``train()`` (merges
  overlap training: this is the share of a worker's time its merger thread was busy);
* bytes per trained word, each direction, per worker (``cluster_stats``);
* bytes per trained word on each link, each direction, counted by the kernel on the hosts' NICs
  (mean over the worker hosts, and the head's: with shards, no weights but the session's upload
  and download cross the head's link);
* quality (analogy, ws353, simlex999) against gensim ``workers=1`` trained in the same run.

All "hosts" share this machine's cores, so speed-up means nothing here: the figures are
communication share and bytes. Linux and root only (``ip``, ``tc``); elsewhere it prints why and
exits 0. Every namespace it creates is deleted, also on failure or Ctrl-C.

    sudo python benchmarks/multihost.py --corpus devmix.txt --max-words 3000000 --workers 2,4,8 --merge damp,mean
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
from compare_gensim import evaluate, head  # noqa: E402 - the benchmarks share these
import netlab  # noqa: E402 - the hosts (network namespaces) and the cluster on them


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line")
    parser.add_argument("--max-words", type=int, default=3_000_000, help="use the corpus's first lines up to this")
    parser.add_argument("--workers", default="2,4,8", help="comma-separated K values")
    parser.add_argument("--merge", default="damp", help="comma-separated merge rules to run (default damp)")
    parser.add_argument("--sg", type=int, default=1, choices=(0, 1))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", default="1gbit", help="link rate for tc tbf (default 1gbit)")
    parser.add_argument("--shards-per-host", type=int, default=1, help="parameter shards on each worker host")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--_client", nargs=3, metavar=("CORPUS", "MERGE", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--_gensim", nargs=2, metavar=("CORPUS", "OUT"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def params(args):
    return dict(vector_size=100, min_count=5, sg=args.sg, negative=5, epochs=args.epochs, seed=args.seed)


def run_client(args, corpus, rule, out):
    """In the head namespace: train through the cluster, write a JSON result."""
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v import Word2Vec

    sentences = list(LineSentence(corpus))
    model = Word2Vec(distributed=True, ns_conf={"host": netlab.address(-1), "port": netlab.PORT, "hmac_key": netlab.KEY},
                     merge=rule,
                     workers=1, **params(args))
    model.build_vocab(sentences)
    start = time.perf_counter()
    _effective, raw = model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs)
    seconds = time.perf_counter() - start
    stats = model.cluster_stats
    k = len(stats["workers"])
    effective = max(1, stats["effective_words"])
    result = {"rule": rule, "k": k, "seconds": seconds, "raw_words": raw, "sync_words": stats["sync_words"],
              "merge_share": stats["merge_seconds"] / (k * seconds),
              "up_per_word": stats["bytes_up"] / effective, "down_per_word": stats["bytes_down"] / effective,
              # per worker and direction: each worker moves its own share of the words
              "up_per_word_per_worker": statistics.fmean(w["bytes_up"] / max(1, w["words"]) for w in stats["workers"].values()),
              "down_per_word_per_worker": statistics.fmean(w["bytes_down"] / max(1, w["words"]) for w in stats["workers"].values()),
              **evaluate(model.wv)}
    with open(out, "w") as fout:
        json.dump(result, fout)


def run_gensim(args, corpus, out):
    """gensim workers=1 on the same data: the quality reference."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    model = gensim.models.Word2Vec(LineSentence(corpus), workers=1, **params(args))
    with open(out, "w") as fout:
        json.dump(evaluate(model.wv), fout)


def run_cluster(args, k, rule, corpus, workdir):
    with netlab.Network(k, args.rate) as net, netlab.Cluster(net, threads=1, shards_per_host=args.shards_per_host) \
            as cluster:
        before = {ns: net.counters(ns) for ns in [net.head] + net.workers}
        out = os.path.join(workdir, f"client-{k}-{rule}.json")
        client = subprocess.run(["ip", "netns", "exec", net.head, sys.executable, "-P", os.path.abspath(__file__),
                                 "--corpus", corpus, "--sg", str(args.sg), "--epochs", str(args.epochs), "--seed",
                                 str(args.seed), "--_client", corpus, rule, out],
                                env=cluster.env, capture_output=True, text=True, timeout=6 * 3600)
        if client.returncode != 0:
            raise RuntimeError(f"client failed (K={k}, {rule}):\n{client.stderr[-4000:]}")
        with open(out) as fin:
            result = json.load(fin)
        moved = {ns: [after - was for after, was in zip(net.counters(ns), before[ns])] for ns in before}
        words = max(1, result["raw_words"])
        result["link_per_word"] = {
            "worker_host_in": statistics.fmean(moved[ns][0] for ns in net.workers) / words,
            "worker_host_out": statistics.fmean(moved[ns][1] for ns in net.workers) / words,
            "head_in": moved[net.head][0] / words, "head_out": moved[net.head][1] / words}
        result["shards"] = k * args.shards_per_host
        return result


def main(argv=None):
    args = parse_args(argv)
    if args._client:
        return run_client(args, *args._client)
    if args._gensim:
        return run_gensim(args, *args._gensim)
    why = netlab.missing()
    if why:
        print(f"multihost benchmark skipped: {why}")
        return 0
    ks = [int(k) for k in args.workers.split(",")]
    rules = [r for r in args.merge.split(",") if r]
    results = []
    with tempfile.TemporaryDirectory(prefix="multihost_") as workdir:
        corpus = os.path.join(workdir, "corpus.txt")
        words = head(args.corpus, corpus, args.max_words)
        print(f"corpus {words} words; sg={args.sg} epochs={args.epochs} seed={args.seed}; links {args.rate} "
              f"(tc tbf) each way", flush=True)
        ref_out = os.path.join(workdir, "gensim.json")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--corpus", corpus, "--sg", str(args.sg),
                        "--epochs", str(args.epochs), "--seed", str(args.seed), "--_gensim", corpus, ref_out],
                       check=True, timeout=6 * 3600)
        with open(ref_out) as fin:
            ref = json.load(fin)
        print(f"gensim workers=1: analogy {ref['analogy']:.4f} ws353 {ref['ws353']:.4f} simlex {ref['simlex']:.4f}",
              flush=True)
        for k in ks:
            for rule in rules:
                row = run_cluster(args, k, rule, corpus, workdir)
                results.append(row)
                print(f"  K={k} {rule:<5} {row['seconds']:.1f} s, merge share {100 * row['merge_share']:.1f} %, "
                      f"{row['up_per_word_per_worker']:.0f}/{row['down_per_word_per_worker']:.0f} B per trained word "
                      f"up/down per worker, analogy {row['analogy']:.4f} ws353 {row['ws353']:.4f} "
                      f"simlex {row['simlex']:.4f}", flush=True)
    print(f"\n{'K':>3} {'rule':<6}{'shards':>7}{'sync words':>11}{'merge share':>12}{'B/w up':>8}{'B/w dn':>8}"
          f"{'host in':>8}{'host out':>9}{'head in':>8}{'head out':>9}{'d analogy':>11}{'d ws353':>9}{'d simlex':>9}")
    for row in results:
        link = row["link_per_word"]
        print(f"{row['k']:>3} {row['rule']:<6}{row['shards']:>7}{row['sync_words']:>11}{100 * row['merge_share']:>11.1f}%"
              f"{row['up_per_word_per_worker']:>8.0f}{row['down_per_word_per_worker']:>8.0f}"
              f"{link['worker_host_in']:>8.0f}{link['worker_host_out']:>9.0f}{link['head_in']:>8.1f}"
              f"{link['head_out']:>9.1f}"
              f"{100 * (row['analogy'] - ref['analogy']):>+11.2f}{row['ws353'] - ref['ws353']:>+9.4f}"
              f"{row['simlex'] - ref['simlex']:>+9.4f}")
    print("B/w: bytes per word the worker trained, per direction; host/head in/out: bytes per trained word (all "
          "workers') on a worker host's link (mean) and the head's, counted on the NICs; d: distributed - gensim "
          "workers=1")
    if args.json:
        print(json.dumps({"provenance": provenance(),
                          "args": {k: v for k, v in vars(args).items() if not k.startswith("_")}, "gensim": ref,
                          "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
