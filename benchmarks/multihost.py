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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from provenance import provenance  # noqa: E402 - a sibling module
from compare_gensim import evaluate, head  # noqa: E402 - the benchmarks share these

SUBNET = "10.233.0"
KEY = "multihost benchmark key"
PORT = 9090


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


def missing_requirements():
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the {tool} command is missing (Debian: apt-get install iproute2)"
    return None


def params(args):
    return dict(vector_size=100, min_count=5, sg=args.sg, negative=5, epochs=args.epochs, seed=args.seed)


def run_client(args, corpus, rule, out):
    """In the head namespace: train through the cluster, write a JSON result."""
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v import Word2Vec

    sentences = list(LineSentence(corpus))
    model = Word2Vec(distributed=True, ns_conf={"host": f"{SUBNET}.1", "port": PORT, "hmac_key": KEY}, merge=rule,
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


class Network:
    """A switch namespace with a bridge, a head namespace and K worker namespaces, links shaped."""

    def __init__(self, k, rate):
        self.tag = f"gmh{os.getpid() % 10000}"
        self.k, self.rate = k, rate
        self.namespaces = []
        self.devices = {}  # namespace -> its NIC

    def ip(self, *args):
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def shape(self, ns, dev):
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
                        "burst", "512kb", "latency", "20ms"], check=True, capture_output=True, timeout=30)

    def host(self, name, address):
        ns = f"{self.tag}{name}"
        self.ip("netns", "add", ns)
        self.namespaces.append(ns)
        inner, outer = f"{self.tag}{name}i", f"{self.tag}{name}o"
        self.devices[ns] = inner
        self.ip("link", "add", inner, "type", "veth", "peer", "name", outer)
        self.ip("link", "set", inner, "netns", ns)
        self.ip("link", "set", outer, "netns", self.switch)
        self.ip("-n", self.switch, "link", "set", outer, "master", "br0")
        self.ip("-n", ns, "addr", "add", f"{address}/24", "dev", inner)
        for where, dev in ((ns, inner), (self.switch, outer)):
            self.ip("-n", where, "link", "set", dev, "up")
            self.shape(where, dev)  # host -> switch and switch -> host: 1 Gbit/s each way
        self.ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def counters(self, ns):
        """``(bytes received, bytes sent)`` on a host's NIC so far."""
        out = subprocess.run(["ip", "-n", ns, "-j", "-s", "link", "show", "dev", self.devices[ns]], check=True,
                             capture_output=True, text=True, timeout=30).stdout
        stats = json.loads(out)[0]["stats64"]
        return stats["rx"]["bytes"], stats["tx"]["bytes"]

    def __enter__(self):
        try:
            self.switch = f"{self.tag}sw"
            self.ip("netns", "add", self.switch)
            self.namespaces.append(self.switch)
            self.ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            self.ip("-n", self.switch, "link", "set", "br0", "up")
            self.head = self.host("h", f"{SUBNET}.1")
            self.workers = [self.host(f"w{i}", f"{SUBNET}.{10 + i}") for i in range(self.k)]
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)  # takes its veth ends along
        self.namespaces = []


def run_cluster(args, k, rule, corpus, workdir):
    from gensim_distw2v.client.cluster import ManagedProcess

    env = dict(os.environ, PYRO_HMAC_KEY=KEY, PYRO_SERIALIZERS_ACCEPTED="serpent", PYTHONUNBUFFERED="1")
    env["GENSIM_DISTW2V_HMAC_KEY"] = KEY
    py = [sys.executable, "-P"]
    common = ["--ns-host", f"{SUBNET}.1", "--ns-port", str(PORT)]
    procs = []
    with Network(k, args.rate) as net:
        def start(name, ns, argv, ready):
            proc = ManagedProcess(name, ["ip", "netns", "exec", ns] + py + argv, env=env)
            procs.append(proc)
            proc.wait_for(ready, timeout=120)
            return proc

        try:
            start("nameserver", net.head, ["-m", "gensim_distw2v.nameserver", "-n", f"{SUBNET}.1", "-p", str(PORT)],
                  "gensim_distw2v.nameserver ready at")  # its key: GENSIM_DISTW2V_HMAC_KEY
            dispatcher = start("dispatcher", net.head, ["-m", "gensim_distw2v.dispatcher", "--host", f"{SUBNET}.1"]
                               + common, "ready at")
            for i, ns in enumerate(net.workers):
                for j in range(args.shards_per_host):
                    start(f"shard-{i}.{j}", ns, ["-m", "gensim_distw2v.shard", "--host", f"{SUBNET}.{10 + i}"] + common,
                          "ready at")
                start(f"worker-{i}", ns, ["-m", "gensim_distw2v.worker", "--host", f"{SUBNET}.{10 + i}", "--threads",
                                          "1"] + common, "ready at")
            dispatcher.wait_for(rf"\({k} workers\)", timeout=120)
            dispatcher.wait_for(rf"\({k * args.shards_per_host} shards\)", timeout=120)
            before = {ns: net.counters(ns) for ns in [net.head] + net.workers}
            out = os.path.join(workdir, f"client-{k}-{rule}.json")
            client = subprocess.run(["ip", "netns", "exec", net.head] + py + [os.path.abspath(__file__), "--corpus",
                                    corpus, "--sg", str(args.sg), "--epochs", str(args.epochs), "--seed",
                                    str(args.seed), "--_client", corpus, rule, out],
                                    env=env, capture_output=True, text=True, timeout=6 * 3600)
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
        finally:
            for proc in reversed(procs):
                proc.stop()


def main(argv=None):
    args = parse_args(argv)
    if args._client:
        return run_client(args, *args._client)
    if args._gensim:
        return run_gensim(args, *args._gensim)
    why = missing_requirements()
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
