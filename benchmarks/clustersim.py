"""Merge schedules simulated in one process: K replicas, the cluster's own kernel and merge code.

K workers' replicas (:class:`gensim_distw2v.core.replica.Replica`) train with the cluster's kernel
(``JobTrainer``) on the jobs the client cuts (:func:`gensim_distw2v.core.jobs.iter_epoch_jobs`), pulled
in order as workers pull them from the queue, in pieces cut where an interval runs out as a worker
cuts them; after every ``sync_words`` words each worker merges with one
:class:`gensim_distw2v.core.merge.GlobalWeights` (what a shard runs, here over every row) part by part,
with the cluster's hold-back, codec and cold rows, takes the reply in, and at each
epoch end flushes exactly. Rounds are synchronous: every worker trains its interval, then they
merge in rank order, so a run depends only on its seed, and K workers cost one core. A schedule's
quality is measured here in minutes rather than on a cluster, its bytes per word exactly. Left
out: a real worker trains on while its round is in flight (one round more staleness), and its
threads run Hogwild. Plain gensim (``workers=1``, same vocabulary and seed) is trained in the same
run for the quality deltas (``--no-baseline`` skips it). (``merge_rules_sim.py`` is older: rules
re-written for the workplace's synchronous simulator, outside this repository; this one runs the
cluster's own code.)

    python benchmarks/clustersim.py --corpus /tmp/devmix.txt --workers 2,4,8 --sg 0 --epochs 3 --seed 1
    python benchmarks/clustersim.py --corpus /tmp/devmix.txt --workers 8 --sync-words 12500 --json

Prints a line per K (quality, its delta against gensim, bytes per trained raw word each way per
worker (all workers' bytes over all words trained), merge rounds per million words, merge CPU per word on the workers' and the server's side,
max |w|); with ``--json`` one JSON object last.
"""
import argparse
import collections
import json
import logging
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance  # noqa: E402 - a sibling module


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line, tokens separated by spaces")
    parser.add_argument("--workers", default="2,4,8", help="comma-separated K values")
    parser.add_argument("--sg", type=int, choices=(0, 1), default=0)
    parser.add_argument("--hs", type=int, choices=(0, 1), default=0, help="hierarchical softmax (negative=0)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--vector-size", type=int, default=100)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--max-words", type=int, default=0, help="use the corpus's first lines up to this many words")
    parser.add_argument("--sync-words", type=int, default=None, help="default: derived from K, as the cluster does")
    parser.add_argument("--merge", default="damp")
    parser.add_argument("--hold-back", type=float, default=None)
    parser.add_argument("--cold-every", type=int, default=None)
    parser.add_argument("--merge-dtype", default=None)
    parser.add_argument("--damp-words", type=int, default=None,
                        help="damp the rows a worker sees 1.5 times in this many words (default: as the cluster "
                             "does, sync_words up to 2,200: schedule.damp_words)")
    parser.add_argument("--damp-output", type=int, default=None, metavar="ROWS",
                        help="experiment: damp this many first syn1neg rows (the cluster damps at most "
                             "merge.OUTPUT_DAMP_MOST, and no more than syn0's damped rows)")
    parser.add_argument("--damp-output-rows", type=int, default=None, metavar="ROWS",
                        help="settings.damp_output_rows: the cap on damped syn1neg rows, as the cluster takes it "
                             "(default: the package's)")
    parser.add_argument("--hot-rows", type=int, default=None, metavar="ROWS",
                        help="experiment: routine rounds merge only these first syn0 and syn1neg rows (the rest every "
                             "--cold-every rounds); default: merge.hot_rows, as the cluster")
    parser.add_argument("--all-tree-rows", action="store_true",
                        help="hs: every syn1 row in every round (default, as the cluster: the tree nodes a worker "
                             "passes a quarter of a time per interval every round, the others every cold_every-th)")
    parser.add_argument("--all-rows-down", action="store_true",
                        help="a routine reply carries every row the worker lacks (default, as the cluster: of the "
                             "rows beyond the hot ones, only those of the jobs the worker holds)")
    parser.add_argument("--cold-output-down", choices=("all", "with_up", "held"), default=None,
                        help="rounds that merge rare rows bring down every syn1neg row a worker lacks ('all'), in the "
                             "rounds that send those rows up only ('with_up'), or those of its held jobs ('held'); "
                             "default: the cluster's (settings.cold_output_down)")
    parser.add_argument("--output-hot-rows", type=int, default=None, metavar="ROWS",
                        help="syn1neg's hot rows (default: the cluster's, schedule.output_hot_rows; 0: the words' hot "
                             "rows, as before 2026-12-01)")
    parser.add_argument("--output-hot-sightings", type=float, default=None, metavar="S",
                        help="CBOW: syn1neg rows touched at least S times a damp clock are hot (default: the "
                             "cluster's, schedule.HOT_SIGHTINGS; with --output-hot-rows unset)")
    parser.add_argument("--cold-output-every", type=int, default=None,
                        help="of the rounds that merge rare rows, every n-th sends syn1neg's rare rows up (default: "
                             "the cluster's, schedule.default_cold_output_every; runs before 2026-12-01 sent them in "
                             "every one)")
    parser.add_argument("--every-round", default="", metavar="MATRICES",
                        help="experiment: routine rounds merge every row of these matrices (comma-separated, of "
                             "syn0 and syn1neg), not only their hot rows (down: as a cold round, the rows wanted)")
    parser.add_argument("--value-codec", default=None, help="experiment: codec of the values of rows a worker "
                                                            "lacks (default: the cluster's)")
    parser.add_argument("--local", action="store_true",
                        help="sync='local': no merges within an epoch, only the flushes at epoch ends (the "
                             "simulator's rounds are otherwise bsp's: in rank order, each taken in before its "
                             "worker trains on)")
    parser.add_argument("--no-baseline", action="store_true", help="skip plain gensim")
    parser.add_argument("--pairs", default=None,
                        help="score against this truth list (word1<TAB>word2<TAB>score: synth_corpus.py's .pairs.tsv) "
                             "as 'truth', a Spearman correlation, instead of the analogies, ws353 and simlex")
    parser.add_argument("--stream", action="store_true",
                        help="read the corpus from disk every epoch (a LineSentence) instead of holding it in memory: "
                             "for corpora of 100 M words and more")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def load_corpus(path, max_words, stream=False):
    """The corpus's sentences: a list in memory, or with ``stream`` a ``LineSentence`` read every epoch."""
    from gensim.models.word2vec import LineSentence

    if stream:
        if max_words:
            raise SystemExit("--stream reads the whole file: cut it to --max-words beforehand")
        return LineSentence(path)
    sentences, words = [], 0
    for sentence in LineSentence(path):
        sentences.append(sentence)
        words += len(sentence)
        if max_words and words >= max_words:
            break
    return sentences


def new_model(args, sentences):
    import gensim.models

    model = gensim.models.Word2Vec(vector_size=args.vector_size, min_count=args.min_count, sg=args.sg, hs=args.hs,
                                   negative=0 if args.hs else 5, epochs=args.epochs, seed=args.seed, workers=1)
    model.build_vocab(sentences)
    return model


PREFETCH = 4  # jobs a one-thread worker fetches ahead (its fetch loop: 4 per thread, topped up at half)


class SimWorker:
    """One simulated worker: its replica, kernel, random stream, the job it is part-way through and
    the jobs it holds (fetched as a one-thread worker fetches them)."""

    def __init__(self, rank, replica, trainer, rng):
        self.rank, self.replica, self.trainer, self.rng = rank, replica, trainer, rng
        self.job, self.at = None, 0  # the job being trained, and its next sentence
        self.queue = collections.deque()  # jobs fetched ahead (as a worker's local queue)
        self.words = 0  # raw words since its last merge
        self.rounds = 0

    def train_interval(self, jobs, sync_words):
        """Train pieces of jobs (pulled from ``jobs``) until ``sync_words`` raw words are trained or
        the jobs run out; returns False when they ran out."""
        while self.words < sync_words:
            if self.job is None:
                self.job, self.at = self.next_job(jobs), 0
                if self.job is None:
                    return False
            job = self.job
            indices, offsets, raw = job.indices, job.offsets, job.raw_words
            total, n_sent = len(indices), len(offsets) - 1
            room = max(1, sync_words - self.words)
            a = self.at
            if a == 0 and (raw <= room + sync_words // 10 or total == 0):
                b = n_sent
            else:  # as the worker cuts: the first sentence boundary past `room` raw words
                reach = int(offsets[a]) + -(-room * total // max(1, raw))
                b = min(n_sent, max(a + 1, int(np.searchsorted(offsets, reach, side="left"))))
            if b > a:
                lo, hi = int(offsets[a]), int(offsets[b])
                self.trainer.train_job(indices[lo:hi], offsets[a:b + 1] - lo, job.alpha, self.rng, False)
            done_before = raw * int(offsets[a]) // total if total and a else 0
            self.words += (raw * int(offsets[b]) // total if b < n_sent and total else raw) - done_before
            self.at = b
            if b >= n_sent:
                self.job = None
        return True


    def next_job(self, jobs):
        """The next job from the local queue, topped up to :data:`PREFETCH` jobs once at half."""
        if len(self.queue) <= PREFETCH // 2:
            while len(self.queue) < PREFETCH:
                job = next(jobs, None)
                if job is None:
                    break
                self.queue.append(job)
        return self.queue.popleft() if self.queue else None

    def held_rows(self):
        """The rows of the jobs this worker holds (in training and queued), as a worker asks for them."""
        parts = [job.indices for job in self.queue] + ([self.job.indices] if self.job is not None else [])
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint32)


class Simulation:
    """K workers and one server over every row, on the cluster's merge code."""

    def __init__(self, model, k, settings, damp_words=None, all_rows_down=False, damp_output=None, hot=None,
                 value_codec=None, all_tree_rows=False, out_hot=None, cold_output_every=None, out_sightings=None):
        from gensim_distw2v import protocol
        from gensim_distw2v._inner import JobTrainer
        from gensim_distw2v.core.kernel import model_arrays, node_counts, reverse_tree
        from gensim_distw2v.core.merge import GlobalWeights
        from gensim_distw2v.core.replica import Replica
        from gensim_distw2v.core.schedule import (damp_words as damp_clock, damped_rows, default_cold_output_down,
                                                  default_cold_output_every, default_sync_words, hot_rows,
                                                  output_hot_rows, tree_hot_rows, wanted_only)
        from gensim_distw2v.protocol.transfers import row_ranges

        kernel, arrays = model_arrays(model)
        arrays = reverse_tree(arrays)  # hs: tree nodes busiest first, as the cluster trains them
        if not model.sample:
            arrays.pop("sample_int", None)
        self.names = [name for name in protocol.WEIGHTS if name in arrays]
        static = {name: a for name, a in arrays.items() if name not in self.names}
        self.n_rows, self.size = len(model.wv), model.wv.vector_size
        counts = model.wv.expandos["count"]
        self.settings = settings
        self.sync_words = int(settings.sync_words or default_sync_words(k, model.corpus_total_words, sg=bool(model.sg)))
        self.hot = hot if hot is not None else hot_rows(counts, self.sync_words)
        if out_hot is None:  # the cluster's (schedule.output_hot_rows; hot is given only by --hot-rows)
            out_hot = self.hot if hot is not None else output_hot_rows(
                counts, self.sync_words, model.negative, getattr(model, "cum_table", None), bool(model.sg),
                **({} if out_sightings is None else {"sightings": out_sightings}))
        self.out_hot = max(self.hot, min(self.n_rows, out_hot))
        self.cold_output_every = cold_output_every or default_cold_output_every(bool(model.sg))
        self.cold_output_down = settings.cold_output_down or default_cold_output_down(bool(model.sg))
        tree = node_counts(arrays["points"], arrays["code_offsets"], counts, self.n_rows) if "syn1" in arrays else None
        damp = damped_rows(counts, damp_words or damp_clock(self.sync_words), tree_counts=tree,
                           output_most=settings.damp_output_rows)
        if damp_output is not None:
            damp["syn1neg"] = min(self.n_rows, damp_output)
        # hs: syn1's hot rows, as the cluster's client counts them (-1: every row, --all-tree-rows)
        self.tree_hot = -1 if tree is None or all_tree_rows else \
            tree_hot_rows(tree, np.sum(counts, dtype=np.float64), self.sync_words) or -1
        self.server = GlobalWeights({name: np.array(arrays[name]) for name in self.names}, settings.merge, damp,
                                    settings.merge_dtype, value_codec=value_codec,
                                    delta_rows={"syn0": self.hot, "syn1neg": self.out_hot, "syn1": max(0, self.tree_hot)},
                                    wanted_only=wanted_only(self.cold_output_down))
        self.ranges = row_ranges(self.n_rows, 4 * self.size * len(self.names), settings.part_bytes)
        self.workers = []
        for rank in range(k):
            self.server.add_worker(rank)
            replica = Replica({name: self.server.download(name, 0, self.n_rows, rank) for name in self.names})
            rng = np.random.RandomState(model.seed)
            if rank == 0 and isinstance(model.random, np.random.RandomState):
                rng.set_state(model.random.get_state())  # continues the model's stream, as rank 0's first thread
            else:
                rng.seed([model.seed & 0xFFFFFFFF, rank, 0, 0x5EED])
            self.workers.append(SimWorker(rank, replica, JobTrainer(**kernel, **replica.replica, **static), rng))
        self.all_rows_down = all_rows_down
        self.every_round = ()
        self.local = False
        self.bytes_up = self.bytes_down = self.rounds = 0
        self.hot_up = self.hot_down = 0  # of those, the hot rows' (syn0 and syn1neg rows below self.hot)
        self.worker_cpu = self.server_cpu = self.kernel_cpu = 0.0

    def merge(self, worker, flush):
        """One merge round of ``worker`` (an exact flush at epoch ends), part by part, with the rows the cluster's
        worker takes (``schedule.round_rows``) and its shard replies with (``schedule.row_limits``)."""
        from gensim_distw2v.core.schedule import output_down, round_rows, row_limits

        settings = self.settings
        worker.rounds += 1
        every_row, hot, tree, up_limits = round_rows(worker.rounds, self.hot, self.tree_hot, settings.cold_every,
                                                     self.cold_output_every, flush=flush, output_hot_rows=self.out_hot)
        limits = row_limits(hot, tree, None if hot < 0 else self.out_hot)  # (the reply's, as a shard reads the part)
        top = self.n_rows if every_row or ("syn1" in self.names and self.tree_hot < 0) else \
            max(self.hot, self.tree_hot, self.out_hot)
        if not every_row and self.every_round:  # experiment: these matrices' every row in every round
            limits = dict(limits) if isinstance(limits, dict) else {"syn0": limits, "syn1neg": limits, "syn1": -1}
            limits.update({name: -1 for name in self.every_round})
            up_limits, top = limits, self.n_rows
        codec, hold_back = ("float32", 0.0) if flush else (settings.merge_dtype, settings.hold_back)
        wanted = None if flush or self.all_rows_down else worker.held_rows()
        down = output_down(self.cold_output_down, worker.rounds, settings.cold_every, self.cold_output_every, flush)
        parts = [(lo, hi) for lo, hi in self.ranges if lo < top] or self.ranges[:1]
        for lo, hi in parts:
            cpu = time.thread_time()
            deltas = worker.replica.take_delta(lo, hi, codec, hold_back, up_limits)
            between = time.thread_time()
            if wanted is not None:  # of the rows beyond the hot ones, as the worker names them
                mask = np.zeros(hi - lo, dtype=bool)
                mask[wanted[np.searchsorted(wanted, max(lo, self.hot)):np.searchsorted(wanted, hi)].astype(np.int64)
                     - lo] = True
            missed, values = self.server.apply(worker.rank, lo, hi, deltas, hold_back, flush, limits,
                                               None if wanted is None else mask, output_down=down)
            after = time.thread_time()
            worker.replica.take_in(missed, values)
            self.worker_cpu += (between - cpu) + (time.thread_time() - after)
            self.server_cpu += after - between
            self.bytes_up += sum(_nbytes(d) for d in deltas.values()) + (0 if wanted is None else min(
                4 * int(mask.sum()), (hi - lo + 7) // 8))  # the wanted rows, as the worker packs them
            self.bytes_down += sum(_nbytes(d) for way in (missed, values) for d in way.values())
            self.hot_up += sum(_nbytes(d, self.hot) for d in deltas.values())
            self.hot_down += sum(_nbytes(d, self.hot) for way in (missed, values) for d in way.values())
        worker.words = 0
        self.rounds += 1

    def train(self, sentences, model, epochs):
        """Every epoch: rounds until the jobs run out, then every worker flushes."""
        from gensim_distw2v.core.jobs import iter_epoch_jobs
        from gensim_distw2v.core.kernel import MAX_WORDS_IN_JOB, reverse_tree_order

        for epoch in range(epochs):
            jobs = iter(iter_epoch_jobs(
                sentences, model.wv.key_to_index, batch_words=model.batch_words, cur_epoch=epoch, epochs=epochs,
                start_alpha=model.alpha, end_alpha=model.min_alpha, total_examples=model.corpus_count,
                total_words=model.corpus_total_words, max_sentence_length=MAX_WORDS_IN_JOB))
            more = True
            while more:
                for worker in self.workers:
                    cpu = time.thread_time()
                    more = worker.train_interval(jobs, self.sync_words) and more
                    self.kernel_cpu += time.thread_time() - cpu
                    if worker.words >= self.sync_words and self.local:
                        worker.words = 0  # jobs are pulled in the same order; nothing merges
                    elif worker.words >= self.sync_words:
                        self.merge(worker, flush=False)
            for worker in self.workers:
                self.merge(worker, flush=True)
        for name in self.names:  # the global model is the trained one
            target = {"syn0": model.wv.vectors, "syn1neg": getattr(model, "syn1neg", None),
                      "syn1": getattr(model, "syn1", None)}[name]
            trained = self.server.weights[name]
            target[...] = trained[reverse_tree_order(len(trained))] if name == "syn1" else trained
        model.wv.fill_norms(force=True)


METRICS = ("analogy", "ws353", "simlex", "truth", "truth_analogy")


def _scores(row, signed=False):
    """A run's scores (or their deltas) as printed: analogies in points, correlations as they are."""
    return " ".join(f"{key} " + (f"{100 * row[key]:+.2f} points" if key.endswith("analogy") and signed else
                                 f"{row[key]:+.4f}" if signed else f"{row[key]:.4f}")
                    for key in METRICS if key in row)


def _nbytes(deltas, below=None):
    """Bytes of one matrix's ``(rows, values, scales)`` (of its rows below ``below`` only, if given)."""
    if below is not None:
        n = int(np.searchsorted(deltas[0], below))
        deltas = [None if a is None else a[:n] for a in deltas]
    return sum(0 if a is None else a.nbytes for a in deltas)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s : %(levelname)s : %(message)s", level=logging.WARNING)
    import copy

    from gensim_distw2v.config.settings import Settings

    sentences = load_corpus(args.corpus, args.max_words, args.stream)
    if args.pairs:  # a synthetic corpus's known answer: its pairs' similarity, and its analogies if it has them
        from compare_gensim import truth_analogies
        from synth_corpus import analogy_score, score

        analogies = truth_analogies(args.pairs)

        def evaluate(wv):  # noqa: F811 - the scores of this run
            out = {"truth": score(wv, args.pairs)}
            if analogies:
                out["truth_analogy"] = analogy_score(wv, analogies)
            return out
    else:
        from compare_gensim import evaluate
    template = new_model(args, sentences)
    words = template.corpus_total_words * args.epochs
    print(f"corpus {template.corpus_total_words} words, vocabulary {len(template.wv)}; sg={args.sg} hs={args.hs} "
          f"epochs={args.epochs} seed={args.seed}", flush=True)
    result = {"args": vars(args), "runs": []}
    if not args.no_baseline:
        model = copy.deepcopy(template)
        start = time.process_time()
        model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs)
        result["gensim"] = dict(evaluate(model.wv), cpu_us=(time.process_time() - start) / words * 1e6)
        print("  gensim workers=1: " + _scores(result["gensim"]), flush=True)
    given = {key: value for key, value in (("sync_words", args.sync_words), ("merge", args.merge),
                                           ("hold_back", args.hold_back),
                                           ("cold_every", args.cold_every), ("merge_dtype", args.merge_dtype),
                                           ("cold_output_down", args.cold_output_down),
                                           ("damp_output_rows", args.damp_output_rows))
             if value is not None}
    settings = Settings(**given)
    for k in (int(x) for x in args.workers.split(",")):
        model = copy.deepcopy(template)
        sim = Simulation(model, k, settings, args.damp_words, args.all_rows_down, args.damp_output, args.hot_rows,
                         args.value_codec, args.all_tree_rows, args.output_hot_rows, args.cold_output_every,
                         args.output_hot_sightings)
        sim.local = args.local
        sim.every_round = tuple(name for name in args.every_round.split(",") if name)
        started = time.perf_counter()
        sim.train(sentences, model, args.epochs)
        run = dict(K=k, sync_words=sim.sync_words, corpus_words=template.corpus_total_words, hot_rows=sim.hot,
                   output_hot_rows=sim.out_hot, tree_hot_rows=sim.tree_hot,
                   damp_rows=sim.server.damp_rows,
                   seconds=time.perf_counter() - started, **evaluate(model.wv),
                   bytes_up_per_word=sim.bytes_up / words, bytes_down_per_word=sim.bytes_down / words,
                   hot_bytes_up_per_word=sim.hot_up / words, hot_bytes_down_per_word=sim.hot_down / words,
                   rounds_per_mword=sim.rounds / words * 1e6, worker_merge_us=sim.worker_cpu / words * 1e6,
                   server_us=sim.server_cpu / words * 1e6, kernel_us=sim.kernel_cpu / words * 1e6,
                   max_abs=float(max(np.abs(w).max() for w in sim.server.weights.values())))
        if "gensim" in result:
            run["delta"] = {key: run[key] - result["gensim"][key] for key in METRICS if key in run}
        result["runs"].append(run)
        delta = run.get("delta")
        print(f"  K={k} sync_words={sim.sync_words}: {_scores(run)}"
              + (f" (against gensim {_scores(delta, signed=True)})" if delta else "")
              + f"; {run['bytes_up_per_word']:.0f}/{run['bytes_down_per_word']:.0f} B "
              f"up/down (hot rows {run['hot_bytes_up_per_word']:.0f}/{run['hot_bytes_down_per_word']:.0f}), "
              f"{run['rounds_per_mword']:.0f} rounds/Mw; merge CPU per word {run['worker_merge_us']:.3f} us "
              f"workers, {run['server_us']:.3f} us server; max |w| {run['max_abs']:.1f}; {run['seconds']:.0f} s",
              flush=True)
    if args.json:
        print(json.dumps({"provenance": provenance(), **result}))


if __name__ == "__main__":
    main()
