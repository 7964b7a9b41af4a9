"""A training session seen from the client: the job producer, the epochs, the callbacks.

:class:`DistributedTraining` runs one ``train()`` call of a :class:`gensim_distw2v.Word2Vec` on a
cluster: it opens a session on the dispatcher with the model's hyper-parameters and static
arrays, gives the weights to the session's parameter shards (:mod:`~gensim_distw2v.client.session`,
over :mod:`~gensim_distw2v.client.links`), streams the corpus as encoded jobs with gensim's cuts
and learning rates (never holding more than a few jobs) or, with ``corpus_file``, lets the workers
read the shared file's byte ranges themselves, logs gensim-style progress
(:mod:`~gensim_distw2v.client.report`), runs the epoch callbacks, and copies the merged weights
back from the shards into the model.

With ``checkpoint_dir``, it asks for a checkpoint at every epoch end, and when the dispatcher or a
shard is lost it waits up to ``cluster_timeout`` for the cluster to be back and resumes the run
from the last checkpoint (:mod:`~gensim_distw2v.client.checkpoints`: a new session that starts
where the checkpoint left off: the jobs it trained are skipped, the corpus file's trained ranges
are not handed out); ``resume_from`` does the same for a run whose client died.
"""
import logging
import os
import time

from gensim_distw2v import protocol
from gensim_distw2v.io import keys, transport
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.io.board import Board
from gensim_distw2v.protocol import errors
from gensim_distw2v.core.jobs import iter_epoch_jobs, next_alpha
from gensim_distw2v.core.kernel import MAX_WORDS_IN_JOB
from gensim_distw2v.client.checkpoints import SkippedJobs, Resumes, _Lost, _Retry
from gensim_distw2v.client.links import ShardLinks, ShardLostError, find_dispatcher, wait_for_workers
from gensim_distw2v.client.readable import readable_file
from gensim_distw2v.client.report import Reports
from gensim_distw2v.client.run import RunState
from gensim_distw2v.client.session import SessionSetup

logger = logging.getLogger(__name__)

__all__ = ["DistributedTraining", "SkippedJobs", "ShardLinks", "find_dispatcher", "wait_for_workers"]

JOBS_PER_CALL = 8
WORKERS_DROPPED_LOSS = "every worker of the session was dropped from the cluster"  # (a loss: resumed with checkpoints)
FINISH_WAIT = 1.0  # seconds an epoch-end wait asks the dispatcher to hold its answer (a long poll)
# The client streaming an iterable is "the cap" when it spent this share of an epoch's streaming producing
# jobs (reading, splitting, encoding) rather than waiting for room in the dispatcher's queue; epochs
# streamed in less than PRODUCER_MIN_SECONDS are not judged (start-up dominates).
PRODUCER_CAP_SHARE = 0.9
PRODUCER_MIN_SECONDS = 2.0


class DistributedTraining:
    """One ``train()`` call of a model on a cluster: the job producer and the epochs, with its
    collaborators (each handed the call's :class:`~gensim_distw2v.client.run.RunState`): ``setup``
    opens sessions and brings the weights back, ``resumes`` runs the sessions after losses and waits
    for checkpoints, ``reports`` writes progress, the summary and TensorBoard points.

    Parameters
    ----------
    model, ns_conf, settings
        As :class:`~gensim_distw2v.client.run.RunState` takes them: the model (vocabulary built), where
        the name server is, and how to train on the cluster (default: the model's ``settings``).
    """

    def __init__(self, model, ns_conf, settings=None):
        self.run = RunState(model, ns_conf, settings)
        self.setup = SessionSetup(self.run)
        self.resumes = Resumes(self.run, self._check_workers)
        self.reports = Reports(self.run)
        self._put_seconds = 0.0  # of an epoch's streaming, the time spent handing jobs over (the rest: producing)

    @property
    def model(self):
        """The model trained (:attr:`RunState.model <gensim_distw2v.client.run.RunState>`)."""
        return self.run.model

    @property
    def settings(self):
        """The run's settings (a resumed run's name its checkpoint folder)."""
        return self.run.settings

    @property
    def stats(self):
        """The last session's figures (``Word2Vec.cluster_stats``)."""
        return self.run.stats

    def train(self, corpus_iterable, total_examples, total_words, epochs, compute_loss, callbacks,
              report_delay=1.0, corpus_file=None, resume_from=None):
        """Train ``epochs`` passes over ``corpus_iterable`` (or over ``corpus_file``, which every
        worker reads at the same path) on the cluster.

        With ``checkpoint_dir`` set, a lost dispatcher or shard is waited for (``cluster_timeout``)
        and the run resumed from its last checkpoint; ``resume_from`` (a checkpoint folder) goes on
        with a run whose client died.

        Returns
        -------
        (int, int)
            Effective and raw words trained, as gensim's ``train()`` returns them.
        """
        if resume_from is not None:
            folder = os.path.abspath(os.fspath(resume_from))
            if self.settings.checkpoint_dir not in (None, folder):
                raise ValueError(f"resume_from={folder!r} and checkpoint_dir={self.settings.checkpoint_dir!r} differ: "
                                 f"a resumed run goes on writing its checkpoints where it reads them; give one folder")
            self.run.settings = self.settings.replace(checkpoint_dir=folder)
        args = (corpus_iterable, total_examples, total_words, epochs, compute_loss, callbacks, report_delay,
                corpus_file)
        readable = self._readable(corpus_iterable, total_examples, total_words) if corpus_file is None else None
        run = self.run
        run.given_file = corpus_file is not None
        run.board = None if self.settings.tensorboard_dir is None else Board(self.settings.tensorboard_dir)
        try:
            if readable is None:
                trained = self._sessions(args, resume_from)
            else:
                try:
                    trained = self._sessions((None, total_examples, readable.total_words) + args[3:-1] +
                                             (readable.corpus_file,), resume_from)
                except errors.CorpusFileMismatch as err:
                    logger.warning("%s; so the client streams the %s itself (workers_read=True)", err, readable.kind)
                    trained = self._sessions(args, resume_from)
            if run.board is not None:
                run.board.projector(self.model.wv, self.settings.tensorboard_words)
            return trained
        finally:
            if run.board is not None:
                run.board.close()

    def _sessions(self, args, resume_from):
        """The run's sessions over ``args`` (:meth:`_run`'s), resumed after losses: ``(effective, raw)``."""
        return self.resumes.train(lambda resume, below: self._run(*args, resume=resume, below=below), resume_from)

    def _readable(self, corpus, total_examples, total_words):
        """The file the workers read instead of ``corpus`` streamed by the client (a ``LineSentence``
        of a plain file: :mod:`~gensim_distw2v.client.readable`), or None; logs why not."""
        if not self.settings.workers_read:
            return None
        model = self.model
        readable, why = readable_file(corpus, total_examples, total_words, getattr(model, "corpus_count", None),
                                      getattr(model, "corpus_total_words", None))
        if why is not None:
            logger.info("the client streams the %s itself: %s", type(corpus).__name__, why)
        if readable is not None:
            logger.info("the workers read the %s's %s %s themselves, in byte ranges as a corpus_file "
                        "(workers_read=True)", readable.kind, "file" if readable.files is None else
                        f"{len(readable.files)} files in", readable.path)
        return readable

    def _connect(self, resume):
        """The dispatcher; resuming, waited for up to ``cluster_timeout`` (it may be restarting)."""
        deadline = time.monotonic() + (self.settings.cluster_timeout if resume else 0.0)
        while True:
            try:
                return find_dispatcher(self.run.ns_conf, self.run.hmac_key)
            except ClusterError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def _run(self, corpus_iterable, total_examples, total_words, epochs, compute_loss, callbacks, report_delay,
             corpus_file, resume=False, below=None):
        """One session of the run (a run resumed after a loss has several): ``(effective, raw)``."""
        model, run = self.model, self.run
        dispatcher = self._connect(resume)
        sid = links = None
        try:
            n_workers = wait_for_workers(dispatcher, run.ns_conf, self.settings.cluster_timeout)
            if resume:
                self.resumes.wait_for_shards(dispatcher)
            threads = sum(m.threads for m in dispatcher.call("status").workers.values()) if corpus_file else None
            config, arrays = self.setup.config(n_workers, compute_loss, epochs, corpus_file, total_words,
                                               total_examples, resume=resume, below=below, threads=threads)
            sid, links, resumed = self.setup.open(dispatcher, config, arrays)
            run.shard_count = len(links.shards)
            logger.info("training on a cluster of %i workers and %i parameter shards (session %s), merge=%s every %i "
                        "words per worker%s", n_workers, len(links.shards), sid, self.settings.merge,
                        config.settings.sync_words, "" if resumed is None else
                        f", resumed from checkpoint {resumed.checkpoint} at epoch {resumed.epoch}")
            if corpus_file is not None:
                self._check_file(dispatcher, sid, config.corpus_file)
            start = run.session_start = time.monotonic()
            first = 0 if resumed is None else resumed.epoch
            job_id = 0 if resumed is None else resumed.first_job
            for epoch in range(first, epochs):
                if epoch not in run.begun:
                    run.begun.add(epoch)
                    for callback in callbacks:
                        callback.on_epoch_begin(model)
                if corpus_file is not None:
                    dispatcher.call("open_file_epoch", session=sid, epoch=epoch, token=run.token)
                    run.next_report = time.monotonic() + report_delay
                    self._finish_epoch(dispatcher, sid, epoch, time.monotonic(), total_examples, total_words,
                                       report_delay)
                    model.min_alpha_yet_reached = next_alpha(model.alpha, model.min_alpha, epoch, epochs,
                                                             1.0 / config.corpus_file.rate_threads)
                else:
                    skip = resumed if resumed is not None and epoch == resumed.epoch else None
                    job_id = self._train_epoch(dispatcher, sid, corpus_iterable, epoch, epochs, total_examples,
                                               total_words, job_id, report_delay, skip)
                if config.checkpoint is not None:
                    self.resumes.checkpoint(dispatcher, sid, last=epoch == epochs - 1)
                quality = run.board is not None and self.settings.tensorboard_quality
                if callbacks or quality:
                    self.setup.download_weights(links, sid)
                if run.board is not None:
                    self.reports.board_epoch(dispatcher, sid, epoch, quality)
                for callback in callbacks:
                    callback.on_epoch_end(model)
            self.setup.download_weights(links, sid)
            final = dispatcher.call("progress", session=sid, token=run.token, nodes=True)
            # every epoch's words, counted once (a resumed session starts with the checkpoint's counts)
            trained = sum(final.epoch(e).effective_words for e in range(epochs))
            raw = sum(final.epoch(e).raw_words for e in range(epochs))
            self.reports.summarise(final, links, sid, config, start, trained, raw)
            return trained, raw
        except _Retry:
            raise
        except errors.ClusterFault as err:  # a call refused: the session failed meanwhile (its cause), or else
            failure = self._failure(err.code, str(err))
            if failure is err:
                raise
            if failure.code is errors.Code.SHARD_LOST:
                raise _Lost("lost a parameter shard", failure) from None
            if failure.code is errors.Code.WORKERS_DROPPED:
                raise _Lost(WORKERS_DROPPED_LOSS, failure) from None
            raise failure from None
        except transport.CommunicationError as err:
            host, port, _broadcast, _key = keys.ns_settings(run.ns_conf)
            dispatcher.timeout = 2.0  # it may hang: do not wait long to close the session
            raise _Lost(f"lost the dispatcher during training ({type(err).__name__}: {err})", ClusterError(
                f"lost the dispatcher during training ({type(err).__name__}: {err}); this train() call did not "
                f"finish and the model keeps the weights it had before it (or at the last epoch end, with "
                f"callbacks). Once a dispatcher runs again (python -m gensim_distw2v.dispatcher --ns-host {host} "
                f"--ns-port {port}), the workers rejoin it by themselves: call train() again"
                + ("" if self.settings.checkpoint_dir is None else
                   f" with resume_from={self.settings.checkpoint_dir!r} to go on from its last checkpoint"))) from None
        except ClusterError as err:
            if err.code is not errors.Code.SHARD_LOST:
                raise
            raise _Lost("lost a parameter shard", err) from None
        finally:
            if links is not None:
                links.close(sid)
            if sid is not None:
                try:
                    dispatcher.call("close", session=sid, token=run.token)
                except transport.PyroError as err:
                    logger.warning("could not close session %s on the dispatcher: %s", sid, err)
            transport.release(dispatcher)

    def _train_epoch(self, dispatcher, sid, corpus, epoch, epochs, total_examples, total_words, job_id,
                     report_delay, skip=None):
        """Put one epoch's jobs and wait until they are trained; returns the next job id. ``skip``
        (a :class:`gensim_distw2v.protocol.Resumed`): the jobs a checkpoint trained are not put again,
        and their words must be those it trained (else the corpus is another one)."""
        model = self.model
        jobs = iter_epoch_jobs(
            corpus, model.wv.key_to_index, batch_words=model.batch_words, cur_epoch=epoch, epochs=epochs,
            start_alpha=model.alpha, end_alpha=model.min_alpha, total_examples=total_examples,
            total_words=total_words, max_sentence_length=MAX_WORDS_IN_JOB)
        start = time.monotonic()
        self.run.next_report = start + report_delay
        self._put_seconds = 0.0
        batch = []
        skipped = SkippedJobs(skip)
        for job in jobs:
            if skipped.skips(job_id, job):
                job_id += 1
                continue
            batch.append(protocol.Job.of(job_id, epoch, job).to_wire())
            job_id += 1
            model.min_alpha_yet_reached = job.alpha
            if len(batch) >= JOBS_PER_CALL:
                self._put(dispatcher, sid, batch, epoch, start, total_examples, total_words, report_delay)
                batch = []
        skipped.finish()
        if batch:
            self._put(dispatcher, sid, batch, epoch, start, total_examples, total_words, report_delay)
        self._producer_share(epoch, time.monotonic() - start)
        dispatcher.call("end_epoch", session=sid, epoch=epoch, token=self.run.token)
        if job_id == 0 and model.train_count == 0:
            logger.warning("train() called with an empty iterator (if not intended, be sure to provide a corpus "
                           "that offers restartable iteration = an iterable).")
        self._finish_epoch(dispatcher, sid, epoch, start, total_examples, total_words, report_delay)
        return job_id

    def _check_file(self, dispatcher, sid, spec):
        """Wait for every registered worker's verdict on the corpus file; raise if any does not see it."""
        deadline = time.monotonic() + self.settings.cluster_timeout
        while True:
            progress = dispatcher.call("progress", session=sid, token=self.run.token)
            checks = progress.file_checks
            workers = set(dispatcher.call("status").workers)
            problems = {name: problem for name, problem in checks.items() if problem}
            if progress.failure is not None or (checks and progress.file_waiting == 0) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self._check_workers(progress)  # the session failed on every worker (before its check, say)
        if problems:
            raise errors.CorpusFileMismatch(
                f"corpus_file {spec.path}: {len(problems)} of {len(workers | set(checks))} workers do not see the "
                f"file this client sees ({spec.size} bytes) at that path: "
                + "; ".join(f"worker {name}: {problem}" for name, problem in sorted(problems.items()))
                + ". Every worker must read the same file at the same path (a shared filesystem, or the same "
                  "copy at that path on every node); nothing was trained")
        if not checks:
            raise ClusterError(
                f"no worker checked the corpus file {spec.path} within {self.settings.cluster_timeout:.0f} s: "
                f"are the workers alive? (python -m gensim_distw2v.worker)")
        logger.info("corpus_file %s (%i bytes, %i ranges of %i bytes per epoch) is the same on all %i workers",
                    spec.path, spec.size, -(-spec.size // spec.range_bytes), spec.range_bytes,
                    len(checks))

    def _finish_epoch(self, dispatcher, sid, epoch, start, total_examples, total_words, report_delay):
        """Wait until every job of ``epoch`` is merged and flushed, reporting progress; ``(effective, raw)``."""
        model = self.model
        while True:  # a long poll: answered at the epoch's end, or when a report is due (FINISH_WAIT at most)
            due = max(0.0, self.run.next_report - time.monotonic())
            progress = dispatcher.call("progress", session=sid, token=self.run.token, nodes=due <= FINISH_WAIT,
                                       epoch=epoch, wait=min(FINISH_WAIT, due) or 0.01)
            counts = progress.epoch(epoch)
            # done: every job merged, and every worker flushed what it held back
            if counts.done >= counts.put and progress.flushed is not None and progress.flushed >= epoch:
                break
            self._check_workers(progress)
            self.reports.report(progress, epoch, start, total_examples, total_words, report_delay)
        elapsed = time.monotonic() - start
        raw, effective, examples = counts.raw_words, counts.effective_words, counts.examples
        model.running_training_loss = float(progress.loss)
        logger.info("EPOCH %i: training on %i raw words (%i effective words) took %.1fs, %.0f effective words/s",
                    epoch, raw, effective, elapsed, effective / max(elapsed, 1e-9),
                    extra={"progress": self.reports.figures(progress, epoch, 1.0, total_words, max(elapsed, 1e-9))})
        if total_examples and total_examples != examples:
            logger.warning("EPOCH %i: supplied example count (%i) did not equal expected count (%i)", epoch,
                           examples, total_examples)
        if total_words and total_words != raw:
            logger.warning("EPOCH %i: supplied raw word count (%i) did not equal expected count (%i)", epoch, raw,
                           total_words)
        return effective, raw

    def _producer_share(self, epoch, seconds):
        """Log when the client, reading and encoding the corpus, was what the workers waited for: it
        handed jobs over without ever waiting for room in the dispatcher's queue."""
        if seconds < PRODUCER_MIN_SECONDS:
            return
        busy = 1.0 - self._put_seconds / seconds
        if busy >= PRODUCER_CAP_SHARE:
            logger.warning(
                "EPOCH %i: the client was busy reading and encoding the corpus %.0f%% of the %.1f s it streamed "
                "it (one Python thread): the client, not the cluster, capped the speed. A LineSentence of a file "
                "every worker sees, or corpus_file=, lets the workers read it themselves (docs/corpus_file.rst)",
                epoch, 100.0 * busy, seconds)
        else:
            logger.debug("EPOCH %i: the client was busy producing jobs %.0f%% of the time", epoch, 100.0 * busy)

    def _put(self, dispatcher, sid, batch, epoch, start, total_examples, total_words, report_delay):
        """Queue ``batch`` (the dispatcher takes a call whole, waiting while its queue is full);
        progress is asked for only when a report is due or the queue stays full (workers gone?)."""
        began = time.monotonic()
        while batch:
            taken = dispatcher.call("put_jobs", session=sid, jobs=batch, token=self.run.token)
            batch = batch[taken:]
            if batch or time.monotonic() >= self.run.next_report:
                progress = dispatcher.call("progress", session=sid, token=self.run.token,
                                           nodes=time.monotonic() >= self.run.next_report)
                self._check_workers(progress)
                self.reports.report(progress, epoch, start, total_examples, total_words, report_delay)
        self._put_seconds += time.monotonic() - began  # handing over, not producing (_producer_share)

    def _check_workers(self, progress):
        """Log a checkpoint that failed unawaited; raise the session's failure, if it failed."""
        run = self.run
        state = progress.checkpoints
        if state is not None and state.failed > run.failed_reported and \
                (run.awaiting is None or state.failed < run.awaiting):
            # one the client did not wait for (a timed one, or an epoch end's that failed once copied)
            logger.error("checkpoint %i failed (%s); training goes on, the last complete one is %i", state.failed,
                         state.error, state.committed)
            run.failed_reported = state.failed
        if progress.failure is not None:  # the session failed: its cause, as the error its code calls for
            failure = self._failure(errors.Code(progress.failure.code), progress.failure.message)
            if failure.code is errors.Code.WORKERS_DROPPED:
                raise _Lost(WORKERS_DROPPED_LOSS, failure)
            raise failure

    def _failure(self, code, message):
        """The error ``train()`` raises for a session that failed with ``code`` (the dispatcher's
        ``message``, and what it means for the model and how to go on); a code that is not a
        session's failure: its fault as is."""
        keeps = "the model keeps the weights it had before it (or at the last epoch end, with callbacks)"
        if code is errors.Code.SHARD_LOST:
            host, port, _broadcast, _key = keys.ns_settings(self.run.ns_conf)
            return ShardLostError(
                f"{message}: it held part of the weights, so this train() call cannot finish; {keeps}. Restart "
                f"the shard with: python -m gensim_distw2v.shard --ns-host {host} --ns-port {port}, then call "
                f"train() again")
        if code is errors.Code.POISONED:
            return ClusterError(
                f"{message}. The model keeps the weights it had before this call (or at the last epoch end, with "
                f"callbacks). Find out what runs under that worker's name (its log, its host) before training again",
                code)
        if code is errors.Code.NO_WORKERS:
            return ClusterError(message, code)
        if code is errors.Code.WORKERS_DROPPED:
            return errors.WorkersDropped(
                f"{message}. The workers rejoin the cluster by themselves; {keeps}: call train() again"
                + ("" if self.settings.checkpoint_dir is None else
                   f" with resume_from={self.settings.checkpoint_dir!r} to go on from its last checkpoint"))
        if code is errors.Code.CORPUS_FILE:
            return errors.CorpusFileMismatch(
                f"{message}. Every worker must read the same file at the same path (a shared filesystem, or the "
                f"same copy at that path on every node); nothing was trained")
        return errors.fault(code, message)
