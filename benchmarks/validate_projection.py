"""The projection's model tested out of sample: fitted on some clusters, it predicts others before they run.

It measures the per-word costs (``scaling.costs``) of the *fitted* clusters (``--fit``, default K=2
and K=8 workers of 2 threads, corpus_file mode), then for each case: predicts its words/s on this
machine with the model (``projection.costs_at`` for the costs at its K, ``machine_projection.this_machine``
for its limits, every process on ``--machine-cores`` cores), prints the prediction, and only then
runs the case and measures it. The cases (``--cases``, all by default):

* ``k-between``: a K between the fitted ones (K=4 x 2);
* ``k-above``: a K above them (K=12 x 2: the costs extrapolated as a power of K);
* ``one-thread``: workers of one thread, from costs measured with two (K=4 x 1);
* ``iterable``: sentences from a list in memory, which the client encodes (K=4 x 2), from the
  corpus_file fit plus the client's encoding cost measured in process beforehand
  (``gensim_distw2v.core.jobs.iter_epoch_jobs`` over the corpus, CPU per word);
* ``vocabulary``: another corpus (``--other-corpus``: another vocabulary, not fitted; K=4 x 2);
* ``bandwidth``: each worker and its shard in a network namespace of its own, the name server,
  dispatcher and client in another (``netlab.py``), every link shaped to 100 Mbit/s each way with
  ``tc tbf`` (K=2 x 2): the link's limit, a round's time on the wire, and the session's transfers
  and the epoch's flush, which training waits for;
* ``latency``: the same hosts, unshaped, every TCP connection between two of them through a relay
  that delays each direction by 2 ms (``delay_relay.py``; this kernel has no netem), the round
  trip it gives measured before the run (K=2 x 2): a round's round trip;
* ``bandwidth-k4``, ``latency-k4``: the same at K=4 x 2, 200 Mbit/s and 3 ms each way;
* ``links-k3``: K=3 x 2, 150 Mbit/s and 1 ms each way, both at once;
* ``gigabit``: K=2 x 2, 1 Gbit/s and 0.25 ms each way: at a long interval a round's time on the wire
  is about its CPU, where pieces in flight (``--round-pieces``) overlap the most.

With ``--repeats N`` every fitted cluster and every case runs N times (seeds ``--seed`` on): the
fit takes each cost's median, each case its median words/s and costs (a single run on this
machine is off by up to about 10%). Each prediction is still printed before its case's runs.

Before a shaped case runs, its links are measured as a user would measure theirs: the round trip
(a ping-pong through the relay) and the CPU a byte costs this machine beyond loopback's (sent
as a round sends it, a part to one shard and its reply, ``netlab.cpu_per_byte``: ~7-16 ns
a byte through tbf at 100-150 Mbit/s against ~1 on loopback; the relay's Python, ~2 more; until
2026-11-29 one bulk stream, 39-47 ns a byte, which overstated a round's bytes 2-4x). The
model's link terms were revised after runs of the K=2 cases at 100 Mbit/s and 1, 2 and 4 ms
(one round trip a round, not two; the session's transfers and the flush outside training; a
round's CPU waiting for busy cores) and once more after a full run (a byte's CPU on these links):
``links-k3`` is the case none of that saw.

Every run trains at the same fixed interval (``--sync-words``), so the cases differ only in what
they name; at the default (2,500 words) a round's few milliseconds of round trips bind. Prints
predicted and measured words/s and per-role costs for each; the last line (with ``--json``) is one
JSON object with ``cases: [{name, predicted_wps, measured_wps, error}]``. The shaped cases need
Linux, root, ``ip``, ``tc`` and ``nft`` (Debian: iproute2, nftables); without them they are left
out, saying why.

    python benchmarks/validate_projection.py --corpus devmix.txt --max-words 3000000 --other-corpus synth.txt \
        --repeats 2 --json
"""
import argparse
import dataclasses
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
import compare_gensim  # noqa: E402 - the single-run machinery
import projection  # noqa: E402 - the model
from gensim_distw2v import machine_projection  # noqa: E402 - the model of this machine
import scaling  # noqa: E402 - the per-word costs of a run

import netlab  # noqa: E402 - hosts in network namespaces


@dataclasses.dataclass(frozen=True)
class Case:
    """A case: ``k`` workers of ``threads`` trainer threads in ``mode``, on the other corpus or not, and
    its hosts' links, between network namespaces: ``rate`` (tc tbf's, e.g. ``"100mbit"``) and
    ``delay_ms`` (each way, through a relay); neither: loopback."""

    k: int
    threads: int
    mode: str
    other: bool = False
    rate: str = None
    delay_ms: float = 0.0

    @property
    def shaped(self):
        return self.rate is not None or self.delay_ms > 0

    def label(self):
        link = f", links {self.rate} each way (tc tbf)" if self.rate else ""
        return link + (f", +{self.delay_ms:g} ms each way (delay relay)" if self.delay_ms else "")


CASES = {"k-between": Case(4, 2, "dist_cf"), "k-above": Case(12, 2, "dist_cf"), "one-thread": Case(4, 1, "dist_cf"),
         "iterable": Case(4, 2, "dist"), "vocabulary": Case(4, 2, "dist_cf", other=True),
         "bandwidth": Case(2, 2, "dist_cf", rate="100mbit"), "latency": Case(2, 2, "dist_cf", delay_ms=2.0),
         "bandwidth-k4": Case(4, 2, "dist_cf", rate="200mbit"), "latency-k4": Case(4, 2, "dist_cf", delay_ms=3.0),
         "links-k3": Case(3, 2, "dist_cf", rate="150mbit", delay_ms=1.0),
         "gigabit": Case(2, 2, "dist_cf", rate="1gbit", delay_ms=0.25)}
SHOWN = ("kernel_us", "worker_merge_us", "worker_other_us", "shard_us", "dispatcher_us", "client_us")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", help="the corpus (required unless --repredict)")
    parser.add_argument("--other-corpus", help="a corpus of another vocabulary (the vocabulary case)")
    parser.add_argument("--max-words", type=int, default=3_000_000)
    parser.add_argument("--fit", default="2x2,8x2", help="the fitted clusters, KxT")
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {','.join(CASES)}")
    parser.add_argument("--sync-words", type=int, default=2_500, help="every run's interval")
    parser.add_argument("--sg", type=int, default=0, choices=(0, 1))
    parser.add_argument("--min-count", type=int, default=5, help="the vocabulary's (a synthetic corpus's million "
                                                                  "rows: benchmarks/vocab_costs.py)")
    parser.add_argument("--between", type=int, help="K of k-between, one-thread, iterable, vocabulary (default 4)")
    parser.add_argument("--above", type=int, help="K of k-above (default 12; a million rows take ~2.6 GB a worker)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each fitted cluster and each case (seeds --seed, --seed + 1, ...): medians")
    parser.add_argument("--machine-cores", type=int, default=2)
    parser.add_argument("--round-pieces", type=int, help="every run's pieces in flight (default: the package's)")
    parser.add_argument("--rounds-in-flight", type=int,
                        help="every run's routine rounds under way at once (default: the package's)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repredict", metavar="JSON",
                        help="no runs: predict a stored run's cases again from its stored fit with the model as it is "
                             "now, beside what was measured (after the fact: a diagnosis, not a test out of sample)")
    args = parser.parse_args(argv)
    for name in args.cases.split(","):
        if name not in CASES:
            parser.error(f"--cases: {name!r} is not one of {', '.join(CASES)}")
    if not args.corpus and not args.repredict:
        parser.error("--corpus is required (unless --repredict)")
    if "vocabulary" in args.cases.split(",") and not args.other_corpus and not args.repredict:
        parser.error("the vocabulary case needs --other-corpus")
    return args


def case_of(args, name):
    """Case ``name``, at ``--between`` / ``--above`` workers where given."""
    case = CASES[name]
    if args.above and name == "k-above":
        return dataclasses.replace(case, k=args.above)
    if args.between and name in ("k-between", "one-thread", "iterable", "vocabulary"):
        return dataclasses.replace(case, k=args.between)
    return case


def run(args, mode, k, threads, corpus, net=None):
    """One cluster run in a fresh process (``compare_gensim.py``'s single-run mode); its per-word costs.
    With ``net`` (a :class:`netlab.Network`) the cluster runs on its hosts and the client on its head."""
    vocab, path = corpus
    base = [compare_gensim.__file__, "--corpus", path, "--sg", str(args.sg), "--epochs", "1", "--sync-words",
            str(args.sync_words), "--shards", str(k), "--threads-per-worker", str(threads), "--sentences", "list",
            "--min-count", str(args.min_count)] + (
                [] if getattr(args, "round_pieces", None) is None else ["--round-pieces", str(args.round_pieces)]) + (
                [] if getattr(args, "rounds_in_flight", None) is None
                else ["--rounds-in-flight", str(args.rounds_in_flight)])
    if net is None:
        out = subprocess.run([sys.executable, *base, "--_one", mode, str(k), str(args.seed), vocab, path],
                             capture_output=True, text=True, check=False)
    else:
        with netlab.Cluster(net, threads) as cluster, tempfile.NamedTemporaryFile("w", suffix=".json") as conf:
            json.dump({"host": cluster.ns_conf["host"], "port": cluster.ns_conf["port"], "roles": cluster.roles()}, conf)
            conf.flush()
            out = subprocess.run(["ip", "netns", "exec", net.head, sys.executable, *base, "--_external", conf.name,
                                  "--_one", mode, str(k), str(args.seed), vocab, path], env=cluster.env,
                                 capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"{mode} K={k} x {threads} failed:\n{out.stderr[-4000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    return dict(scaling.costs(row, k, threads, mode == "dist_cf"), shards=k)


def median_run(runs):
    """Each numeric cost's median over repeated runs of one configuration (the rest as the first's)."""
    out = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in runs if isinstance(r.get(key), (int, float)))
    out["repeats"] = len(runs)
    out["runs_wps"] = [r["raw_wps"] for r in runs]  # each run's words/s: the noise beside the median
    return out


def repeated(args, fn, *rest):
    """``fn(args, *rest)`` for ``--repeats`` seeds from ``--seed``, as one run of median costs."""
    runs = [fn(argparse.Namespace(**dict(vars(args), seed=args.seed + i)), *rest) for i in range(args.repeats)]
    return median_run(runs)


def run_case(args, case, corpus):
    """A case's run: on loopback, or on hosts linked as it says."""
    if not case.shaped:
        return run(args, case.mode, case.k, case.threads, corpus)
    with netlab.Network(case.k, rate=case.rate, delay_ms=case.delay_ms) as net:
        return run(args, case.mode, case.k, case.threads, corpus, net)


def encode_cost(path, vocab_path, max_words=1_000_000):
    """The client's CPU per word encoding sentences into jobs (what it does for an iterable), in process."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v.core.jobs import iter_epoch_jobs

    model = gensim.models.Word2Vec.load(vocab_path)
    sentences, words = [], 0
    for sentence in LineSentence(path):
        sentences.append(sentence)
        words += len(sentence)
        if words >= max_words:
            break
    began = time.process_time()
    for _ in iter_epoch_jobs(sentences, model.wv.key_to_index, batch_words=10_000, cur_epoch=0, epochs=1,
                             start_alpha=0.025, end_alpha=0.0001, total_words=words):
        pass
    return (time.process_time() - began) * 1e6 / words


def predict(args, fitted, case, client_us, link, words, model_bytes):
    """Words/s of ``case`` on this machine, from the fitted runs (with ``link``: between namespaces,
    each host's link of ``link["gbit"]``, a round trip of ``link["rtt_ms"]``; ``words``: the run's raw words)."""
    k, threads = case.k, case.threads
    costs, label = projection.costs_at(fitted, k)
    costs = dict(costs, K=k, threads=threads, shards=k, corpus_file=case.mode == "dist_cf")
    if client_us is not None:
        costs["client_us"] = client_us
    measured_at = max(scaling.concurrent_threads(run, args.machine_cores) for run in fitted)
    at_once = scaling.concurrent_threads({"K": k, "threads": threads}, args.machine_cores)
    # a trainer thread's CPU per word as it was measured (its threads at once), at the case's threads at once
    costs["kernel_us"] *= projection.efficiency(measured_at) / projection.efficiency(at_once)
    options = {} if link["rtt_ms"] is None else {"rtt_ms": link["rtt_ms"]}
    if case.shaped and link["gbit"] is None:  # between namespaces, unshaped: veth at memory speed
        options.setdefault("rtt_ms", projection.LOOPBACK_RTT_MS)
    model = machine_projection.this_machine(costs, cores=args.machine_cores, kernel_threads=threads, link_gbit=link["gbit"],
                                    words=words, model_bytes=model_bytes, link_ns_per_byte=link["ns_per_byte"],
                                    host_ns_per_byte=link.get("host_ns_per_byte", 0.0), **options)
    return model, costs, label


def part_bytes(fitted, k):
    """A round's part to one shard at ``k`` workers and shards (bytes): the nearest fitted run's bytes up a
    word times the words a round carried, over ``k`` shards (16 kB to 4 MB)."""
    run = min(fitted, key=lambda r: abs(int(r["K"]) - k))
    return int(min(4 << 20, max(16 << 10, run["bytes_up_per_word"] / run["rounds_per_word"] / k)))


def link_text(link):
    """What was measured of a case's links before its run."""
    trip = "" if link["rtt_ms"] is None else f"round trip {link['rtt_ms']:.2f} ms, "
    rest = f", {link['host_ns_per_byte']:.1f} elsewhere" if link.get("host_ns_per_byte") else ""
    return f"{trip}{link['ns_per_byte']:.1f} ns of the ends' CPU a byte beyond loopback's{rest}"


def repredict(args):
    """``--repredict``: each stored case predicted again from the stored fit, by the model as it is now."""
    with open(args.repredict, encoding="utf-8") as fin:
        stored = json.load(fin)
    run_args = argparse.Namespace(**dict(vars(args), machine_cores=stored["args"].get("machine_cores", 2)))
    print(f"{args.repredict}: its cases predicted again by the model as it is now, after they ran (not out of sample)")
    for c in stored["cases"]:
        case = Case(c["K"], c["threads"], c["mode"], c["other_corpus"], c["rate"], c["delay_ms"])
        link = {"gbit": c["link_gbit"], "rtt_ms": c["rtt_ms"], "ns_per_byte": c["link_ns_per_byte"],
                "host_ns_per_byte": c.get("link_host_ns_per_byte", 0.0)}
        if case.shaped and "words" not in c:
            print(f"  {c['name']}: left out (its run's words and rows, which the links' transfers take, are not stored)")
            continue
        model, _costs, _label = predict(run_args, stored["fitted"], case, stored["client_us"] if c["mode"] == "dist"
                                        else None, link, c.get("words", 0), c.get("model_bytes", 0))
        print(f"  {c['name']}: K={c['K']} x {c['threads']}: measured {c['measured_wps']:,.0f} words/s; predicted then "
              f"{c['predicted_wps']:,.0f} ({c['error']:+.1%}), now {model['model_wps']:,.0f} "
              f"({model['model_wps'] / c['measured_wps'] - 1:+.1%}, {model['bottleneck']})")


def main(argv=None):
    args = parse_args(argv)
    if args.repredict:
        return repredict(args)
    with tempfile.TemporaryDirectory(prefix="validate_") as workdir:
        corpora, sizes = {}, {}
        for key, path in (("main", args.corpus), ("other", args.other_corpus)):
            if path:
                one = compare_gensim.parse_args(["--corpus", path, "--max-words", str(args.max_words),
                                                 "--min-count", str(args.min_count)])
                folder = os.path.join(workdir, key)
                os.makedirs(folder)
                vocab, cut, words, size = compare_gensim.prepare(one, folder)
                corpora[key], sizes[key] = (vocab, cut), (words, size)
                print(f"{key} corpus: {words:,} words, vocabulary {size:,}", flush=True)
        fitted = []
        for item in args.fit.split(","):
            k, t = (int(x) for x in item.split("x"))
            costs = repeated(args, run, "dist_cf", k, t, corpora["main"])
            fitted.append(costs)
            print(f"fitted K={k} x {t}: {costs['raw_wps']:,.0f} words/s, a round {costs['round_ms']:.2f} ms; " +
                  ", ".join(f"{key} {costs[key]:.3f}" for key in SHOWN), flush=True)
        client_us = encode_cost(corpora["main"][1], corpora["main"][0])
        print(f"the client's encoding, measured in process: {client_us:.3f} us a word", flush=True)
        cases = []
        shaped_why = netlab.missing(delay=True)
        for name in args.cases.split(","):
            case = case_of(args, name)
            if case.shaped and shaped_why:
                print(f"\n{name}: left out: {shaped_why}", flush=True)
                continue
            link = {"gbit": netlab.rate_bits(case.rate) / 1e9 if case.rate else None, "rtt_ms": None,
                    "ns_per_byte": 0.0, "host_ns_per_byte": 0.0}
            if case.shaped:  # the links as they are, measured before the run: a round trip, a byte's CPU
                part = part_bytes(fitted, case.k)  # sent as a round sends it, beyond loopback's (the fits paid that)
                megabytes = netlab.rate_bits(case.rate) / 8 * 2 / 1e6 if case.rate else 256
                loop_all, loop_ends = netlab.cpu_per_byte(megabytes=megabytes, message=part)
                with netlab.Network(2, rate=case.rate, delay_ms=case.delay_ms) as net:
                    link["rtt_ms"] = net.rtt_ms()
                    every, ends = net.cpu_per_byte(megabytes, message=part)
                link["ns_per_byte"] = max(0.0, ends - loop_ends)  # the sender's and receiver's: in the roles
                link["host_ns_per_byte"] = max(0.0, (every - ends) - (loop_all - loop_ends))  # the relay's, qdiscs'
                print(f"{name}: a byte in parts of {part:,} bytes costs the ends {link['ns_per_byte']:.1f} ns and the "
                      f"rest of the machine {link['host_ns_per_byte']:.1f} ns beyond loopback's "
                      f"({loop_ends:.2f} and {loop_all - loop_ends:.2f})", flush=True)
            words, vocabulary = sizes["other" if case.other else "main"]
            model_bytes = vocabulary * 100 * 4 * 2  # the rows the client uploads and downloads (syn0, syn1neg)
            model, costs, label = predict(args, fitted, case, client_us if case.mode == "dist" else None, link,
                                          words, model_bytes)
            serial = model["serial_seconds"]
            trip = "" if not case.shaped else f" ({link_text(link)})"
            print(f"\n{name}: K={case.k} x {case.threads} {case.mode}{' (other corpus)' if case.other else ''}"
                  f"{case.label()}{trip}: predicted {model['model_wps']:,.0f} words/s ({model['bottleneck']}"
                  f"{f', and {serial:.2f} s on the links outside training' if serial else ''}; costs {label})", flush=True)
            measured = repeated(args, run_case, case, corpora["other" if case.other else "main"])
            error = model["model_wps"] / measured["raw_wps"] - 1
            print(f"  measured {measured['raw_wps']:,.0f} words/s: error {error:+.1%}")
            print(f"  a round, predicted / measured: {model['round_seconds'] * 1e3:.2f} / {measured['round_ms']:.2f} ms ("
                  + ", ".join(f"{term} {value * 1e3:.2f}" for term, value in model["round_terms"].items()) + ")")
            print("  per word, predicted / measured: " + ", ".join(
                f"{key} {costs[key]:.3f} / {measured[key]:.3f}" for key in SHOWN), flush=True)
            cases.append({"name": name, "K": case.k, "threads": case.threads, "mode": case.mode,
                          "other_corpus": case.other, "rate": case.rate, "delay_ms": case.delay_ms,
                          "link_gbit": link["gbit"],
                          "rtt_ms": link["rtt_ms"], "link_ns_per_byte": link["ns_per_byte"],
                          "link_host_ns_per_byte": link["host_ns_per_byte"], "predicted_wps": model["model_wps"],
                          "measured_wps": measured["raw_wps"], "error": error,
                          "bottleneck": model["bottleneck"], "costs_from": label,
                          "serial_seconds": model["serial_seconds"], "round_ms": model["round_seconds"] * 1e3, "measured_round_ms": measured["round_ms"],
                          "round_terms_ms": {
                              term: value * 1e3 for term, value in model["round_terms"].items()},
                          "predicted": {key: costs[key] for key in SHOWN},
                          "measured": {key: measured[key] for key in SHOWN},
                          "bytes_per_word": [measured["bytes_up_per_word"], measured["bytes_down_per_word"]],
                          "stall_share": measured.get("stall_share"), "runs_wps": measured.get("runs_wps"),
                          "words": words, "model_bytes": model_bytes})
    if not cases:
        sys.exit("no case ran (each left out, saying why, above)")
    worst = max(abs(c["error"]) for c in cases)
    print(f"\n{len(cases)} cases, errors " + ", ".join(f"{c['name']} {c['error']:+.1%}" for c in cases)
          + f"; within 20%: {sum(abs(c['error']) <= 0.2 for c in cases)} of {len(cases)} (worst {worst:.1%}, "
          f"median {statistics.median(abs(c['error']) for c in cases):.1%})")
    if args.json:
        print(json.dumps({"provenance": provenance(), "args": vars(args), "fitted": fitted, "client_us": client_us,
                          "cases": cases}))


if __name__ == "__main__":
    main()
