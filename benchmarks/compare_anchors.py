"""The anchors side by side: the cluster, gensim, Spark MLlib and fastText on one corpus.

For each K in --workers and each seed it trains the same corpus, in a fresh process per run, with

* ``dist``: ``gensim_distw2v.Word2Vec(distributed=True)`` on a LocalCluster of K workers x 1 thread
  and K parameter shards (the client streams the sentences, held in memory);
* ``gensim``: ``gensim.models.Word2Vec(workers=K)`` over the same sentences in memory;
* ``spark``: Spark MLlib's word2vec (``pyspark.ml.feature.Word2Vec``) in ``local[K]`` with
  ``numPartitions=K`` (``pip install 'gensim_distw2v[anchors]'`` and a Java the pyspark release
  supports: 17+ for pyspark 4);
* ``fasttext``: fastText's command line (``apt-get install -y fasttext``), ``skipgram`` with
  ``-thread K`` and no subwords (``-minn 0 -maxn 0``).

Like for like. MLlib trains skip-gram with hierarchical softmax only, so every system here does:
sg=1, hs=1, negative=0, learning rate 0.025, and the same ``--vector-size``, ``--window``,
``--min-count``, ``--epochs`` (Spark's ``maxIter``) and seed. The differences left:

* subsampling: Spark has none. ``--sample`` (default 0: none, as Spark) applies to gensim, the
  cluster and fastText (``-t``; fastText keeps a word with probability sqrt(t/f) + t/f, as gensim
  does, so it gets ``-t 1`` for "none": its ``-t 0`` would discard every word);
* the learning rate decays linearly to 0.0001 x 0.025 (gensim, the cluster, Spark's floor) or to 0
  (fastText); Spark decays it by each partition's own progress times K;
* Spark's K partitions update the weights broadcast at the start of an iteration (epoch) and
  their changed rows are combined at its end, not every few thousand words as the cluster merges
  nor continuously as gensim's and fastText's threads share theirs;
* tokens: gensim and the cluster split lines on whitespace (str.split) into sentences of at most
  10,000 words (longer lines are cut into pieces; Spark gets ``maxSentenceLength=10000``, split on
  ``\\s+``); fastText cuts lines into pieces of 1,024 words and trains a ``</s>`` token at each line
  end. Each row's ``vocabulary`` shows what each system kept (fastText's without ``</s>``).

Timing. words/s is the corpus's words (every whitespace-separated token, in the vocabulary or not;
gensim's raw words) times the epochs, over the seconds below. Vocabulary building and start-up are
left out wherever the system lets them be:

* ``gensim``: ``train()``'s wall time; the vocabulary is built beforehand (once, shared by every
  run) and the sentences are already in memory;
* ``dist``: ``train()``'s wall time; the cluster is started and the vocabulary built beforehand;
  it includes the session's set-up (vocabulary and initial weights sent to the shards), every
  merge, and pulling the trained weights back to the client;
* ``spark``: from the end of MLlib's vocabulary job to the end of ``fit()``'s last job, by Spark's
  own job records (its UI's REST API); the JVM's start, reading and caching the corpus and the
  vocabulary pass are left out; the Huffman tree, the broadcasts, encoding and repartitioning the
  sentences (in the first iteration's job) and every iteration's aggregation are in. Without
  the REST API, the whole ``fit()`` (the row's ``timing`` says which);
* ``fasttext``: from its log's "Number of labels" line (its vocabulary is read) to its last
  "Progress: 100.0%" line, timed as the lines arrive (it logs every 0.1 s, so up to 0.1 s late);
  reading the vocabulary and writing the ``.bin``/``.vec`` files are left out, initialising the
  weights is in. The row's ``reported_wps`` is fastText's own figure (its last words/sec/thread
  times K, counting ``</s>`` and timed from its threads' start), for a check.

Peak RSS, in MB: ``gensim``, the process (its sentences in memory included); ``dist``, the client
(sentences in memory included), the name server, the dispatcher, the K shards and the K workers,
each role summed, and their total; ``spark``, the JVM (driver and executors: ``local`` mode; its
heap may grow to ``--spark-memory``) plus the Python driver; ``fasttext``, its process
(``os.wait4``'s rusage). The cluster's and the JVM's are the kernel's high-water marks (Linux's
VmHWM), else samples every 0.25 s.

Quality: analogy accuracy on gensim's ``questions-words.txt`` (the 30,000 most frequent words,
ordered by the shared vocabulary's counts for every system), Spearman correlation on
``wordsim353.tsv`` and ``simlex999.txt``. Figures are means over seeds 1..N.

A system whose tool is missing is skipped, with one line saying why (and in the JSON's
``skipped``); a run that fails is logged with the end of its output (and in the JSON's
``failed``), the others go on and the script exits with status 1.

    python benchmarks/compare_anchors.py --corpus devmix.txt --max-words 5000000 --workers 1,2 --epochs 1 --json
    python benchmarks/compare_anchors.py --corpus lee_background.cor --systems dist,gensim --json --plot plots/
"""
import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from compare_gensim import head  # sibling modules (the script's folder is on sys.path)
from provenance import provenance

logger = logging.getLogger(__name__)

SYSTEMS = ("dist", "gensim", "spark", "fasttext")
ALPHA = 0.025
MAX_SENTENCE = 10000  # gensim's LineSentence cuts longer lines into pieces of this many words
ANALOGY_VOCAB = 30000
INSTALL = "pip install 'gensim_distw2v[anchors]'"
JAVA_HINT = "apt-get install -y openjdk-17-jre-headless, or pass --java-home"
TIMING = {
    "gensim": "train() wall time",
    "dist": "train() wall time (cluster started and vocabulary built beforehand)",
    "spark": "end of the vocabulary job to the end of fit()'s last job (Spark's job records)",
    "fasttext": "'Number of labels' to the last 'Progress: 100.0%' line of its log",
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line, tokens separated by spaces")
    parser.add_argument("--workers", default="1,2", help="comma-separated K values (default 1,2)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"subset of {','.join(SYSTEMS)}")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1, help="seeds 1..N; figures are means over them")
    parser.add_argument("--vector-size", type=int, default=100)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--sample", type=float, default=0.0,
                        help="subsampling threshold of gensim, the cluster and fastText (default 0: none; Spark "
                             "has none)")
    parser.add_argument("--max-words", type=int, default=0, help="use the corpus's first lines up to this many words")
    parser.add_argument("--fasttext-bin", default=shutil.which("fasttext"),
                        help="fastText's executable (default: fasttext on PATH)")
    parser.add_argument("--java-home", default=None,
                        help="the Java Spark runs on (default: $JAVA_HOME, else java on PATH)")
    parser.add_argument("--spark-memory", default="2g", help="the Spark JVM's heap limit (default 2g)")
    parser.add_argument("--plot", help="directory for PNG plots (needs matplotlib)")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--_one", nargs=4, metavar=("SYSTEM", "K", "SEED", "WORKDIR"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# --- which systems can run ----------------------------------------------------------------------

def java_command(java_home=None):
    """The java Spark's launcher would start: ``$JAVA_HOME/bin/java``, else the first on PATH.

    Parameters
    ----------
    java_home : str, optional
        Overrides the environment's ``JAVA_HOME``.

    Returns
    -------
    str or None
    """
    home = java_home or os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")


def java_major(java):
    """The major version of ``java`` (8 for "1.8.0_392", 17 for "17.0.15"), or None if unknown."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def spark_missing(java_home=None):
    """Why Spark cannot run here (pyspark, or a Java it supports, missing), or None."""
    if importlib.util.find_spec("pyspark") is None:
        return f"pyspark is not installed ({INSTALL})"
    java = java_command(java_home)
    if not java or not os.access(java, os.X_OK):
        return f"no Java {'at ' + java if java else 'on PATH and no JAVA_HOME'} ({JAVA_HINT})"
    version = importlib.metadata.version("pyspark")
    need = 17 if int(version.split(".")[0]) >= 4 else 8
    have = java_major(java)
    if have is None or have < need:
        return f"pyspark {version} needs Java {need}+, {java} is Java {have or '?'} ({JAVA_HINT})"
    return None


def why_unavailable(system, args):
    """Why ``system`` cannot run here, in a sentence with the remedy, or None when it can."""
    if system in ("dist", "spark") and importlib.util.find_spec("psutil") is None:
        return f"psutil is not installed ({INSTALL})"
    if system == "spark":
        return spark_missing(args.java_home)
    if system == "fasttext":
        binary = args.fasttext_bin
        if not binary or not os.path.isfile(binary) or not os.access(binary, os.X_OK):
            where = f"at {binary}" if binary else "on PATH"
            return f"no fastText binary {where} (apt-get install -y fasttext, or pass --fasttext-bin)"
    return None


# --- peak memory ---------------------------------------------------------------------------------

def high_water_mb(pid):
    """The peak resident set size the kernel recorded for ``pid`` (Linux's VmHWM), in MB; None
    where there is none (another OS, or the process is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fin:
            for line in fin:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def own_peak_mb():
    """This process's peak resident set size so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakRss:
    """The peak resident memory of some processes, from a thread that samples them.

    Each sample takes the kernel's high-water mark where there is one (Linux), so the peak is
    exact there; elsewhere the largest RSS seen, every ``interval`` seconds.

    Parameters
    ----------
    pids : iterable of int
        The processes (they must be running).
    interval : float
        Seconds between samples.
    """

    def __init__(self, pids, interval=0.25):
        import psutil

        self.processes = {pid: psutil.Process(pid) for pid in pids}
        self.peaks = dict.fromkeys(self.processes, 0.0)
        self.interval = interval
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="peak-rss", daemon=True)
        self._thread.start()

    def _sample(self):
        import psutil

        for pid, process in self.processes.items():
            try:
                rss = process.memory_info().rss / 2 ** 20
            except psutil.Error:  # gone: its last samples stand
                continue
            self.peaks[pid] = max(self.peaks[pid], rss, high_water_mb(pid) or 0.0)

    def _loop(self):
        while not self._done.wait(self.interval):
            self._sample()

    def stop(self):
        """Stop sampling (one last sample first); return ``{pid: peak MB}``."""
        self._done.set()
        self._thread.join()
        self._sample()
        return dict(self.peaks)


# --- one run of one system (in its own process) --------------------------------------------------

def word2vec_params(args, k, seed):
    """The hyper-parameters of gensim's and the cluster's runs: skip-gram, hierarchical softmax."""
    return dict(vector_size=args.vector_size, window=args.window, min_count=args.min_count, sample=args.sample,
                sg=1, hs=1, negative=0, alpha=ALPHA, epochs=args.epochs, seed=seed, workers=k)


def read_sentences(corpus):
    from gensim.models.word2vec import LineSentence

    return list(LineSentence(corpus))


def set_vocabulary(model, reference):
    """Give ``model`` the shared vocabulary (built once by :func:`prepare`), as if it had scanned the corpus."""
    model.build_vocab_from_freq(dict(reference["vocab"]), corpus_count=reference["sentences"])
    model.corpus_total_words = reference["words"]


def train_gensim(args, k, seed, reference, workdir):
    """``gensim.models.Word2Vec(workers=k)``; return ``(row, KeyedVectors)``."""
    import gensim.models

    sentences = read_sentences(reference["corpus"])
    model = gensim.models.Word2Vec(**word2vec_params(args, k, seed))
    set_vocabulary(model, reference)
    start = time.perf_counter()
    model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rss_mb": {"process": own_peak_mb()}}, model.wv


def train_dist(args, k, seed, reference, workdir):
    """The cluster: k workers x 1 thread and k shards; return ``(row, KeyedVectors)``."""
    from gensim_distw2v import LocalCluster, Word2Vec

    sentences = read_sentences(reference["corpus"])
    with LocalCluster(n_workers=k, threads_per_worker=1, n_shards=k) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **word2vec_params(args, k, seed))
        set_vocabulary(model, reference)
        pids = {name: process.pid for name, process in cluster.processes.items()}
        peaks = PeakRss(pids.values())
        start = time.perf_counter()
        model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs)
        seconds = time.perf_counter() - start
        cluster_peaks = peaks.stop()
    rss = {"client": own_peak_mb()}
    for name, pid in pids.items():  # nameserver, dispatcher, shard-0..., worker-0...: summed by role
        role = name.split("-")[0]
        rss[role] = rss.get(role, 0.0) + cluster_peaks[pid]
    return {"seconds": seconds, "rss_mb": rss}, model.wv


def spark_session(args, k):
    """A ``local[k]`` SparkSession, its UI on (its REST API times the jobs), quiet."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if args.java_home:
        os.environ["JAVA_HOME"] = args.java_home
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{k}]").appName("compare_anchors")
             .config("spark.driver.memory", args.spark_memory)
             .config("spark.ui.enabled", "true").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(k)).getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def jvm_pid():
    """The process id of the JVM pyspark started (a child of this process), or None."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        if child.name() == "java":
            return child.pid
    return None


def spark_jobs(spark):
    """Spark's records of its jobs, ``{jobId: record}``, from its UI's REST API; {} without one."""
    context = spark.sparkContext
    if not context.uiWebUrl:
        return {}
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/jobs"
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            return {job["jobId"]: job for job in json.load(reply)}
    except (OSError, ValueError):
        return {}


def spark_time(stamp):
    """Seconds since the epoch of a REST API time stamp (``2026-11-25T10:53:08.785GMT``)."""
    return datetime.datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def spark_training_seconds(spark, before, wait=10.0):
    """Seconds from the end of the first job ``fit()`` ran (MLlib's vocabulary) to the end of its
    last, by Spark's own clock; None if its records do not show that.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
    before : set of int
        The jobs that ran before ``fit()``.
    wait : float
        Seconds to wait for the records of the last jobs (Spark writes them asynchronously).
    """
    deadline = time.monotonic() + wait
    while True:
        jobs = spark_jobs(spark)
        ran = [jobs[job] for job in sorted(jobs) if job not in before]
        if len(ran) >= 2 and all(job.get("status") == "SUCCEEDED" and job.get("completionTime") for job in ran):
            break
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)
    if "Word2Vec" not in ran[0].get("name", ""):
        return None
    return spark_time(ran[-1]["completionTime"]) - spark_time(ran[0]["completionTime"])


def train_spark(args, k, seed, reference, workdir):
    """Spark MLlib's word2vec in ``local[k]``, ``numPartitions=k``; return ``(row, KeyedVectors)``."""
    spark = spark_session(args, k)
    try:
        from pyspark.ml.feature import Word2Vec as SparkWord2Vec
        from pyspark.sql import functions as F

        pid = jvm_pid()
        peaks = PeakRss([pid] if pid else [])
        words = F.filter(F.split("value", r"\s+"), lambda word: word != "")
        sentences = spark.read.text(reference["corpus"]).select(words.alias("words")).where(F.size("words") > 0)
        sentences = sentences.cache()
        sentences.count()  # read and cached before the clock starts
        estimator = SparkWord2Vec(vectorSize=args.vector_size, windowSize=args.window, minCount=args.min_count,
                                  numPartitions=k, maxIter=args.epochs, seed=seed, stepSize=ALPHA,
                                  maxSentenceLength=MAX_SENTENCE, inputCol="words", outputCol="vector")
        before = set(spark_jobs(spark))
        start = time.perf_counter()
        model = estimator.fit(sentences)
        fit_seconds = time.perf_counter() - start
        seconds = spark_training_seconds(spark, before)
        rss = {"jvm": peaks.stop().get(pid, float("nan")), "driver": own_peak_mb()}
        vectors = [(row.word, row.vector.toArray()) for row in model.getVectors().collect()]
    finally:
        spark.stop()
    row = {"seconds": fit_seconds if seconds is None else seconds, "fit_seconds": fit_seconds, "rss_mb": rss}
    if seconds is None:
        row["timing"] = "fit() wall time, the vocabulary pass included (no job records from Spark's REST API)"
    return row, keyed_vectors([w for w, _v in vectors], [v for _w, v in vectors])


def fasttext_command(args, k, seed, corpus, output):
    """fastText's skip-gram with hierarchical softmax and no subwords, as the other systems train."""
    return [args.fasttext_bin, "skipgram", "-input", corpus, "-output", output, "-dim", str(args.vector_size),
            "-ws", str(args.window), "-epoch", str(args.epochs), "-minCount", str(args.min_count),
            "-loss", "hs", "-neg", "0", "-thread", str(k), "-minn", "0", "-maxn", "0", "-lr", str(ALPHA),
            "-t", str(args.sample or 1.0), "-seed", str(seed), "-verbose", "2"]


def read_timed_lines(stream, lines):
    """Append ``(perf_counter, line)`` to ``lines`` for each line of ``stream`` as it arrives (a line
    ends at ``\\n`` or at fastText's progress ``\\r``)."""
    pending = b""
    for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
        now = time.perf_counter()
        *complete, pending = re.split(rb"[\r\n]", pending + chunk)
        lines.extend((now, line.decode("utf8", "replace").strip()) for line in complete if line.strip())
    if pending.strip():
        lines.append((time.perf_counter(), pending.decode("utf8", "replace").strip()))


def train_fasttext(args, k, seed, reference, workdir):
    """fastText's CLI with ``-thread k``; return ``(row, KeyedVectors)``."""
    from gensim.models import KeyedVectors

    output = os.path.join(workdir, f"fasttext-k{k}-s{seed}")
    command = fasttext_command(args, k, seed, reference["corpus"], output)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines = []
    reader = threading.Thread(target=read_timed_lines, args=(process.stderr, lines), daemon=True)
    reader.start()
    _pid, status, usage = os.wait4(process.pid, 0)  # its rusage: ru_maxrss is its peak RSS, in KB
    process.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    process.stderr.close()
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}:\n"
                           + "\n".join(line for _t, line in lines[-20:]))
    start = next(t for t, line in lines if line.startswith("Number of labels"))
    end, last = [(t, line) for t, line in lines if re.match(r"Progress:\s+100\.0%", line)][-1]
    per_thread = re.search(r"words/sec/thread:\s*(\d+)", last)  # its own count: </s> included
    wv = KeyedVectors.load_word2vec_format(output + ".vec")
    for suffix in (".bin", ".vec"):
        os.remove(output + suffix)
    row = {"seconds": end - start, "rss_mb": {"fasttext": usage.ru_maxrss / 1024}}
    if per_thread:
        row["reported_wps"] = int(per_thread.group(1)) * k
    return row, wv


TRAINERS = {"dist": train_dist, "gensim": train_gensim, "spark": train_spark, "fasttext": train_fasttext}


def keyed_vectors(words, vectors):
    """A KeyedVectors of ``words`` and their ``vectors``."""
    import numpy as np
    from gensim.models import KeyedVectors

    wv = KeyedVectors(len(vectors[0]))
    wv.add_vectors(words, np.asarray(vectors, dtype=np.float32))
    return wv


def in_reference_order(wv, reference):
    """``wv`` with its words in the shared vocabulary's order, most frequent first (the analogy
    test takes the first 30,000 words); words the vocabulary lacks (fastText's ``</s>``) last."""
    rank = {word: i for i, (word, _count) in enumerate(reference["vocab"])}
    words = sorted(wv.index_to_key, key=lambda word: rank.get(word, len(rank)))
    if words == list(wv.index_to_key):
        return wv
    return keyed_vectors(words, wv[words])


def evaluate(wv):
    """Analogy accuracy (first 30,000 words) and Spearman correlations on WordSim353 and SimLex-999."""
    from gensim.test.utils import datapath

    return {"analogy": float(wv.evaluate_word_analogies(datapath("questions-words.txt"),
                                                        restrict_vocab=ANALOGY_VOCAB)[0]),
            "ws353": float(wv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0]),
            "simlex": float(wv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0])}


def run_one(args, system, k, seed, workdir):
    """Train with ``system`` in this (fresh) process, evaluate, print the row as one JSON line."""
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=logging.WARNING)
    with open(os.path.join(workdir, "vocab.json"), encoding="utf8") as fin:
        reference = json.load(fin)
    row, wv = TRAINERS[system](args, k, seed, reference, workdir)
    wv = in_reference_order(wv, reference)
    words = reference["words"] * args.epochs
    row = {"system": system, "k": k, "seed": seed, "timing": TIMING[system], **row, "words": words,
           "raw_wps": words / row["seconds"], "vocabulary": sum(1 for word in wv.index_to_key if word != "</s>"),
           "peak_rss_mb": sum(row["rss_mb"].values()), **evaluate(wv)}
    print(json.dumps(row))


# --- the whole comparison ------------------------------------------------------------------------

def prepare(args, workdir):
    """Cut the corpus to --max-words; build the shared vocabulary once; save both for the runs.

    Returns
    -------
    dict
        ``corpus`` (path), ``words`` (raw words), ``sentences``, ``vocab`` (``[word, count]``, most
        frequent first), as written to ``workdir/vocab.json``.
    """
    import gensim.models
    from gensim.models.word2vec import LineSentence

    corpus = os.path.abspath(args.corpus)
    if args.max_words:
        corpus = os.path.join(workdir, "corpus.txt")
        head(args.corpus, corpus, args.max_words)
    model = gensim.models.Word2Vec(vector_size=args.vector_size, min_count=args.min_count)
    model.build_vocab(LineSentence(corpus))
    reference = {"corpus": corpus, "words": model.corpus_total_words, "sentences": model.corpus_count,
                 "vocab": [[word, int(model.wv.get_vecattr(word, "count"))] for word in model.wv.index_to_key]}
    with open(os.path.join(workdir, "vocab.json"), "w", encoding="utf8") as fout:
        json.dump(reference, fout)
    return reference


def run_child(argv, system, k, seed, workdir):
    """One run in a fresh process; return ``(row, None)``, or ``(None, the end of its output)`` if it failed."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--_one", system, str(k), str(seed),
                          workdir], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None, (out.stdout[-2000:] + out.stderr[-4000:]).strip()
    return json.loads(out.stdout.strip().splitlines()[-1]), None


def mean(rows, key):
    values = [row[key] for row in rows if row.get(key) is not None]
    return statistics.fmean(values) if values else float("nan")


def summarise(results, ks, systems):
    """One record per system and K: means over seeds; words/s also over gensim's at the same K."""
    table = []
    for system in systems:
        for k in ks:
            rows = results.get((system, k))
            if not rows:
                continue
            gensim = results.get(("gensim", k))
            roles = {role: statistics.fmean(row["rss_mb"][role] for row in rows) for role in rows[0]["rss_mb"]}
            table.append({"system": system, "k": k, "seeds": len(rows), "seconds": mean(rows, "seconds"),
                          "raw_wps": mean(rows, "raw_wps"),
                          "ratio_to_gensim": mean(rows, "raw_wps") / mean(gensim, "raw_wps") if gensim else None,
                          "analogy": mean(rows, "analogy"), "ws353": mean(rows, "ws353"),
                          "simlex": mean(rows, "simlex"), "vocabulary": rows[0]["vocabulary"],
                          "peak_rss_mb": mean(rows, "peak_rss_mb"), "rss_mb": roles, "timing": rows[0]["timing"]})
    return table


def print_table(table, seeds):
    print(f"\nskip-gram, hierarchical softmax; means over {seeds} seed(s)")
    print(f"{'system':<10}{'K':>3}{'words/s':>11}{'vs gensim':>11}{'analogy':>9}{'ws353':>8}{'simlex':>8}"
          f"{'vocab':>8}{'peak RSS MB':>13}")
    for entry in table:
        ratio = "" if entry["ratio_to_gensim"] is None else f"{entry['ratio_to_gensim']:.2f}"
        print(f"{entry['system']:<10}{entry['k']:>3}{entry['raw_wps']:>11.0f}{ratio:>11}{entry['analogy']:>9.4f}"
              f"{entry['ws353']:>8.4f}{entry['simlex']:>8.4f}{entry['vocabulary']:>8}{entry['peak_rss_mb']:>13.0f}")
    for entry in table:
        if len(entry["rss_mb"]) > 1:
            print(f"  peak RSS MB of {entry['system']} K={entry['k']}: "
                  + ", ".join(f"{role} {mb:.0f}" for role, mb in entry["rss_mb"].items()))


def grouped_bars(ax, table, ks, key):
    """Bars of ``key`` per K (groups on the x axis), one colour per system."""
    systems = list(dict.fromkeys(entry["system"] for entry in table))
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        entries = {entry["k"]: entry[key] for entry in table if entry["system"] == system}
        positions = [ks.index(k) + (i - (len(systems) - 1) / 2) * width for k in entries]
        ax.bar(positions, list(entries.values()), width, label=system)
    ax.set_xticks(range(len(ks)), [f"K={k}" for k in ks])


def plot(table, ks, directory):
    """``words_per_second.png`` and ``quality.png`` in ``directory``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    grouped_bars(ax, table, ks, "raw_wps")
    ax.set(ylabel="raw words/s of training", title="training speed (skip-gram, hs)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "words_per_second.png"), dpi=100)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, (key, label) in zip(axes, (("analogy", "analogy accuracy (30k words)"),
                                       ("ws353", "WordSim353 Spearman"), ("simlex", "SimLex-999 Spearman"))):
        grouped_bars(ax, table, ks, key)
        ax.set(title=label)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(directory, "quality.png"), dpi=100)
    plt.close("all")


def main(argv=None):
    args = parse_args(argv)
    if args._one:
        system, k, seed, workdir = args._one
        return run_one(args, system, int(k), int(seed), workdir)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=logging.INFO)
    logging.getLogger("gensim").setLevel(logging.WARNING)
    ks = [int(k) for k in args.workers.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        sys.exit(f"unknown systems {sorted(unknown)}; choose from {','.join(SYSTEMS)}")
    skipped = {}
    for system in systems:
        reason = why_unavailable(system, args)
        if reason:
            skipped[system] = reason
            logger.warning("%s: skipped: %s", system, reason)
    running = [s for s in systems if s not in skipped]
    argv = list(argv if argv is not None else sys.argv[1:])
    results, failed = {}, {}
    with tempfile.TemporaryDirectory(prefix="compare_anchors_") as workdir:
        reference = prepare(args, workdir)
        logger.info("corpus %i words in %i sentences, vocabulary %i; skip-gram, hs, %i epoch(s), sample %g",
                    reference["words"], reference["sentences"], len(reference["vocab"]), args.epochs, args.sample)
        for seed in range(1, args.seeds + 1):
            for k in ks:
                for system in running:
                    row, error = run_child(argv, system, k, seed, workdir)
                    if error is not None:
                        failed[f"{system}:{k}:{seed}"] = error
                        logger.error("%s K=%i seed %i failed:\n%s", system, k, seed, error)
                        continue
                    results.setdefault((system, k), []).append(row)
                    logger.info("seed %i K=%i %-8s %9.0f words/s, %.1f s, analogy %.4f ws353 %.4f simlex %.4f, "
                                "peak RSS %.0f MB", seed, k, system, row["raw_wps"], row["seconds"], row["analogy"],
                                row["ws353"], row["simlex"], row["peak_rss_mb"])
    table = summarise(results, ks, running)
    print_table(table, args.seeds)
    if args.plot and table:
        plot(table, ks, args.plot)
        print(f"plots written to {args.plot}")
    if args.json:
        print(json.dumps({"provenance": provenance(),
                          "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
                          "corpus": {"words": reference["words"], "sentences": reference["sentences"],
                                     "vocabulary": len(reference["vocab"])},
                          "table": table, "skipped": skipped, "failed": failed,
                          "runs": {f"{s}:{k}": rows for (s, k), rows in results.items()}}))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
