"""Distributed training against plain gensim, side by side in one run.

For each K in --workers and each seed it trains the same corpus with the same hyper-parameters:

* ``gensim``: ``gensim.models.Word2Vec(workers=K)`` over the corpus as ``--sentences`` gives it: a
  ``LineSentence`` of the file (``lines``, the default: what gensim users pass, reading and splitting
  counted) or the sentences held in memory (``list``);
* ``gensim_cf``: gensim's ``corpus_file`` mode, ``workers=K``;
* ``dist``: ``gensim_distw2v.Word2Vec(distributed=True)`` on a LocalCluster of K workers x
  ``--threads-per-worker`` threads (default 1) and ``--shards`` parameter shards, given the same
  corpus (a ``LineSentence`` the workers read themselves, ``workers_read``; ``--no-workers-read``:
  streamed through the client, as a list is);
* ``dist_cf``: the same cluster in ``corpus_file`` mode (every worker reads its byte ranges of the
  file itself).

Each run is a fresh process (so peak RSS is its own; for ``dist`` the client's, the dispatcher's,
the largest shard's and the largest worker's). The vocabulary is built once and shared. ``train()`` wall time excludes
the per-epoch evaluation that feeds the plots (analogy accuracy at each epoch end; for ``dist``
the callback also pulls the weights, which is included). Prints a table of means over seeds,
optionally writes PNG plots (loss and accuracy against time, speed-up against workers) and
``--json`` prints one JSON object last.

    python benchmarks/compare_gensim.py --corpus /tmp/devmix.txt --workers 1,2,4 --sg 1 --epochs 3 --seeds 2
    python benchmarks/compare_gensim.py --corpus /tmp/devmix.txt --workers 1,2 --modes gensim,gensim_cf,dist_cf
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
import threading
import time

from provenance import provenance  # a sibling module (the script's folder is on sys.path)

MODES = ("gensim", "gensim_cf", "dist", "dist_cf")
CLUSTER_MODES = ("dist", "dist_cf")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line, tokens separated by spaces")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated K values (default 1,2,4)")
    parser.add_argument("--sg", type=int, default=1, choices=(0, 1))
    parser.add_argument("--hs", type=int, default=0, choices=(0, 1))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2, help="seeds 1..N; figures are means over them")
    parser.add_argument("--first-seed", type=int, default=1,
                        help="start at this seed: --first-seed 2 --seeds 1 runs seed 2 alone (to extend a run)")
    parser.add_argument("--alpha", type=float, default=0.025, help="start learning rate (gensim's default)")
    parser.add_argument("--min-alpha", type=float, default=0.0001,
                        help="end learning rate (gensim's default; gensim's corpus_file mode with workers=K ends each "
                             "epoch where its schedule is 1/K of the way: see docs/corpus_file.rst)")
    parser.add_argument("--vector-size", type=int, default=100)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--max-words", type=int, default=0, help="use the corpus's first lines up to this many words")
    parser.add_argument("--modes", default=",".join(MODES), help=f"subset of {','.join(MODES)}")
    parser.add_argument("--sentences", default="lines", choices=("lines", "list"),
                        help="what gensim and dist train from: a LineSentence of the file (default) or its sentences "
                             "in a list in memory (reading and splitting not counted)")
    parser.add_argument("--no-workers-read", action="store_true",
                        help="dist: the client streams a LineSentence itself (workers_read=False)")
    parser.add_argument("--shards", type=int, default=1, help="parameter shards of the distributed runs (default 1)")
    parser.add_argument("--threads-per-worker", type=int, default=1,
                        help="trainer threads of each worker of the distributed runs (default 1; gensim's runs keep "
                             "workers=K)")
    parser.add_argument("--merge", default="damp", help="merge rule of the distributed runs (default damp)")
    parser.add_argument("--sync", default=None, help="sync mode of the distributed runs: ssp, bsp, asp or local "
                                                     "(default: the package's)")
    parser.add_argument("--sync-words", type=int, default=None, help="default: derived from K")
    parser.add_argument("--hold-back", type=float, default=None,
                        help="hold-back share of the distributed runs (default: the package's)")
    parser.add_argument("--cold-every", type=int, default=None,
                        help="merge the rows of rare words every n-th round (default: the package's; 1: every round)")
    parser.add_argument("--cold-output-every", type=int, default=None,
                        help="of the rounds that merge rare rows, every n-th sends syn1neg's (default: the package's)")
    parser.add_argument("--corpus-file-rate", choices=("linear", "gensim"), default=None,
                        help="dist_cf: the learning rate's decay (default: the package's, 'linear'; 'gensim': as "
                             "gensim's corpus_file mode with as many threads as the cluster's trainers)")
    parser.add_argument("--damp-output-rows", type=int, default=None, metavar="ROWS",
                        help="settings.damp_output_rows: at most this many syn1neg rows damped (default: the "
                             "package's)")
    parser.add_argument("--cold-output-down", choices=("all", "with_up", "held"), default=None,
                        help="which rare syn1neg rows those rounds bring down: every one a worker lacks, those of "
                             "its jobs, or every one in the rounds that send its own ('with_up') (default: the "
                             "package's)")
    parser.add_argument("--round-pieces", type=int, default=None,
                        help="a routine round's pieces in flight (default: the package's; an install before them: 1)")
    parser.add_argument("--rounds-in-flight", type=int, default=None,
                        help="a worker's routine rounds under way at once (default: the package's; before them: 1)")
    parser.add_argument("--lag-limit", default=None,
                        help="interval plus lag kept within this many intervals, or 'none' (default: the package's)")
    parser.add_argument("--merge-dtype", default=None,
                        help="values of routine merges on the wire: int8, float16 or float32 (default: the package's)")
    parser.add_argument("--no-hmac", action="store_true",
                        help="an unkeyed LocalCluster (default: keyed, as LocalCluster is: every message signed)")
    parser.add_argument("--no-channel", action="store_true",
                        help="shards without the bulk channel: merges go by Pyro4 (default: by the channel)")
    parser.add_argument("--truth", metavar="PAIRS_TSV",
                        help="a synthetic corpus's known answer (discourse_corpus.py's .pairs.tsv; its .analogies.txt "
                             "beside it): also score 'truth' (Spearman against the pairs) and 'truth_analogy', and "
                             "follow the truth analogies in the per-epoch curve")
    parser.add_argument("--plots", help="directory for PNG plots (needs matplotlib)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--_one", nargs=5, metavar=("MODE", "K", "SEED", "VOCAB", "CORPUS"), help=argparse.SUPPRESS)
    # a single run on a cluster started elsewhere (benchmarks/netlab.py): a JSON file of its name server's
    # "host" and "port" and its processes' {"pid": "role"}; the key from GENSIM_DISTW2V_HMAC_KEY
    parser.add_argument("--_external", metavar="JSON", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def truth_analogies(pairs_path):
    """The analogy questions written beside a synthetic corpus's truth list (None: there are none)."""
    path = pairs_path[:-len(".pairs.tsv")] + ".analogies.txt" if pairs_path.endswith(".pairs.tsv") else None
    return path if path and os.path.exists(path) else None


def evaluate(wv, truth=None):
    """gensim's standard scores; NaN where the model knows none of a test's words (a synthetic corpus).
    With ``truth`` (a synthetic corpus's ``.pairs.tsv``) also its known answer: ``truth`` (Spearman against
    the pairs) and ``truth_analogy`` (the analogies beside it, every word of the vocabulary a candidate)."""
    from gensim.test.utils import datapath

    def score(test):
        try:
            return test()
        except (ValueError, ZeroDivisionError):  # no pair or question of the test in the vocabulary
            return float("nan")
    out = {"analogy": score(lambda: wv.evaluate_word_analogies(datapath("questions-words.txt"))[0]),
           "ws353": score(lambda: wv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0]),
           "simlex": score(lambda: wv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0])}
    if truth:
        from synth_corpus import analogy_score, score as truth_score

        out["truth"] = score(lambda: truth_score(wv, truth))
        questions = truth_analogies(truth)
        out["truth_analogy"] = score(lambda: analogy_score(wv, questions)) if questions else float("nan")
    return out


def rss_mb(pid=None):
    import psutil

    return psutil.Process(pid).memory_info().rss / 2 ** 20 if pid else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _summed_calls(each):
    """Nodes' ``calls`` (``{op: [calls, handling CPU seconds, whole-call CPU seconds]}``) summed over the
    nodes that have them (None: none has)."""
    out = None
    for calls in each:
        for op, value in (calls or {}).items():
            out = out or {}
            total = out.setdefault(op, [0, 0.0, 0.0])
            for i, v in enumerate(value[:3]):
                total[i] += v
    return out


def _summed_groups(each):
    """Nodes' ``thread_cpu`` (``{group: CPU seconds}``) summed over the nodes that have them (None: none has)."""
    out = None
    for groups in each:
        for group, seconds in (groups or {}).items():
            out = out or {}
            out[group] = out.get(group, 0.0) + seconds
    return out


def run_one(args, mode, k, seed, vocab_path, corpus_path):
    """One run in this fresh process; prints a JSON line."""
    import gensim.models
    from gensim.models.callbacks import CallbackAny2Vec
    from gensim.models.word2vec import LineSentence

    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=logging.WARNING)
    sentences = None if mode.endswith("_cf") else LineSentence(corpus_path) if args.sentences == "lines" else \
        list(LineSentence(corpus_path))
    vocab = gensim.models.Word2Vec.load(vocab_path)

    class Curve(CallbackAny2Vec):
        """Loss and analogy accuracy at each epoch end, against train() time without this callback."""

        def __init__(self):
            self.points, self.paused, self.paused_cpu, self.start = [], 0.0, 0.0, None

        def on_train_begin(self, model):
            self.start = time.perf_counter()

        def on_epoch_end(self, model):
            began, began_cpu = time.perf_counter(), time.process_time()
            model.wv.fill_norms(force=True)  # gensim caches norms: the weights changed since the last look
            questions = truth_analogies(args.truth) if args.truth else None
            if questions:
                from synth_corpus import analogy_score

                acc = analogy_score(model.wv, questions)
            else:
                acc = model.wv.evaluate_word_analogies(__import__("gensim.test.utils").test.utils.datapath(
                    "questions-words.txt"), restrict_vocab=30000)[0]
            self.points.append({"t": began - self.start - self.paused, "loss": model.get_latest_training_loss(),
                                "analogy": acc})
            self.paused += time.perf_counter() - began
            self.paused_cpu += time.process_time() - began_cpu

    params = dict(vector_size=args.vector_size, min_count=args.min_count, sg=args.sg, hs=args.hs, alpha=args.alpha,
                  min_alpha=args.min_alpha,
                  negative=0 if args.hs else 5, epochs=args.epochs, seed=seed, workers=k)
    cluster, result = None, {"mode": mode, "k": k, "seed": seed, "sentences": None if sentences is None else
                             args.sentences}
    if mode in CLUSTER_MODES:
        result["threads_per_worker"] = args.threads_per_worker
    peaks, sampling, roles = {}, threading.Event(), {}  # roles: cluster pid -> dispatcher/worker
    try:
        if mode in CLUSTER_MODES:
            from gensim_distw2v import LocalCluster, Word2Vec

            if args._external:
                with open(args._external) as fin:
                    external = json.load(fin)
                ns_conf = {"host": external["host"], "port": external["port"],
                           "hmac_key": os.environ["GENSIM_DISTW2V_HMAC_KEY"]}
                roles = {int(pid): role for pid, role in external["roles"].items()}
            else:
                cluster = LocalCluster(n_workers=k, threads_per_worker=args.threads_per_worker, n_shards=args.shards,
                                       hmac_key=False if args.no_hmac else None,
                                       # (only when asked: an install before the channel takes no shard_args)
                                       **({"shard_args": ["--channel-port", "-1"]} if args.no_channel else {})).start()
                ns_conf = cluster.ns_conf
                roles = {p.pid: name.split("-")[0] for name, p in cluster.processes.items() if name != "nameserver"}
            model = Word2Vec(distributed=True, ns_conf=ns_conf, merge=args.merge,
                             sync_words=args.sync_words,
                             **({} if args.hold_back is None else {"hold_back": args.hold_back}),
                             **({} if args.cold_every is None else {"cold_every": args.cold_every}),
                             **({} if args.cold_output_every is None else
                                {"cold_output_every": args.cold_output_every}),
                             **({} if args.cold_output_down is None else {"cold_output_down": args.cold_output_down}),
                             **({} if args.damp_output_rows is None else {"damp_output_rows": args.damp_output_rows}),
                             **({} if args.corpus_file_rate is None else {"corpus_file_rate": args.corpus_file_rate}),
                             **({} if args.merge_dtype is None else {"merge_dtype": args.merge_dtype}),
                             **({} if args.round_pieces is None else {"round_pieces": args.round_pieces}),
                             **({} if args.rounds_in_flight is None else {"rounds_in_flight": args.rounds_in_flight}),
                             **({} if args.lag_limit is None else
                                {"lag_limit": None if args.lag_limit == "none" else float(args.lag_limit)}),
                             **({} if args.sync is None else {"sync": args.sync}),
                             **({"workers_read": False} if args.no_workers_read else {}), **params)

            def sample_once():
                for pid, role in roles.items():
                    try:
                        peaks[role] = max(peaks.get(role, 0.0), rss_mb(pid))
                    except Exception:  # noqa: BLE001 - a process may be gone
                        pass

            def sample():
                while not sampling.wait(0.5):
                    sample_once()
            threading.Thread(target=sample, daemon=True).start()
        else:
            model = gensim.models.Word2Vec(**params)
        model.build_vocab_from_freq({w: vocab.wv.get_vecattr(w, "count") for w in vocab.wv.index_to_key})
        model.corpus_count, model.corpus_total_words = vocab.corpus_count, vocab.corpus_total_words
        curve = Curve()

        def cpu_seconds():  # per role, of the cluster's processes (dist only)
            import psutil

            out = {}
            for pid, role in roles.items():
                times = psutil.Process(pid).cpu_times()
                out[role] = out.get(role, 0.0) + times.user + times.system
            return out

        cpu_before, client_cpu = cpu_seconds(), time.process_time()
        start = time.perf_counter()
        if mode.endswith("_cf"):
            effective, raw = model.train(corpus_file=corpus_path, total_words=model.corpus_total_words,
                                         epochs=args.epochs, compute_loss=True, callbacks=[curve])
        else:
            effective, raw = model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs,
                                         compute_loss=True, callbacks=[curve])
        seconds = time.perf_counter() - start - curve.paused
        sampling.set()
        if mode in CLUSTER_MODES:
            sample_once()  # a short run may end before the first sample
        if mode in CLUSTER_MODES:  # CPU seconds of train(), the client's without the evaluation callback
            cpu = {role: after - cpu_before.get(role, 0.0) for role, after in cpu_seconds().items()}
            result["cpu_seconds"] = {"client": time.process_time() - client_cpu - curve.paused_cpu, **cpu}
        else:  # gensim's threads, all in this process
            result["cpu_seconds"] = {"process": time.process_time() - client_cpu - curve.paused_cpu}
        result.update(seconds=seconds, raw_wps=raw / seconds, effective_wps=effective / seconds,
                      effective_words=effective, curve=curve.points, **evaluate(model.wv, args.truth))
        peaks["client" if mode in CLUSTER_MODES else "process"] = rss_mb()
        result["peak_rss_mb"] = peaks
        stats = getattr(model, "cluster_stats", None) or {}
        if stats:
            result.update(merge_seconds=stats.get("merge_seconds", 0.0), merges=stats["merges"],
                          bytes_up_per_word=stats["bytes_up"] / max(1, effective),
                          bytes_down_per_word=stats["bytes_down"] / max(1, effective),
                          sync_words=stats["sync_words"], kernel_cpu=stats["kernel_cpu"],
                          merge_cpu=stats["merge_cpu"], raw_words=raw, bytes_up=stats["bytes_up"],
                          bytes_down=stats["bytes_down"],
                          rounds=sum(w["merges"] for w in stats["workers"].values()),
                          stall_seconds=stats["stall_seconds"], shards=stats["shards"],
                          flush_cpu=stats.get("flush_cpu", {"workers": 0.0, "shards": 0.0}),
                          routine_nogil_cpu=stats.get("routine_nogil_cpu", {"workers": 0.0, "shards": 0.0}),
                          take_cpu=stats.get("take_cpu", 0.0), round_pieces=getattr(model, "round_pieces", 1),
                          rounds_in_flight=getattr(model, "rounds_in_flight", 1), overlapped=stats.get("overlapped", 0),
                          lag_words=stats.get("lag_words", 0),
                          exact_bytes=stats.get("exact_bytes_up", 0) + stats.get("exact_bytes_down", 0),
                          epochs=model.epochs, setup_cpu=stats.get("setup_cpu", 0.0),
                          # the dispatcher's calls, call by call: [calls, CPU seconds in them] (what its CPU
                          # went to: per job, or per second of each member)
                          dispatcher_calls=next((n.get("calls") for n in stats.get("nodes", {}).values()
                                                 if n.get("role") == "dispatcher"), None),
                          shard_calls=_summed_calls(n.get("calls") for n in stats.get("nodes", {}).values()
                                                    if n.get("role") == "shard"),
                          # CPU seconds by thread group (gensim_distw2v.io.meter.THREAD_GROUPS), summed over
                          # the role's nodes: what grows with the words apart from what each node spends a second
                          worker_threads_cpu=_summed_groups(n.get("thread_cpu") for n in stats.get("nodes", {}).values()
                                                            if n.get("role") == "worker"),
                          shard_threads_cpu=_summed_groups(n.get("thread_cpu") for n in stats.get("nodes", {}).values()
                                                           if n.get("role") == "shard"),
                          # every byte the shards moved (headers, uploads, downloads, merges, heartbeats)
                          shard_traffic=sum(n.get("bytes_sent", 0) + n.get("bytes_received", 0)
                                            for n in stats.get("nodes", {}).values() if n.get("role") == "shard"))
    finally:
        if cluster is not None:
            cluster.close()
    print(json.dumps(result))


def head(source, target, max_words):
    """Copy the first lines of ``source`` to ``target``, up to ``max_words`` words; return the word count."""
    words = 0
    with open(source, encoding="utf8") as fin, open(target, "w", encoding="utf8") as fout:
        for line in fin:
            if words >= max_words:
                break
            words += len(line.split())
            fout.write(line)
    return words


def prepare(args, workdir):
    """Cut the corpus to --max-words, build the vocabulary once (saved for the runs)."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    corpus_path = args.corpus
    if args.max_words:
        corpus_path = os.path.join(workdir, "corpus.txt")
        head(args.corpus, corpus_path, args.max_words)
    model = gensim.models.Word2Vec(vector_size=args.vector_size, min_count=args.min_count)
    model.build_vocab(LineSentence(corpus_path))
    vocab_path = os.path.join(workdir, "vocab.model")
    model.save(vocab_path)
    return vocab_path, corpus_path, model.corpus_total_words, len(model.wv)


def mean(rows, key):
    values = [r[key] for r in rows if key in r]
    return statistics.fmean(values) if values else float("nan")


def paired(rows, refs):
    """Per-seed ratios of raw words/s (each seed's runs follow one another, so the host is alike)
    and their median: ``"per seed 0.87 0.93, median 0.90"``."""
    ratios = [r["raw_wps"] / g["raw_wps"] for r, g in zip(rows, refs)]
    return f"per seed {' '.join(f'{x:.2f}' for x in ratios)}, median {statistics.median(ratios):.2f}"


def quality(rows, refs):
    """``"analogy +0.12 points, ws353 -0.0010, simlex +0.0020"``: mean scores of ``rows`` less those of ``refs``
    (and the known answer's, ``truth analogy`` and ``truth``, where the runs scored it)."""
    text = (f"analogy {100 * (mean(rows, 'analogy') - mean(refs, 'analogy')):+.2f} points, "
            f"ws353 {mean(rows, 'ws353') - mean(refs, 'ws353'):+.4f}, "
            f"simlex {mean(rows, 'simlex') - mean(refs, 'simlex'):+.4f}")
    if any("truth" in r for r in rows):
        text += (f", truth analogy {100 * (mean(rows, 'truth_analogy') - mean(refs, 'truth_analogy')):+.2f} points, "
                 f"truth {mean(rows, 'truth') - mean(refs, 'truth'):+.4f}")
    return text


def results_truth(results):
    """Whether the runs scored a synthetic corpus's known answer (their curves then follow its analogies)."""
    return any("truth" in row for rows in results.values() for row in rows)


def plot(results, ks, directory):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for (mode, k), rows in sorted(results.items()):
        curve = rows[0]["curve"]
        label = f"{mode} K={k}"
        axes[0].plot([p["t"] for p in curve], [p["loss"] for p in curve], marker="o", label=label)
        axes[1].plot([p["t"] for p in curve], [p["analogy"] for p in curve], marker="o", label=label)
    axes[0].set(xlabel="train() seconds", ylabel="training loss (cumulative, per train call)", title="loss")
    axes[1].set(xlabel="train() seconds", ylabel="truth analogy accuracy" if results_truth(results) else
                "analogy accuracy (top 30k words)", title="accuracy")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "loss_accuracy_vs_time.png"), dpi=100)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for mode in MODES:
        if (mode, ks[0]) not in results:
            continue
        base = mean(results[(mode, ks[0])], "raw_wps")
        ax.plot(ks, [mean(results[(mode, k)], "raw_wps") / base for k in ks], marker="o", label=mode)
    ax.plot(ks, [k / ks[0] for k in ks], "k:", label="linear")
    ax.set(xlabel="workers K", ylabel=f"raw words/s over K={ks[0]}", title="speed-up (2-core machine)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "speedup.png"), dpi=100)


def main(argv=None):
    args = parse_args(argv)
    if args.threads_per_worker < 1:
        sys.exit("--threads-per-worker must be >= 1")
    if args._one:
        mode, k, seed, vocab, corpus = args._one
        return run_one(args, mode, int(k), int(seed), vocab, corpus)
    ks = [int(k) for k in args.workers.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        sys.exit(f"unknown modes {sorted(unknown)}; choose from {MODES}")
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("--json")]
    results = {}
    with tempfile.TemporaryDirectory(prefix="compare_gensim_") as workdir:
        vocab_path, corpus_path, words, vocab = prepare(args, workdir)
        print(f"corpus {words} words, vocabulary {vocab}; sg={args.sg} hs={args.hs} epochs={args.epochs} "
              f"seeds={args.seeds} merge={args.merge} threads_per_worker={args.threads_per_worker} "
              f"cold_every={args.cold_every} cold_output_every={args.cold_output_every} "
              f"cold_output_down={args.cold_output_down} damp_output_rows={args.damp_output_rows} "
              f"corpus_file_rate={args.corpus_file_rate} "
              f"sync={args.sync}", flush=True)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for k in ks:
                for mode in modes:
                    out = subprocess.run([sys.executable, os.path.abspath(__file__), *passthrough, "--_one", mode,
                                          str(k), str(seed), vocab_path, corpus_path],
                                         capture_output=True, text=True, check=False)
                    if out.returncode != 0:
                        sys.exit(f"{mode} K={k} seed={seed} failed:\n{out.stderr[-5000:]}")
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    results.setdefault((mode, k), []).append(row)
                    print(f"  seed {seed} K={k} {mode:<9} {row['raw_wps']:>9.0f} raw words/s, {row['seconds']:.1f} s, "
                          f"analogy {row['analogy']:.4f} ws353 {row['ws353']:.4f} simlex {row['simlex']:.4f}"
                          + (f" truth analogy {row['truth_analogy']:.4f} truth {row['truth']:.4f}" if "truth" in row else "")
                          + (f", {row['bytes_up_per_word']:.0f}/{row['bytes_down_per_word']:.0f} B/word up/down, CPU s "
                             + "/".join(f"{role} {row['cpu_seconds'].get(role, 0):.1f}"
                                        for role in ("client", "dispatcher", "shard", "worker"))
                             + f" (shards' merge calls {row['merge_cpu']['shards']:.1f}; workers' kernels "
                               f"{row['kernel_cpu']:.1f}, merge rounds {row['merge_cpu']['workers']:.1f}); "
                               f"{row['raw_words'] / max(1, row['rounds']):.0f} words and a lag of "
                               f"{row['lag_words'] / max(1, row['rounds']):.0f} a round, "
                               f"{row['overlapped'] / max(1, row['rounds']):.0%} landed late"
                             if mode in CLUSTER_MODES else f", CPU s {row['cpu_seconds']['process']:.1f}"), flush=True)
    header = (f"{'mode':<10}{'K':>3}{'train s':>9}{'raw w/s':>10}{'eff w/s':>10}{'speed-up':>9}{'merge s':>9}"
              f"{'B/w up':>8}{'B/w dn':>8}{'RSS MB':>18}{'analogy':>9}{'ws353':>8}{'simlex':>8}"
              + (f"{'t.anal':>9}{'truth':>8}" if args.truth else ""))
    print(f"\nmeans over {args.seeds} seed(s)\n{header}")
    table = []
    for mode in modes:
        for k in ks:
            rows = results[(mode, k)]
            base = mean(results[(mode, ks[0])], "raw_wps")
            rss = rows[-1]["peak_rss_mb"]
            entry = {"mode": mode, "k": k, "seconds": mean(rows, "seconds"), "raw_wps": mean(rows, "raw_wps"),
                     "effective_wps": mean(rows, "effective_wps"), "speedup": mean(rows, "raw_wps") / base,
                     "merge_seconds": mean(rows, "merge_seconds"), "bytes_up_per_word": mean(rows, "bytes_up_per_word"),
                     "bytes_down_per_word": mean(rows, "bytes_down_per_word"), "peak_rss_mb": rss,
                     "analogy": mean(rows, "analogy"), "ws353": mean(rows, "ws353"), "simlex": mean(rows, "simlex")}
            if args.truth:
                entry.update(truth_analogy=mean(rows, "truth_analogy"), truth=mean(rows, "truth"))
            table.append(entry)
            rss_text = "/".join(f"{rss[r]:.0f}" for r in ("client", "dispatcher", "shard", "worker") if r in rss) \
                or f"{rss.get('process', 0):.0f}"
            print(f"{mode:<10}{k:>3}{entry['seconds']:>9.1f}{entry['raw_wps']:>10.0f}{entry['effective_wps']:>10.0f}"
                  f"{entry['speedup']:>9.2f}{entry['merge_seconds']:>9.1f}{entry['bytes_up_per_word']:>8.0f}"
                  f"{entry['bytes_down_per_word']:>8.0f}{rss_text:>18}{entry['analogy']:>9.4f}{entry['ws353']:>8.4f}"
                  f"{entry['simlex']:>8.4f}"
                  + (f"{entry['truth_analogy']:>9.4f}{entry['truth']:>8.4f}" if args.truth else ""))
    print("RSS MB for dist: client/dispatcher/largest shard/largest worker; merge s: worker time in merge rounds (summed over "
          "workers, overlapping training)")
    if "dist_cf" in modes and "gensim_cf" in modes:
        for k in ks:
            d, g = results[("dist_cf", k)], results[("gensim_cf", k)]
            one = results.get(("gensim", 1))
            print(f"K={k}: dist_cf/gensim_cf raw words/s {mean(d, 'raw_wps') / mean(g, 'raw_wps'):.2f} "
                  f"({paired(d, g)}); "
                  f"quality dist_cf-gensim_cf: {quality(d, g)}"
                  + (f"; dist_cf-gensim K=1: {quality(d, one)}" if one else ""))
    if "dist" in modes and "gensim" in modes:
        one = results.get(("gensim", 1))
        for k in ks:
            d, g = results[("dist", k)], results[("gensim", k)]
            cf = results.get(("gensim_cf", k))
            print(f"K={k}: dist/gensim raw words/s {mean(d, 'raw_wps') / mean(g, 'raw_wps'):.2f} ({paired(d, g)})"
                  + (f", dist/gensim_cf {mean(d, 'raw_wps') / mean(cf, 'raw_wps'):.2f} ({paired(d, cf)})" if cf else "")
                  + f"; quality dist-gensim: {quality(d, g)}"
                  + (f"; dist-gensim K=1: {quality(d, one)}" if one and k != 1 else ""))
    if args.plots:
        plot(results, ks, args.plots)
        print(f"plots written to {args.plots}")
    if args.json:
        print(json.dumps({"provenance": provenance(),
                          "args": {k: v for k, v in vars(args).items() if not k.startswith("_")}, "table": table,
                          "runs": {f"{m}:{k}": rows for (m, k), rows in results.items()}}))


if __name__ == "__main__":
    main()
