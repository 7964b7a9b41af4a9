"""A chaos soak: training runs with checkpoints while a seeded schedule kills, freezes and cuts off
the cluster's processes, each fault followed by what a user would do.

The cluster spans "hosts" on this machine (:mod:`netlab`: a head namespace with the name server,
the dispatcher and the client, and ``--hosts`` namespaces with a parameter shard and a worker of
``--threads`` threads each, joined by a bridge), keyed as any cluster beyond loopback must be. A
clean run first (no fault: the quality reference), then runs with faults, one after the other,
until ``--minutes`` have passed (the run under way then finishes without more faults). Every run
trains the same corpus from a ``LineSentence`` (the workers read it) with ``checkpoint_dir`` set
and a checkpoint every ``--checkpoint-every`` seconds; the vocabulary is counted on the cluster.

Faults, one at a time, about every ``--every`` seconds after the last one was answered, in blocks
that each pair every kind with a target (each target once a block; seeded: ``--seed``), on a
worker, a shard, the dispatcher or the client:

``kill``
    SIGKILL; the user starts it again a few seconds later (the client: ``train(...,
    resume_from=DIR)``, after building the vocabulary again).
``freeze``
    SIGSTOP, then SIGCONT after 1 s to three times the dispatcher's ``--worker-timeout``.
``hang``
    SIGSTOP, and after 5-20 s the user gives up on it: SIGKILL, and starts it again.
``cut``
    the host's link to the switch taken down for 2-30 s (a worker's host: its worker and its shard;
    the head: the name server, the dispatcher and the client), then up again.

A process that exits on its own, or a client whose ``train()`` raises, is started again as a user
would (the client resuming from the checkpoint folder; with nothing to resume from, anew). Reported:
faults by kind and target, runs finished, words counted once against the corpus's (``train()``'s
return), words trained again after a fault (the progress a new
session starts below the last one's: at most a checkpoint interval's words and the rounds in
flight, as ``docs/checkpoints.rst`` says), the longest time without progress, processes that died
on their own, and quality against the clean run. Linux and root only (``ip``); elsewhere it prints
why and exits 0. Every namespace it creates is deleted, also on failure.

    sudo python benchmarks/chaos.py --corpus devmix.txt --max-words 3000000 --minutes 10 --json
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netlab  # noqa: E402 - a sibling module: the hosts (network namespaces)

KINDS = ("kill", "freeze", "hang", "cut")
TARGETS = ("worker", "shard", "dispatcher", "client")
CLIENT_FAILED = 3  # the client's exit code when train() or build_vocab() raised


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line, tokens separated by spaces")
    parser.add_argument("--max-words", type=int, default=3_000_000, help="use the first lines up to this many words")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--sg", type=int, default=1, choices=(0, 1))
    parser.add_argument("--hosts", type=int, default=3, help="worker hosts (a worker and a shard each)")
    parser.add_argument("--threads", type=int, default=2, help="trainer threads of each worker")
    parser.add_argument("--minutes", type=float, default=10.0, help="faults are injected for this long")
    parser.add_argument("--every", type=float, default=15.0, help="mean seconds between faults (one at a time)")
    parser.add_argument("--seed", type=int, default=1, help="the fault schedule's seed (training: seed 1)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"subset of {','.join(KINDS)}")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"subset of {','.join(TARGETS)}")
    parser.add_argument("--checkpoint-every", type=float, default=10.0, help="seconds between timed checkpoints")
    parser.add_argument("--worker-timeout", type=float, default=5.0, help="the dispatcher drops a silent member then")
    parser.add_argument("--client-timeout", type=float, default=15.0,
                        help="the dispatcher ends a session whose client is silent this long")
    parser.add_argument("--run-deadline", type=float, default=900.0,
                        help="a run not finished after this many seconds counts as hung, and the soak stops")
    parser.add_argument("--logs", help="write every process's output to this folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--_soak", help=argparse.SUPPRESS)
    parser.add_argument("--_client", nargs=4, metavar=("CORPUS", "FOLDER", "OUT", "RESUME"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------------- the client (head namespace)
def run_client(args, corpus, folder, out, resume):
    """One attempt of the user's script: build the vocabulary on the cluster and train, resuming from
    ``folder`` if ``resume`` (with nothing to resume from, anew); waits while the dispatcher still
    holds the run's last session (its client was killed). Exits CLIENT_FAILED if anything raised."""
    import logging

    from gensim.models.word2vec import LineSentence

    from gensim_distw2v import Word2Vec
    from gensim_distw2v.protocol import errors

    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=logging.WARNING)
    ns_conf = {"host": netlab.address(-1), "port": netlab.PORT, "hmac_key": netlab.KEY}
    sentences = LineSentence(corpus)
    began = time.perf_counter()
    while True:
        model = Word2Vec(distributed=True, ns_conf=ns_conf, sg=args.sg, vector_size=100, min_count=5,
                         epochs=args.epochs, seed=1, workers=1, checkpoint_dir=folder,
                         checkpoint_every=args.checkpoint_every, cluster_timeout=60.0)
        try:
            model.build_vocab(sentences)
            trained = model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs,
                                  **({"resume_from": folder} if resume else {}))
            break
        except Exception as err:  # noqa: BLE001 - the user reads the error and does what it says
            text, code = f"{type(err).__name__}: {err}", getattr(err, "code", None)
            if code is errors.Code.BUSY and time.perf_counter() - began < 600:
                print(f"client: {text[:200]} -- waiting", file=sys.stderr, flush=True)
                time.sleep(2.0)
                continue
            if resume and code is errors.Code.NO_CHECKPOINT:
                print(f"client: {text[:200]} -- starting anew", file=sys.stderr, flush=True)
                resume = False
                continue
            print(f"client failed: {text}", file=sys.stderr, flush=True)
            sys.exit(CLIENT_FAILED)
    model.wv.save(out + ".kv")
    stats = model.cluster_stats
    with open(out, "w") as fout:
        json.dump({"effective": trained[0], "trained": trained[1], "seconds": time.perf_counter() - began,
                   "resumes": stats.get("resumes", 0), "words": stats.get("words")}, fout)


# ---------------------------------------------------------------------- the soak (head namespace)
class Fleet:
    """The cluster's processes by name, started, faulted and started again from one thread (a child
    dies with the thread that started it)."""

    def __init__(self, spec, args):
        self.spec, self.args = spec, args
        self.env = dict(os.environ, PYRO_HMAC_KEY=netlab.KEY, GENSIM_DISTW2V_HMAC_KEY=netlab.KEY,
                        PYRO_SERIALIZERS_ACCEPTED="serpent", PYTHONUNBUFFERED="1")
        common = ["--ns-host", netlab.address(-1), "--ns-port", str(netlab.PORT)]
        head = spec["head"]
        self.commands = {
            "nameserver": (head, ["-m", "gensim_distw2v.nameserver", "-n", netlab.address(-1), "-p",
                                  str(netlab.PORT)], "ready at"),
            "dispatcher": (head, ["-m", "gensim_distw2v.dispatcher", "--host", netlab.address(-1), "--worker-timeout",
                                  str(args.worker_timeout), "--client-timeout", str(args.client_timeout)] + common,
                           "ready at")}
        for i, ns in enumerate(spec["hosts"]):
            self.commands[f"shard-{i}"] = (ns, ["-m", "gensim_distw2v.shard", "--host", netlab.address(i)] + common,
                                           "ready at")
            self.commands[f"worker-{i}"] = (ns, ["-m", "gensim_distw2v.worker", "--host", netlab.address(i),
                                                 "--threads", str(args.threads)] + common, "ready at")
        self.procs, self.expected_exit = {}, set()
        self.logs = {}  # name -> output lines of its earlier processes

    def start(self, name, wait=True):
        from gensim_distw2v.client.cluster import ManagedProcess

        ns, argv, ready = self.commands[name]
        if name in self.procs:
            self.logs.setdefault(name, []).extend(self.procs[name].lines)
        proc = self.procs[name] = ManagedProcess(name, ["ip", "netns", "exec", ns, sys.executable, "-P"] + argv,
                                                 env=self.env)
        self.expected_exit.discard(name)
        if wait:
            proc.wait_for(ready, timeout=120)
        return proc

    def signal(self, name, sig):
        proc = self.procs[name]
        if sig == signal.SIGKILL:
            self.expected_exit.add(name)
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            proc.proc.wait()

    def died(self):
        """Names of processes that exited without being killed here."""
        return [name for name, proc in self.procs.items() if not proc.alive() and name not in self.expected_exit]

    def close(self, logs=None):
        for name, proc in reversed(list(self.procs.items())):
            try:
                os.kill(proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            proc.stop()
        if logs:
            os.makedirs(logs, exist_ok=True)
            for name, proc in self.procs.items():
                with open(os.path.join(logs, f"{name}.log"), "w") as fout:
                    fout.write("\n".join(self.logs.get(name, []) + ["---- the last process:"] + proc.lines) + "\n")


class Progress:
    """The dispatcher's view of the run, polled: words of the session under way, words trained again
    when a new session starts below where the last one got, and the longest time without progress."""

    def __init__(self, ns_conf):
        self.ns_conf = ns_conf
        self.probe, self.session, self.words, self.best = None, None, 0, 0
        self.retrained, self.sessions = 0, 0
        self.last_gain = self.started = time.monotonic()
        self.longest_stall = 0.0

    def poll(self):
        from gensim_distw2v.client.links import find_dispatcher

        try:
            if self.probe is None:
                self.probe = find_dispatcher(self.ns_conf, timeout=1.0)
            session = self.probe.send("status", {})["session"]
            if session is None or session["state"] != "running":
                return
            words = sum(e["raw_words"] for e in self.probe.send("progress", {"session": session["id"]})
                        ["epochs"].values())
        except Exception:  # noqa: BLE001 - a dispatcher down or cut off: poll again later
            self.probe = None
            return
        now = time.monotonic()
        if session["id"] != self.session:
            self.session, self.sessions = session["id"], self.sessions + 1
            if words < self.best:
                self.retrained += self.best - words
        if words > self.best:
            self.longest_stall = max(self.longest_stall, now - self.last_gain)
            self.best, self.last_gain = words, now
        self.words = words

    def stalled(self):
        return time.monotonic() - self.last_gain


class Soak:
    """The clean run and the faulted runs (see the module's docstring)."""

    def __init__(self, spec, args):
        self.spec, self.args = spec, args
        self.rng = random.Random(args.seed)
        self.kinds = [k for k in args.kinds.split(",") if k]
        self.targets = [t for t in args.targets.split(",") if t]
        self.fleet = Fleet(spec, args)
        self.faults, self.runs = [], []
        self.self_exits = []
        self.plan, self.blocks = [], 0  # the faults to come: blocks that each cover every kind and target

    def _block(self):
        """The next block of faults: every kind and every target at least once, in a seeded order (a
        soak of a few faults still covers them all)."""
        n = max(len(self.kinds), len(self.targets))
        block = [(self.kinds[i % len(self.kinds)], self.targets[(i + self.blocks) % len(self.targets)])
                 for i in range(n)]
        self.blocks += 1
        self.rng.shuffle(block)
        return block

    def client(self, folder, out, resume):
        from gensim_distw2v.client.cluster import ManagedProcess

        self.fleet.expected_exit.discard("client")
        if "client" in self.fleet.procs:
            self.fleet.logs.setdefault("client", []).extend(self.fleet.procs["client"].lines)
        proc = self.fleet.procs["client"] = ManagedProcess(
            "client", ["ip", "netns", "exec", self.spec["head"], sys.executable, "-P", os.path.abspath(__file__),
                       *self.spec["argv"], "--_client", self.spec["corpus"], folder, out, str(int(resume))],
            env=self.fleet.env)
        return proc

    def _fault(self, run):
        """One fault and the user's answer to it: a list of ``(due, action, what)`` still to do."""
        if not self.plan:
            self.plan = self._block()
        kind, target = self.plan.pop(0)
        host = self.rng.randrange(len(self.spec["hosts"]))
        name = {"worker": f"worker-{host}", "shard": f"shard-{host}"}.get(target, target)
        now, later = time.monotonic(), []
        record = {"t": now - self.t0, "kind": kind, "target": target}
        if kind == "cut":
            device = self.spec["devices"]["head" if target in ("dispatcher", "client") else str(host)]
            record["host"] = "head" if target in ("dispatcher", "client") else f"host-{host}"
            seconds = self.rng.uniform(2, 30)
            self._link(device, "down")
            later.append((now + seconds, lambda: self._link(device, "up"), "link up"))
        else:
            record["process"] = name
            if kind == "kill":
                self.fleet.signal(name, signal.SIGKILL)
                seconds = self.rng.uniform(1, 5)
                later.append((now + seconds, lambda: self._restart(name, run), "started again"))
            elif kind == "freeze":
                seconds = self.rng.uniform(1, 3 * self.args.worker_timeout)
                self.fleet.signal(name, signal.SIGSTOP)
                later.append((now + seconds, lambda: self.fleet.signal(name, signal.SIGCONT), "continued"))
            else:  # hang
                seconds = self.rng.uniform(5, 20)
                self.fleet.signal(name, signal.SIGSTOP)
                later.append((now + seconds, lambda: self.fleet.signal(name, signal.SIGKILL), "killed"))
                later.append((now + seconds + self.rng.uniform(1, 3), lambda: self._restart(name, run),
                              "started again"))
        record["seconds"] = seconds
        self.faults.append(record)
        print(f"  {record['t']:7.1f} s  {kind:6s} {target:10s} {record.get('process', record.get('host'))} "
              f"for {seconds:.1f} s", flush=True)
        return later

    def _link(self, device, state):
        subprocess.run(["ip", "-n", self.spec["switch"], "link", "set", device, state], check=True,
                       capture_output=True, timeout=30)

    def _restart(self, name, run):
        if name == "client":
            run["attempts"] += 1
            self.client(run["folder"], run["out"], resume=True)
        else:
            self.fleet.start(name, wait=False)

    def run(self, index, faulted):
        """One training run; with ``faulted``, faults until the soak's time is up."""
        folder = os.path.join(self.spec["workdir"], f"run-{index}")
        out = os.path.join(self.spec["workdir"], f"run-{index}.json")
        os.makedirs(folder)
        run = {"folder": folder, "out": out, "attempts": 1, "raised": 0}
        progress = Progress({"host": netlab.address(-1), "port": netlab.PORT, "hmac_key": netlab.KEY})
        began = time.monotonic()
        self.client(folder, out, resume=False)
        pending, next_fault, faults_before = [], began + self.rng.uniform(0.5, 1.5) * self.args.every, len(self.faults)
        answered = None  # (the fault, when the user's last answer to it was done, the words then)
        while True:
            time.sleep(0.2)
            now = time.monotonic()
            progress.poll()
            for item in [p for p in pending if p[0] <= now]:
                pending.remove(item)
                item[1]()
                if not pending:
                    answered = (self.faults[-1], now, progress.best)
            if answered and progress.best > answered[2]:  # training again: the fault's recovery
                answered[0]["recovery"] = now - answered[1]
                answered = None
            client = self.fleet.procs["client"]
            if not pending and not client.alive() and "client" not in self.fleet.expected_exit:
                if client.proc.returncode == 0:
                    break
                run["attempts"] += 1
                run["raised"] += 1  # train() or build_vocab() raised: the user had to call it again
                print(f"  {now - self.t0:7.1f} s  the client stopped ({client.tail(1)[-300:]}): started again",
                      flush=True)
                self.client(folder, out, resume=True)
            for name in self.fleet.died():
                if name == "client":
                    continue
                self.self_exits.append({"t": now - self.t0, "process": name, "tail": self.fleet.procs[name].tail(5)})
                print(f"  {now - self.t0:7.1f} s  {name} exited on its own: started again", flush=True)
                self.fleet.start(name, wait=False)
            if faulted and not pending and now >= next_fault and now < self.until:
                answered = None  # a fault not recovered from before the next keeps no recovery
                pending = self._fault(run)
                next_fault = max(p[0] for p in pending) + self.rng.uniform(0.5, 1.5) * self.args.every
            if now - began > self.args.run_deadline:
                raise RuntimeError(f"run {index} did not finish within {self.args.run_deadline:.0f} s; the client's "
                                   f"last lines:\n{client.tail(20)}")
        with open(out) as fin:
            result = json.load(fin)
        result.update(index=index, faulted=faulted, wall=time.monotonic() - began, attempts=run["attempts"],
                      raised=run["raised"], faults=len(self.faults) - faults_before, sessions=progress.sessions,
                      retrained=progress.retrained, longest_stall=progress.longest_stall,
                      progress_words=progress.best, **evaluate(out + ".kv"))
        shutil.rmtree(folder, ignore_errors=True)
        return result

    def main(self):
        fleet = self.fleet
        try:
            for name in fleet.commands:
                fleet.start(name)
            for role in ("workers", "shards"):
                fleet.procs["dispatcher"].wait_for(rf"\({len(self.spec['hosts'])} {role}\)", timeout=120)
            self.t0 = time.monotonic()
            self.until = float("inf")
            clean = self.run(0, faulted=False)
            print(f"clean run: {clean['wall']:.1f} s, analogy {clean['analogy']:.4f} ws353 {clean['ws353']:.4f} "
                  f"simlex {clean['simlex']:.4f}", flush=True)
            self.runs.append(clean)
            self.t0 = time.monotonic()
            self.until = self.t0 + 60 * self.args.minutes
            index = 1
            while time.monotonic() < self.until:
                result = self.run(index, faulted=True)
                print(f"run {index}: {result['wall']:.1f} s, {result['faults']} faults, {result['attempts']} client "
                      f"attempts, {result['sessions']} sessions, trained {result['trained']:,} "
                      f"(progress {result['progress_words']:,}), again {result['retrained']:,}, longest stall "
                      f"{result['longest_stall']:.1f} s; analogy {result['analogy']:.4f} ws353 {result['ws353']:.4f} "
                      f"simlex {result['simlex']:.4f}", flush=True)
                self.runs.append(result)
                index += 1
        finally:
            fleet.close(self.args.logs)
        return {"faults": self.faults, "runs": self.runs, "self_exits": self.self_exits}


def evaluate(path):
    from gensim.models import KeyedVectors
    from gensim.test.utils import datapath

    wv = KeyedVectors.load(path)
    return {"analogy": wv.evaluate_word_analogies(datapath("questions-words.txt"), restrict_vocab=30000)[0],
            "ws353": wv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0],
            "simlex": wv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0]}


# ---------------------------------------------------------------------- the report (outside)
def summarise(args, words, soak):
    """The figures the module's docstring promises, from the soak's record."""
    runs, faults = soak["runs"], soak["faults"]
    clean, faulted = runs[0], runs[1:]
    expected = args.epochs * words
    recoveries = [f["recovery"] for f in faults if f.get("recovery") is not None]
    by = {}
    for fault in faults:
        key = f"{fault['kind']} {fault['target']}"
        by[key] = by.get(key, 0) + 1
    mean = {key: statistics.mean(r[key] for r in faulted) if faulted else float("nan")
            for key in ("analogy", "ws353", "simlex")}
    worst = {key: min(r[key] - clean[key] for r in faulted) if faulted else float("nan")
             for key in ("analogy", "ws353", "simlex")}
    return {
        "words": words, "epochs": args.epochs, "expected": expected, "faults": len(faults), "by_kind": by,
        "kinds": {kind: sum(1 for f in faults if f["kind"] == kind) for kind in KINDS},
        "targets": {target: sum(1 for f in faults if f["target"] == target) for target in TARGETS},
        "runs_finished": len(faulted), "clean_seconds": clean["wall"],
        "faulted_seconds": statistics.median(r["wall"] for r in faulted) if faulted else float("nan"),
        "every_word_once": all(r["trained"] == expected for r in runs),
        "retrained_words": sum(r["retrained"] for r in faulted),
        "retrained_per_fault": sum(r["retrained"] for r in faulted) / max(1, len(faults)),
        "retrained_most_in_a_run": max((r["retrained"] for r in faulted), default=0),
        # what a checkpoint interval trains, at the clean run's speed: the most a fault should cost again
        "checkpoint_interval_words": args.checkpoint_every * expected / clean["wall"],
        "retrained_within_bound": all(r["retrained"] <= max(1, r["faults"]) * args.checkpoint_every * expected
                                      / clean["wall"] for r in faulted),
        "longest_stall": max((r["longest_stall"] for r in faulted), default=0.0),
        # from the user's last answer to a fault (a process started again, a link up) to training again
        "recovery_median": statistics.median(recoveries) if recoveries else float("nan"),
        "recovery_longest": max(recoveries, default=float("nan")),
        "recovered": len(recoveries),
        "client_attempts": sum(r["attempts"] for r in faulted), "self_exits": len(soak["self_exits"]),
        "client_raised": sum(r.get("raised", 0) for r in faulted),
        "quality_clean": {key: clean[key] for key in ("analogy", "ws353", "simlex")},
        "quality_delta_mean": {key: mean[key] - clean[key] for key in mean}, "quality_delta_worst": worst}


def main(argv=None):
    args = parse_args(argv)
    if args._client:
        corpus, folder, out, resume = args._client
        return run_client(args, corpus, folder, out, resume == "1")
    if args._soak:
        with open(args._soak) as fin:
            spec = json.load(fin)
        result = Soak(spec, args).main()
        with open(spec["result"], "w") as fout:
            json.dump(result, fout)
        return None
    why = netlab.missing()
    if why:
        print(f"chaos.py: {why}; nothing run")
        return None
    from compare_gensim import head
    from provenance import provenance

    passthrough = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--json"]
    with tempfile.TemporaryDirectory(prefix="chaos_") as workdir, netlab.Network(args.hosts) as net:
        corpus = os.path.join(workdir, "corpus.txt")
        words = head(args.corpus, corpus, args.max_words)
        spec = {"head": net.head, "hosts": net.workers, "switch": net.switch, "workdir": workdir, "corpus": corpus,
                "result": os.path.join(workdir, "result.json"), "argv": passthrough,
                "devices": {"head": f"{net.tag}ho", **{str(i): f"{net.tag}w{i}o" for i in range(args.hosts)}}}
        spec_path = os.path.join(workdir, "spec.json")
        with open(spec_path, "w") as fout:
            json.dump(spec, fout)
        print(f"corpus {words:,} words x {args.epochs} epochs; {args.hosts} hosts of a worker ({args.threads} threads) "
              f"and a shard; faults for {args.minutes:g} min, about every {args.every:g} s, seed {args.seed}",
              flush=True)
        done = subprocess.run(["ip", "netns", "exec", net.head, sys.executable, "-P", os.path.abspath(__file__),
                               *passthrough, "--_soak", spec_path], check=False)
        if done.returncode:
            sys.exit(f"the soak failed (exit {done.returncode})")
        with open(spec["result"]) as fin:
            soak = json.load(fin)
    summary = summarise(args, words, soak)
    print()
    print(f"{summary['faults']} faults ({', '.join(f'{k} {n}' for k, n in summary['kinds'].items())}; "
          f"{', '.join(f'{t} {n}' for t, n in summary['targets'].items())}), {summary['runs_finished']} faulted runs "
          f"finished, median {summary['faulted_seconds']:.0f} s against {summary['clean_seconds']:.0f} s clean")
    print(f"every word counted once in every run: {summary['every_word_once']}; trained again after faults: "
          f"{summary['retrained_words']:,} words ({summary['retrained_per_fault']:,.0f} a fault, at most "
          f"{summary['retrained_most_in_a_run']:,} in a run; a checkpoint interval trains "
          f"{summary['checkpoint_interval_words']:,.0f}: within it a fault in every run "
          f"{summary['retrained_within_bound']}); longest stall {summary['longest_stall']:.1f} s; training again "
          f"{summary['recovery_median']:.1f} s after the user's answer to a fault (median; the longest "
          f"{summary['recovery_longest']:.1f} s, {summary['recovered']} faults recovered from before the next); "
          f"processes that exited on their own: {summary['self_exits']}")
    d, w = summary["quality_delta_mean"], summary["quality_delta_worst"]
    print(f"quality, faulted runs' mean - clean: analogy {100 * d['analogy']:+.2f} points, ws353 {d['ws353']:+.3f}, "
          f"simlex {d['simlex']:+.3f} (worst run {100 * w['analogy']:+.2f} / {w['ws353']:+.3f} / {w['simlex']:+.3f}; "
          f"targets 1.5 points / 0.02)")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": {k: v for k, v in vars(args).items()
                                                                if not k.startswith("_")},
                          "summary": summary, **soak}))
    return None


if __name__ == "__main__":
    main()
