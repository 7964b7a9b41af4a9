"""What the client tells its user: progress lines, the closing summary, TensorBoard points.

:class:`Reports` tells them for :class:`gensim_distw2v.client.training.DistributedTraining`.
"""
import logging
import time

from gensim_distw2v.io.board import evaluate

logger = logging.getLogger(__name__)

__all__ = ["Reports"]


def _per_word(worker):
    """``"up/down B/w"``: a worker's (:class:`gensim_distw2v.protocol.WorkerCounts`) bytes sent and
    received per raw word it trained (merged)."""
    words = max(1, worker.words)
    return f"{worker.bytes_up / words:.0f}/{worker.bytes_down / words:.0f} B/w"


def _node_brief(name, node):
    """``"worker 3f9a 97% 210MB"``: a node's (:class:`gensim_distw2v.protocol.NodeMetrics`) role, id,
    CPU share of one core over the session and resident memory, for the progress lines."""
    short = name.rsplit(".", 1)[-1]
    label = node.role if short == node.role else f"{node.role} {short}"
    return f"{label} {100 * node.cpu / max(node.seconds, 1e-9):.0f}% {node.rss / 2 ** 20:.0f}MB"


def _node_line(name, node):
    """A node's closing summary (:class:`gensim_distw2v.protocol.NodeMetrics`), for the log."""
    return (f"{name}: {node.words} words ({node.words / max(node.seconds, 1e-9):.0f} words/s), CPU seconds kernel "
            f"{node.kernel_cpu:.1f} / merge {node.merge_cpu:.1f} / other {node.other_cpu:.1f} "
            f"({100 * node.cpu / max(node.seconds, 1e-9):.0f}% of a core), RSS {node.rss / 2 ** 20:.0f} MB (peak "
            f"{node.peak_rss / 2 ** 20:.0f} MB), sent {node.bytes_sent / 1e6:.1f} MB, received "
            f"{node.bytes_received / 1e6:.1f} MB")



class Reports:
    """A training's progress lines, its closing summary and its TensorBoard points.

    Parameters
    ----------
    run : gensim_distw2v.client.run.RunState
        The run (its model, clocks and TensorBoard writer; :meth:`summarise` sets its ``stats``).
    """

    def __init__(self, run):
        self.run = run

    def report(self, progress, epoch, start, total_examples, total_words, report_delay):
        now = time.monotonic()
        if now < self.run.next_report:
            return
        self.run.next_report = now + report_delay
        elapsed = max(now - start, 1e-9)
        counts = progress.epoch(epoch)
        share = counts.examples / total_examples if total_examples else counts.raw_words / max(1, total_words or 0)
        done = "%.2f%% %s" % (100.0 * share, "examples" if total_examples else "words")
        session_elapsed = max(now - self.run.session_start, 1e-9)  # workers' words count over the session
        per_worker = ", ".join(f"{name.rsplit('.', 1)[-1]} {w.words / session_elapsed:.0f} w/s {_per_word(w)}"
                               for name, w in sorted(progress.workers.items()))
        up, down = progress.total("bytes_up") / 1e6, progress.total("bytes_down") / 1e6
        logger.info("EPOCH %i - PROGRESS: at %s, %.0f words/s, in_qsize %i, out_qsize %i; %i workers (raw words/s, "
                    "bytes per word up/down: %s); %i merges, %.1f MB up, %.1f MB down; nodes (CPU, RSS): %s", epoch,
                    done, counts.effective_words / elapsed, progress.queued, progress.in_flight, len(progress.workers),
                    per_worker or "-", progress.merges, up, down,
                    ", ".join(_node_brief(name, node) for name, node in sorted((progress.nodes or {}).items())) or "-",
                    extra={"progress": self.figures(progress, epoch, share, total_words, elapsed)})
        if self.run.board is not None:
            self.board_point(progress, epoch, share)

    def figures(self, progress, epoch, share, total_words, elapsed):
        """The progress as figures (a log record's ``progress``: :mod:`gensim_distw2v.client.progress`)."""
        model = self.run.model
        per_epoch = int(total_words or getattr(model, "corpus_total_words", 0) or 1)
        raw = sum(counts.raw_words for counts in progress.epochs.values())
        return {"stage": "train", "epoch": epoch, "epochs": int(model.epochs),
                "words": int((epoch + share) * per_epoch),
                "total_words": per_epoch * int(model.epochs), "words_per_s": progress.epoch(epoch).raw_words / elapsed,
                "merges": progress.merges,
                "bytes_per_word": (progress.total("bytes_up") + progress.total("bytes_down")) / max(1, raw)}

    def board_epoch(self, dispatcher, sid, epoch, quality):
        """TensorBoard at an epoch end: a point, and with ``quality`` the model's scores (the
        weights were just downloaded)."""
        progress = dispatcher.call("progress", session=sid, token=self.run.token, nodes=True)
        words = self.board_point(progress, epoch + 1, 0.0)
        if quality:
            scores = evaluate(self.run.model.wv)
            self.run.board.quality(words, scores)
            logger.info("EPOCH %i: analogy accuracy %.4f, ws353 Spearman %.4f, simlex999 Spearman %.4f", epoch,
                        scores["analogy"], scores["ws353"], scores["simlex999"])

    def board_point(self, progress, epoch, done):
        """A TensorBoard point (``done``: the share of ``epoch`` trained); returns the step (effective
        words trained in the run)."""
        model = self.run.model
        words = sum(counts.effective_words for counts in progress.epochs.values())
        share = min(1.0, (epoch + done) / max(1, model.epochs))
        alpha = model.alpha - (model.alpha - model.min_alpha) * share
        self.run.board.progress(progress, words, time.monotonic() - self.run.session_start, alpha,
                            bool(getattr(model, "compute_loss", False)))
        return words

    def _shard_stats(self, links, sid, nodes):
        """Per shard, of this session: ``{"merges", "merge_cpu", "exact_cpu", "routine_nogil_cpu", "bytes_in",
        "bytes_out", "damped"}`` (merge calls, their CPU seconds, of them the epoch flushes' and the
        compiled calls', bytes in and out, rows damped); each shard's metrics now replace its last
        heartbeat's in ``nodes``."""
        out = {}
        for shard, (name, _uri) in enumerate(links.shards):
            status = links.call(shard, "status")
            held = status.session
            if status.node is not None and status.node.session == sid:
                nodes[name] = status.node
            if held is not None and held.id == sid:
                out[name] = {key: getattr(held, key) for key in ("merges", "merge_cpu", "exact_cpu", "routine_nogil_cpu",
                                                                 "bytes_in", "bytes_out", "damped")}
        return out

    def summarise(self, final, links, sid, config, start, trained, raw):
        """``self.run.stats`` and the closing log line of a session."""
        final.nodes = final.nodes or {}
        shards = self._shard_stats(links, sid, final.nodes)
        self.run.model.running_training_loss = float(final.loss)
        elapsed = time.monotonic() - start
        up, down = final.total("bytes_up"), final.total("bytes_down")
        checkpoints = final.checkpoints
        self.run.stats = {"seconds": elapsed, "merges": final.merges, "bytes_up": up, "bytes_down": down,
                      "damped_rows": sum(s["damped"] for s in shards.values()),
                      "exact_bytes_up": final.total("exact_bytes_up"),
                      "exact_bytes_down": final.total("exact_bytes_down"),
                      "merge_seconds": final.total("merge_seconds"),
                      "merge_cpu": {"workers": final.total("merge_cpu"),
                                    "shards": sum(s["merge_cpu"] for s in shards.values())},
                      # of those, the epoch flushes' (a cost per epoch, not per interval)
                      "flush_cpu": {"workers": final.total("flush_cpu"),
                                    "shards": sum(s["exact_cpu"] for s in shards.values())},
                      # of the routine rounds', the compiled calls' (folding, taking and applying parts): no GIL
                      "routine_nogil_cpu": {"workers": final.total("routine_nogil_cpu"),
                                            "shards": sum(s["routine_nogil_cpu"] for s in shards.values())},
                      # of the workers' routine rounds', the taking of their pieces (what a piece in flight overlaps)
                      "take_cpu": final.total("take_cpu"),
                      # routine rounds taken while the one before was in flight (rounds_in_flight=2)
                      "overlapped": final.total("overlapped"),
                      # words the workers trained between taking a routine round and taking its replies in
                      "lag_words": final.total("lag_words"),
                      "stall_seconds": final.total("stall_seconds"),
                      "setup_cpu": final.total("setup_cpu"),  # the workers' joining: per session
                      "shards": shards,
                      "kernel_cpu": final.total("kernel_cpu"),
                      "workers": {name: w.to_wire() for name, w in final.workers.items()},
                      "effective_words": trained, "raw_words": raw,
                      "corpus_file": config.corpus_file is not None,  # the workers read the corpus themselves
                      "sync_words": config.settings.sync_words, "damp_rows": config.damp_rows,
                      "lag_limit": config.settings.lag_limit,
                      "hot_rows": config.hot_rows, "tree_hot_rows": config.tree_hot_rows,
                      "output_hot_rows": max(config.hot_rows, config.output_hot_rows),
                      "cold_every": config.settings.cold_every,
                      "cold_output_every": config.settings.cold_output_every,
                      "cold_output_down": config.settings.cold_output_down,
                      "rate_threads": None if config.corpus_file is None else config.corpus_file.rate_threads,
                      "checkpoints": None if checkpoints is None else checkpoints.to_wire(),
                      "call_seconds": time.monotonic() - self.run.call_start, "resumes": self.run.resumes,
                      "checkpoint_wait": self.run.checkpoint_wait,
                      "nodes": {name: dict(node.to_wire(), other_cpu=node.other_cpu)
                                for name, node in (final.nodes or {}).items()}}
        if raw and not trained:
            logger.warning("no word of the corpus is in the vocabulary (%i raw words, none trained): check that "
                           "train() gets the corpus build_vocab() saw, as lists of str tokens", raw)
        logger.info("cluster training: %i merges, %.1f MB up / %.1f MB down (%.1f / %.1f bytes per trained "
                    "word; epoch flushes %.1f / %.1f MB of them); CPU seconds: workers' kernels %.1f, their "
                    "merge rounds %.1f, the %i shards' merge calls %.1f; trainers waited %.1f s for merge rounds; "
                    "per worker, bytes per word it trained up/down: %s", final.merges, up / 1e6, down / 1e6,
                    up / max(1, trained), down / max(1, trained), self.run.stats["exact_bytes_up"] / 1e6,
                    self.run.stats["exact_bytes_down"] / 1e6, self.run.stats["kernel_cpu"],
                    self.run.stats["merge_cpu"]["workers"], len(shards), self.run.stats["merge_cpu"]["shards"],
                    self.run.stats["stall_seconds"],
                    ", ".join(f"{name.rsplit('.', 1)[-1]} {_per_word(w)}"
                              for name, w in sorted(final.workers.items())) or "-",
                    extra={"progress": {"stage": "train", "epoch": int(self.run.model.epochs) - 1,
                                        "epochs": int(self.run.model.epochs), "words": raw, "total_words": raw,
                                        "words_per_s": raw / max(elapsed, 1e-9), "merges": final.merges,
                                        "bytes_per_word": (up + down) / max(1, raw)}})
        for name, node in sorted((final.nodes or {}).items(), key=lambda item: (item[1].role, item[0])):
            logger.info("node %s", _node_line(name, node))
        if checkpoints is not None and checkpoints.count:
            logger.info("checkpoints: %i written, %.1f MB each, %.2f s each from order to commit (training went on "
                        "meanwhile); training waited %.2f s for them at epoch ends, the shards' merges %.2f s for "
                        "their copies", checkpoints.count, checkpoints.bytes / checkpoints.count / 1e6,
                        checkpoints.seconds / checkpoints.count, self.run.checkpoint_wait, checkpoints.copy_seconds)
