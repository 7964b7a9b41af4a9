"""A cluster that loses a worker (and gains one), or its dispatcher, against the same cluster without faults.

Runs a LocalCluster of 3 workers x 1 thread, each run in a fresh process. ``--fault worker`` (the
default): a clean run, and a faulty run in which one worker is killed (SIGKILL) once 30 % of the
words are trained and a new worker is started at 60 %. ``--fault dispatcher``: a clean run, the same
with checkpoints (``checkpoint_dir``, the default interval: their cost), and a faulty run with
checkpoints whose dispatcher is killed (SIGKILL) at 40 % and started again at once: the client waits
for it and resumes from the last checkpoint. Progress is read from the dispatcher (words whose
updates are merged), so the faults land at the same point whatever the machine's speed. Prints
trained words against expected, train() wall time against the clean run, and quality (analogy,
ws353, simlex999) against the clean run; medians over repeats. Targets: trained words = expected;
quality within 1.5 analogy points and 0.02 Spearman of the clean run; wall time <= 1.5x the clean
run (a worker lost), <= 1.3x plus the restart time (the dispatcher lost); checkpoints <= 2 % of the
wall time.

    python benchmarks/faults.py --corpus devmix.txt --max-words 2000000 --epochs 3 --repeats 3
    python benchmarks/faults.py --corpus devmix.txt --max-words 2000000 --epochs 3 --repeats 3 --fault dispatcher --kill-at 0.4
"""
import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line, tokens separated by spaces")
    parser.add_argument("--max-words", type=int, default=2_000_000, help="use the first lines up to this many words")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--sg", type=int, default=1, choices=(0, 1))
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--fault", choices=("worker", "dispatcher"), default="worker",
                        help="what dies: a worker (and one joins later), or the dispatcher (restarted at once)")
    parser.add_argument("--kill-at", type=float, default=0.3, help="share of the words trained when it dies")
    parser.add_argument("--add-at", type=float, default=0.6, help="share of the words trained when a worker joins")
    parser.add_argument("--worker-timeout", type=float, default=5.0, help="the dispatcher drops a silent worker then")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--_one", nargs=2, metavar=("KIND", "CORPUS"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def evaluate(wv):
    from gensim.test.utils import datapath

    return {"analogy": wv.evaluate_word_analogies(datapath("questions-words.txt"))[0],
            "ws353": wv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0],
            "simlex": wv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0]}


def faults(cluster, total_words, kill_at, add_at, events, stop, fault="worker"):
    """Watch the dispatcher; kill ``worker-1`` at ``kill_at`` of the words, start a worker at ``add_at``
    (or, ``fault="dispatcher"``, kill the dispatcher at ``kill_at`` and start it again)."""
    from gensim_distw2v.client.training import find_dispatcher

    probe = find_dispatcher(cluster.ns_conf)
    killed = added = False
    while not stop.wait(0.05) and not added:
        session = probe.send("status", {})["session"]
        if session is None or session["state"] != "running":
            continue
        done = sum(e["raw_words"] for e in probe.send("progress", {"session": session["id"]})["epochs"].values()) / total_words
        if fault == "dispatcher" and done >= kill_at:
            os.kill(cluster.processes["dispatcher"].pid, signal.SIGKILL)
            killed_at = time.perf_counter()
            events.append({"event": "killed the dispatcher", "at": done, "t": killed_at})
            cluster.processes["dispatcher"].proc.wait()
            cluster.start_dispatcher()
            events.append({"event": "dispatcher ready again", "at": done, "t": time.perf_counter(),
                           "restart_seconds": time.perf_counter() - killed_at})
            stop.wait()  # the new dispatcher dies with the thread that started it (cluster._die_with_parent)
            return
        if not killed and done >= kill_at:
            os.kill(cluster.processes["worker-1"].pid, signal.SIGKILL)
            events.append({"event": "killed worker-1", "at": done, "t": time.perf_counter()})
            killed = True
        elif killed and done >= add_at:
            cluster.add_worker(wait=False)
            events.append({"event": "started a worker", "at": done, "t": time.perf_counter()})
            added = True
    stop.wait()  # a process started here dies with this thread (cluster._die_with_parent)


def run_one(args, kind, corpus_path):
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v import LocalCluster, Word2Vec

    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=logging.WARNING)
    sentences = list(LineSentence(corpus_path))
    expected = args.epochs * sum(len(s) for s in sentences)
    checkpoints = tempfile.mkdtemp(prefix="faults-checkpoints-") if kind != "clean" and args.fault == "dispatcher" \
        else None
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, worker_timeout=args.worker_timeout) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, sg=args.sg, vector_size=100, min_count=5,
                         epochs=args.epochs, seed=1, workers=1, checkpoint_dir=checkpoints)
        model.build_vocab(sentences)
        events, stop = [], threading.Event()
        watcher = None
        if kind == "faulty":
            watcher = threading.Thread(target=faults, args=(cluster, expected, args.kill_at, args.add_at, events,
                                                            stop, args.fault), daemon=True)
            watcher.start()
        start = time.perf_counter()
        _effective, raw = model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs)
        seconds = time.perf_counter() - start
        stop.set()
        lost = [line for line in cluster.processes["dispatcher"].lines if " lost (" in line or "resumes run" in line]
    if checkpoints:
        shutil.rmtree(checkpoints, ignore_errors=True)
    for event in events:
        event["t"] -= start
    print(json.dumps({"kind": kind, "seconds": seconds, "trained": raw, "expected": expected, "events": events,
                      "lost": lost, "workers": sorted(model.cluster_stats["workers"]),
                      "checkpoints": model.cluster_stats.get("checkpoints"),
                      "checkpoint_wait": model.cluster_stats.get("checkpoint_wait", 0.0), **evaluate(model.wv)}))


def main():
    args = parse_args()
    if args._one:
        run_one(args, *args._one)
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare_gensim import head
    from provenance import provenance

    with tempfile.TemporaryDirectory() as workdir:
        corpus_path = os.path.join(workdir, "corpus.txt")
        words = head(args.corpus, corpus_path, args.max_words)
        kinds = ("clean", "checkpointed", "faulty") if args.fault == "dispatcher" else ("clean", "faulty")
        runs = {kind: [] for kind in kinds}
        for repeat in range(args.repeats):
            for kind in kinds:  # interleaved: the machine's drift hits them alike
                done = subprocess.run([sys.executable, "-P", os.path.abspath(__file__), "--_one", kind, corpus_path]
                                      + sys.argv[1:], capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{kind} run failed:\n{done.stderr[-4000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                runs[kind].append(result)
                print(f"repeat {repeat + 1} {kind:12s}: {result['seconds']:.1f} s, trained {result['trained']:,} of "
                      f"{result['expected']:,} words; analogy {result['analogy']:.4f} ws353 {result['ws353']:.4f} "
                      f"simlex {result['simlex']:.4f}; events {[(e['event'], round(e['at'], 2)) for e in result['events']]}",
                      flush=True)
    med = {kind: {key: statistics.median(r[key] for r in rows) for key in ("seconds", "analogy", "ws353", "simlex")}
           for kind, rows in runs.items()}
    exact = all(r["trained"] == r["expected"] for r in runs["faulty"])
    all_events = all(len(r["events"]) == 2 and len(r["lost"]) >= 1 for r in runs["faulty"])
    ratio = med["faulty"]["seconds"] / med["clean"]["seconds"]
    d = {key: med["faulty"][key] - med["clean"][key] for key in ("analogy", "ws353", "simlex")}
    out = {"fault": args.fault, "workers": args.workers, "words": words, "epochs": args.epochs, "sg": args.sg,
           "repeats": args.repeats, "runs": runs, "medians": med, "exact": exact, "faults_happened": all_events,
           "time_ratio": ratio, "quality_delta": d}
    print()
    print(f"{args.workers} workers, {words:,} words x {args.epochs} epochs, medians of {args.repeats} repeats")
    print(f"trained words = expected in every faulty run: {exact} (the faults happened: {all_events})")
    if args.fault == "dispatcher":
        restart = statistics.median(e["restart_seconds"] for r in runs["faulty"] for e in r["events"]
                                    if "restart_seconds" in e)
        out["restart_seconds"] = restart
        out["time_ratio_less_restart"] = (med["faulty"]["seconds"] - restart) / med["clean"]["seconds"]
        print(f"wall time faulty / clean: {ratio:.2f} ({med['faulty']['seconds']:.1f} s / "
              f"{med['clean']['seconds']:.1f} s), less the restart ({restart:.1f} s): "
              f"{out['time_ratio_less_restart']:.2f} (target <= 1.3)")
        rows = [r for r in runs["checkpointed"] if r.get("checkpoints")]
        stats = [r["checkpoints"] for r in rows]
        cost = med["checkpointed"]["seconds"] / med["clean"]["seconds"] - 1
        per = {key: statistics.median(s[key] / max(1, s["count"]) for s in stats) for key in ("seconds", "bytes")}
        # what checkpoints take from training: the client's waits at epoch ends (every shard copies its
        # rows), and the copies themselves (a shard's merges wait for its copy)
        stalled = statistics.median((r["checkpoint_wait"] + r["checkpoints"]["copy_seconds"]) / r["seconds"]
                                    for r in rows)
        out["checkpoint_cost"] = {"wall_ratio_minus_one": cost, "stalled_share": stalled, "per_checkpoint": per,
                                  "count": statistics.median(s["count"] for s in stats)}
        print(f"checkpoints (default interval: at epoch ends): {out['checkpoint_cost']['count']:.0f} a run, "
              f"{per['bytes'] / 1e6:.1f} MB and {per['seconds']:.2f} s each from order to commit; training stalled "
              f"for them {100 * stalled:.2f} % of the wall time (target <= 2 %); wall time with them / without: "
              f"{1 + cost:.3f} (run-to-run noise included)")
    else:
        print(f"wall time faulty / clean: {ratio:.2f} ({med['faulty']['seconds']:.1f} s / "
              f"{med['clean']['seconds']:.1f} s; target <= 1.5)")
    print(f"quality faulty - clean: analogy {100 * d['analogy']:+.2f} points, ws353 {d['ws353']:+.3f}, "
          f"simlex {d['simlex']:+.3f} (targets: within 1.5 points / 0.02)")
    if args.json:
        print(json.dumps({"provenance": provenance(), **out}))


if __name__ == "__main__":
    main()
