"""``python -m gensim_distw2v train CORPUS --output MODEL [options]``: train and save a model;
``python -m gensim_distw2v cluster --hosts HOST[,HOST...]``: start a cluster over SSH and keep it up.

Reads a text file with one sentence per line and tokens separated by spaces (gensim's
``LineSentence`` format), trains ``gensim_distw2v.Word2Vec`` with gensim's options on a cluster
(a :class:`~gensim_distw2v.LocalCluster` started for the run, unless ``--ns-host``/``--ns-port``
name a running one), saves a model that ``gensim.models.Word2Vec.load`` opens, and prints a
summary. With ``--corpus-file`` the workers read the file themselves (gensim's ``corpus_file``
mode: the file must be at the same path on every worker).
"""
import argparse
import logging
import os
import sys
import time

from gensim_distw2v.config import fields
from gensim_distw2v.io.board import evaluate
from gensim_distw2v.io.keys import HMAC_ENV
from gensim_distw2v.launch import cli as launch_cli
from gensim_distw2v.options import ServerOptions
from gensim_distw2v.config.settings import Settings

logger = logging.getLogger("gensim_distw2v")


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m gensim_distw2v", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train a model on a text file and save it",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
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
    cluster = train.add_argument_group("the cluster")
    cluster.add_argument("--local-workers", type=int, default=2,
                         help="worker processes of the local cluster started for this run")
    cluster.add_argument("--threads-per-worker", type=int, default=1, help="trainer threads per local worker")
    cluster.add_argument("--local-shards", type=int, default=1,
                         help="parameter shard processes of the local cluster")
    cluster.add_argument("--ns-host", help="use the running cluster whose name server is on this host")
    cluster.add_argument("--ns-port", type=int,
                         help=f"... and this port ({ServerOptions.ns_port} when only --ns-host is given)")
    cluster.add_argument("--hmac-key-file", help=f"the running cluster's HMAC key, in this file (or set {HMAC_ENV})")
    cluster.add_argument("--corpus-file", action="store_true",
                         help="the workers read CORPUS themselves, in byte ranges (gensim's corpus_file mode): "
                              "faster; the file must be at the same path on every worker (a shared filesystem)")
    cluster.add_argument("--resume", action="store_true",
                         help="go on with the run whose checkpoints are in --checkpoint-dir (its client died): same "
                              "corpus and options")
    cluster.add_argument("--no-cluster", action="store_true",
                         help="train in this process with gensim's threads (--workers) instead")
    cluster.add_argument("--status-port", type=int,
                         help="the local cluster's dispatcher serves a live status page on this port of 127.0.0.1 "
                              "(0: any free port; its address is printed)")
    settings = train.add_argument_group("the distributed settings (Word2Vec's keywords; docs/settings.rst)")
    fields.add_arguments(settings, Settings)
    train.add_argument("--evaluate", action="store_true",
                       help="report analogy accuracy (questions-words.txt) and ws353 / simlex999 Spearman (with "
                            "--tensorboard-dir, also at every epoch end: --tensorboard-quality)")
    train.add_argument("--compare-gensim", action="store_true",
                       help="train plain gensim on the same corpus with the same options (workers: the cluster's "
                            "threads) and print both side by side: time, scores, nearest neighbours")
    train.add_argument("--probe", default=None,
                       help="comma-separated words whose nearest neighbours are printed (None: four frequent words "
                            "of the vocabulary)")
    train.add_argument("--verbose", action="store_true",
                       help="log gensim's and the package's INFO lines (by default: progress bars, warnings, errors)")
    train.add_argument("--quiet", action="store_true", help="no progress bars: warnings and errors only")
    launch_cli.add_arguments(train.add_argument_group("a cluster started over SSH for the run (docs/cluster.rst)"))
    cluster_cmd = commands.add_parser(
        "cluster", help="start a cluster over SSH on hosts, keep it up until Ctrl-C, then stop it on every host",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    launch_cli.add_arguments(cluster_cmd)
    cluster_cmd.add_argument("--ns-conf-file", help="write the ns_conf to use, key included, to this file (mode 0600; "
                                                    "default ~/.gensim_distw2v/ns_conf.json); it is never printed")
    cluster_cmd.add_argument("--verbose", action="store_true", help="log the launcher's INFO lines")
    return parser


def probe_words(wv, probe=None, n=4):
    """The words whose neighbours the summary shows: ``probe`` (comma-separated) if given, else
    ``n`` lower-case words of 6 letters or more spread over the vocabulary's ranks 50 to 1,500."""
    if probe:
        words = [w.strip() for w in probe.split(",") if w.strip()]
        missing = [w for w in words if w not in wv.key_to_index]
        if missing:
            sys.exit(f"error: --probe: {', '.join(missing)} not in the vocabulary (min_count drops rare words)")
        return words
    pool = [w for w in wv.index_to_key[50:1500] if w.isalpha() and w.islower() and len(w) >= 6]
    return [pool[i * len(pool) // n] for i in range(n)] if len(pool) >= n else pool


def neighbours(wv, word, topn=4):
    """``word``'s nearest neighbours as ``"w1 0.832, w2 0.801, ..."``."""
    return ", ".join(f"{w} {score:.3f}" for w, score in wv.most_similar(word, topn=topn))


def shared_neighbours(wv, other, words, topn=10):
    """The mean share of ``words``' ``topn`` nearest neighbours two models have in common."""
    def nearest(model, word):
        return {w for w, _score in model.most_similar(word, topn=topn)}

    shared = [len(nearest(wv, word) & nearest(other, word)) for word in words]
    return sum(shared) / (topn * max(1, len(shared)))


def side_by_side(title, rows):
    """Print a two-column table: ``rows`` of ``(label, this model, plain gensim)``."""
    rows = [(title, "this model", "plain gensim")] + list(rows)
    first, second = (max(len(row[i]) for row in rows) + 2 for i in (0, 1))
    for label, ours, theirs in rows:
        print(f"{label:<{first}}{ours:<{second}}{theirs}")


def train(args, bars=None):
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v import LocalCluster, Word2Vec

    if not os.path.isfile(args.corpus):
        sys.exit(f"error: corpus file {args.corpus!r} does not exist")
    if args.local_workers < 1 or args.threads_per_worker < 1 or args.local_shards < 1:
        sys.exit("error: --local-workers, --threads-per-worker and --local-shards must be >= 1")
    if args.resume and not args.checkpoint_dir:
        sys.exit("error: --resume needs --checkpoint-dir: the folder of the run's checkpoints")
    if (args.hosts or args.slurm) and (args.ns_host or args.ns_port or args.no_cluster or (args.hosts and args.slurm)):
        sys.exit("error: --hosts and --slurm start a cluster for the run: give one, without --ns-host / --ns-port / "
                 "--no-cluster")
    if args.hmac_key_file and not (args.ns_host or args.ns_port):
        sys.exit("error: --hmac-key-file is the key of a running cluster: give its --ns-host / --ns-port too")
    if args.no_cluster and (args.checkpoint_dir or args.tensorboard_dir or args.status_port is not None):
        sys.exit("error: --checkpoint-dir, --tensorboard-dir and --status-port are for cluster training; drop "
                 "--no-cluster or them")
    if args.status_port is not None and (args.ns_host or args.ns_port):
        sys.exit("error: --status-port starts the local cluster's status page; a running cluster's dispatcher "
                 "serves its own (python -m gensim_distw2v.dispatcher --status-port N)")
    sentences = LineSentence(args.corpus)
    settings = {name: getattr(args, name) for name in Settings.names()}
    settings["tensorboard_quality"] = bool(args.tensorboard_quality or (args.evaluate and args.tensorboard_dir))
    if args.resume:
        settings["checkpoint_dir"] = None  # the run's checkpoints are read from there (resume_from)
    model = Word2Vec(
        vector_size=args.vector_size, window=args.window, min_count=args.min_count, sg=args.sg, hs=args.hs,
        negative=args.negative, cbow_mean=args.cbow_mean, sample=args.sample, alpha=args.alpha,
        min_alpha=args.min_alpha, epochs=args.epochs, seed=args.seed, workers=args.workers,
        batch_words=args.batch_words, distributed=not args.no_cluster, **settings)
    resume = {"resume_from": args.checkpoint_dir} if args.resume else {}
    cluster, local = None, False
    try:
        if args.no_cluster:
            where = f"{args.workers} local threads"
        elif args.hosts:
            cluster = launch_cli.remote_cluster(args)
            cluster.start()
            model.ns_conf = cluster.ns_conf
            where = f"a cluster of {len(cluster.hosts)} hosts started over SSH" + (
                f", {cluster.shards_per_host} shards each" if cluster.shards_per_host > 1 else "")
        elif args.slurm:
            import signal

            signal.signal(signal.SIGTERM, launch_cli.interrupt)  # scancel: stop this node's part on the way out
            cluster = launch_cli.slurm_cluster(args)
            cluster.start()
            if cluster.rank:  # the other nodes serve rank 0's run, then stop
                cluster.serve()
                return
            model.ns_conf = cluster.ns_conf
            where = f"the {cluster.alloc.size} nodes of SLURM job {cluster.alloc.job}"
        elif args.ns_host or args.ns_port:
            from gensim_distw2v.io.keys import read_hmac_key

            model.ns_conf = {"host": args.ns_host or ServerOptions.ns_host,
                             "port": args.ns_port or ServerOptions.ns_port,
                             "hmac_key": read_hmac_key(args.hmac_key_file)}
            where = f"the cluster at {model.ns_conf['host']}:{model.ns_conf['port']}"
        else:
            cluster, local = LocalCluster(n_workers=args.local_workers, threads_per_worker=args.threads_per_worker,
                                          n_shards=args.local_shards, status_port=args.status_port), True
            cluster.start()
            if cluster.status_url:
                print(f"status page: {cluster.status_url}", flush=True)
            model.ns_conf = cluster.ns_conf
            where = (f"a local cluster of {args.local_workers} workers x {args.threads_per_worker} threads and "
                     f"{args.local_shards} shards")
        start = time.perf_counter()  # the vocabulary: counted on the cluster (a plain text file), else here
        if args.corpus_file:
            model.build_vocab(corpus_file=args.corpus)
        else:
            model.build_vocab(sentences)
        if not len(model.wv):
            sys.exit(f"error: no word of {args.corpus!r} occurs {args.min_count} times or more; lower --min-count")
        vocab_seconds = time.perf_counter() - start
        start, client_cpu = time.perf_counter(), time.process_time()
        if args.corpus_file:
            effective, raw = model.train(corpus_file=os.path.abspath(args.corpus), total_examples=model.corpus_count,
                                         total_words=model.corpus_total_words, epochs=model.epochs, **resume)
        else:
            effective, raw = model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs, **resume)
        train_seconds, client_cpu = time.perf_counter() - start, time.process_time() - client_cpu
    finally:
        if cluster is not None:
            cluster.close()
        if bars is not None:
            bars.close()  # (before the summary: the bars are on standard error, the summary on standard output)
    model.save(args.output)
    counted = " on the cluster" if getattr(model, "vocab_stats", None) else ""
    print(f"trained {args.output}: vocabulary {len(model.wv)} words (counted{counted} in {vocab_seconds:.1f} s), "
          f"{model.corpus_count} sentences, {model.epochs} epochs: {raw} raw / {effective} effective words in "
          f"{train_seconds:.1f} s ({raw / train_seconds:,.0f} raw words/s on {where})")
    stats = model.cluster_stats
    if stats:
        print(f"merges: {stats['merges']} (every {stats['sync_words']} words per worker), "
              f"{stats['bytes_up'] / max(1, effective):.1f} bytes up and {stats['bytes_down'] / max(1, effective):.1f} "
              f"bytes down per trained word")
    if args.evaluate:
        scores = evaluate(model.wv)
        print(f"analogy accuracy {scores['analogy']:.4f}, ws353 Spearman {scores['ws353']:.4f}, "
              f"simlex999 Spearman {scores['simlex999']:.4f}")
    gensim_wps = gensim_us = None
    if args.compare_gensim:
        gensim_wps, gensim_us = compare_with_gensim(args, model, raw, train_seconds)
    if stats:
        from gensim_distw2v.client import summary

        print()
        for line in summary.lines(stats, where, args.threads_per_worker, stats["corpus_file"], client_cpu=client_cpu,
                                  gensim_us=gensim_us,
                                  gensim_threads=args.local_workers * args.threads_per_worker, cores=os.cpu_count(),
                                  local=local):
            print(line)


def compare_with_gensim(args, model, raw, train_seconds):
    """Train plain gensim on the same corpus with the same options and seed, and print both side by
    side: speed, gensim's standard scores, and the nearest neighbours of a few words."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    workers = args.workers if args.no_cluster else args.local_workers * args.threads_per_worker

    def train_plain(seed):
        plain = gensim.models.Word2Vec(
            vector_size=args.vector_size, window=args.window, min_count=args.min_count, sg=args.sg, hs=args.hs,
            negative=args.negative, cbow_mean=args.cbow_mean, sample=args.sample, alpha=args.alpha,
            min_alpha=args.min_alpha, epochs=args.epochs, seed=seed, workers=workers, batch_words=args.batch_words)
        if args.corpus_file:
            plain.build_vocab(corpus_file=args.corpus)
        else:
            plain.build_vocab(LineSentence(args.corpus))
        start, cpu = time.perf_counter(), time.process_time()
        if args.corpus_file:
            raw = plain.train(corpus_file=args.corpus, total_words=plain.corpus_total_words, epochs=plain.epochs)[1]
        else:
            raw = plain.train(LineSentence(args.corpus), total_examples=plain.corpus_count, epochs=plain.epochs)[1]
        return plain, raw, time.perf_counter() - start, time.process_time() - cpu

    plain, plain_raw, plain_seconds, plain_cpu = train_plain(args.seed)
    ours, theirs = evaluate(model.wv), evaluate(plain.wv)
    print()
    side_by_side(f"same corpus, seed {args.seed}", [
        ("training", f"{train_seconds:.1f} s, {raw / train_seconds:,.0f} raw words/s",
         f"{plain_seconds:.1f} s, {plain_raw / plain_seconds:,.0f} raw words/s (workers={workers})"),
        ("analogy / ws353 / simlex", "{analogy:.3f} / {ws353:.3f} / {simlex999:.3f}".format(**ours),
         "{analogy:.3f} / {ws353:.3f} / {simlex999:.3f}".format(**theirs))])
    print()
    side_by_side("nearest neighbours", [(word, neighbours(model.wv, word), neighbours(plain.wv, word))
                                        for word in probe_words(model.wv, args.probe)])
    # how alike the two models are, against how alike gensim is to itself with another seed
    frequent = model.wv.index_to_key[:200]
    other = train_plain(args.seed + 1)[0]
    print(f"\ntop-10 neighbours of the 200 most frequent words shared with plain gensim: "
          f"{shared_neighbours(model.wv, plain.wv, frequent):.0%} (plain gensim with seeds {args.seed} and "
          f"{args.seed + 1}: {shared_neighbours(plain.wv, other.wv, frequent):.0%})")
    words = model.corpus_total_words
    if words < 10_000_000:
        print(f"(a corpus of {words:,} words: the analogy and similarity scores mean little this small; the shared "
              "neighbours, against gensim's own seed-to-seed figure, say more)")
    # its CPU per word (its process's: every thread), the projection's one-node reference
    return plain_raw / plain_seconds, 1e6 * plain_cpu / max(1, plain_raw)


def main(argv=None):
    args = build_parser().parse_args(argv)
    verbose = getattr(args, "verbose", False)
    shown = logging.StreamHandler()  # what reaches the screen: INFO with --verbose, else warnings and errors
    shown.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", handlers=[shown],
                        level=logging.INFO if verbose else logging.WARNING)
    bars = None
    if args.command == "train" and not verbose and not args.quiet:
        from gensim_distw2v.client.progress import ProgressBars

        bars = ProgressBars().attach()
    if args.command == "cluster":
        sys.exit(launch_cli.cluster_command(args))
    if args.command == "train":
        from gensim_distw2v.protocol.errors import ClusterError
        from gensim_distw2v.launch.events import LaunchError

        try:
            train(args, bars)
        except (ClusterError, ValueError, LaunchError) as err:  # a cluster part missing, a host unreachable...
            sys.exit(f"error: {err}")
        finally:
            if bars is not None:
                bars.detach()


if __name__ == "__main__":
    main()
