"""Resuming a run on the client: the run's identity, the checkpoints it waits for, its sessions after a loss.

With ``checkpoint_dir``, the client asks for a checkpoint at every epoch end, and when the
dispatcher or a shard is lost it waits up to ``cluster_timeout`` for the cluster to be back and
resumes the run from the last checkpoint (a new session that starts where the checkpoint left
off: the jobs it trained are skipped, checked by :class:`SkippedJobs`); ``resume_from`` does the
same for a run whose client died. :class:`Resumes` runs the sessions of
:class:`gensim_distw2v.client.training.DistributedTraining`.
"""
import hashlib
import logging
import time
import zlib

import numpy as np

from gensim_distw2v.protocol import errors
from gensim_distw2v.versions import versions

logger = logging.getLogger(__name__)

__all__ = ["SkippedJobs", "Resumes", "run_identity"]

MAX_RESUMES = 20  # a run resumes from its checkpoints after at most this many losses of a server
MAX_REOPENS = 5  # a session a shard refused to open (it had not heard of it) is opened again this many times
REOPEN_WAIT = 1.0  # seconds before opening it again


class _Retry(Exception):
    """A session of the run ended in a way the run may recover from (with checkpoints)."""


class _Lost(_Retry):
    """The dispatcher or a shard was lost: ``what`` happened, ``error`` is raised if the run cannot resume."""

    def __init__(self, what, error):
        super().__init__(what)
        self.what, self.error = what, error


class _NotOpened(_Lost):
    """A shard refused to open the session (it had not heard of it from the dispatcher in time: their
    heartbeat frozen or cut): nothing was trained in it, so the run opens a session again."""


class _RestoreFailed(_Retry):
    """A shard could not read its rows of checkpoint ``sequence`` (damaged on disk): resume from an older one."""

    def __init__(self, sequence, message):
        super().__init__(message)
        self.sequence = sequence


class SkippedJobs:
    """The jobs of a resumed epoch that its checkpoint trained: skipped, and checked to be the
    jobs it trained (their number and the sum of their words' CRC-32), and the epoch's first jobs
    checked to be those of the run's epochs (their CRC-32): another corpus is refused.

    Parameters
    ----------
    point : gensim_distw2v.protocol.Resumed or None
        Where the run resumes (None: nothing to skip).
    """

    def __init__(self, point):
        self.point, self.seen, self.crc, self.checked = point, 0, 0, point is None
        if point is not None:
            self.ids = set(point.done_jobs)
            self.count = point.done_below - point.first_job + len(point.done_jobs)
            self.last = max([point.done_below - 1] + list(point.done_jobs))

    def skips(self, job_id, job):
        """Whether job ``job_id`` (a :class:`gensim_distw2v.core.jobs.Job`) was trained before the resume.

        Raises
        ------
        ValueError
            Once the last trained job has passed, if the jobs differ from those the checkpoint trained.
        """
        point = self.point
        if point is None:
            return False
        position = job_id - point.first_job
        if position < len(point.head) and zlib.crc32(np.ascontiguousarray(job.indices, dtype=np.uint32)) \
                != point.head[position]:
            raise ValueError(
                f"resume: this corpus is not the one checkpoint {point.checkpoint} was trained on: job {position} of "
                f"an epoch holds other words here. Resume with the same corpus, in the same order (and the same "
                f"batch_words)")
        if self.checked:
            return False
        trained = job_id < point.done_below or job_id in self.ids
        if trained:
            self.seen += 1
            self.crc = (self.crc + zlib.crc32(np.ascontiguousarray(job.indices, dtype=np.uint32))) % 2 ** 64
        if job_id >= self.last:
            self.finish()
        return trained

    def finish(self):
        """Check the skipped jobs (at the last of them, or at the end of the corpus)."""
        if self.checked:
            return
        self.checked = True
        point = self.point
        if self.seen != self.count or self.crc != point.crc:
            raise ValueError(
                f"resume: this corpus is not the one checkpoint {point.checkpoint} was trained on: the "
                f"{self.count} jobs it trained of epoch {point.epoch} " + (
                    f"are {self.seen} here" if self.seen != self.count else "hold other words here")
                + ". Resume with the same corpus, in the same order (and the same batch_words)")



def run_identity(model, params, epochs, spec, total_examples, total_words):
    """What must be equal for a run to resume from a checkpoint: the versions, the vocabulary (its
    words and counts, digested), the hyper-parameters, the epochs, the corpus (a file's
    fingerprint; an iterable's counts; its jobs are checked as they are skipped:
    :class:`gensim_distw2v.protocol.Resumed`)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update("\n".join(model.wv.index_to_key).encode("utf8"))
    counts = model.wv.expandos.get("count")
    if counts is not None:
        digest.update(np.ascontiguousarray(counts, dtype=np.int64).tobytes())
    kernel = params.to_wire()
    return {"versions": versions(),
            "vocabulary": digest.hexdigest(), "vocab_size": params.vocab_size, "epochs": int(epochs),
            "params": {key: kernel[key] for key in sorted(kernel)}, "alpha": float(model.alpha),
            "min_alpha": float(model.min_alpha), "batch_words": int(model.batch_words),
            "corpus_file": None if spec is None else f"{spec.path} ({spec.size} bytes, {spec.digest})",
            "total_words": int(total_words or 0), "total_examples": int(total_examples or 0)}


class Resumes:
    """A run's sessions: resumed after a loss of the dispatcher or of a shard, from its checkpoints,
    and the checkpoints it waits for at epoch ends.

    Parameters
    ----------
    run : gensim_distw2v.client.run.RunState
        The run (its settings, open session, epochs begun and counts).
    check_workers : callable
        ``check_workers(progress)``: raises the session's failure, if any, and logs failed
        checkpoints (:meth:`gensim_distw2v.client.training.DistributedTraining._check_workers`).
    """

    def __init__(self, run, check_workers):
        self.run, self.check_workers = run, check_workers

    def train(self, session, resume_from):
        """Run the sessions of a ``train()`` call (a run resumed after a loss has several):
        ``session(resume, below)`` runs one and returns what it trained; returns the last one's."""
        run = self.run
        run.started()
        resume, below, lost = resume_from is not None, None, 0
        lost_error = None  # resuming after a loss: the error to raise if there is nothing to resume from
        reopened = 0
        while True:
            try:
                return session(resume, below)
            except _NotOpened as err:  # nothing trained in that session: open one again, checkpoints or not
                if reopened >= MAX_REOPENS:
                    raise err.error from None
                reopened += 1
                logger.warning("%s (%s): opening the session again in %.0f s (attempt %i of %i)", err.what, err.error,
                               REOPEN_WAIT, reopened, MAX_REOPENS)
                time.sleep(REOPEN_WAIT)
            except _RestoreFailed as err:
                logger.warning("checkpoint %i could not be restored (%s): resuming from the one before",
                               err.sequence, err)
                below = err.sequence
            except errors.NoCheckpoint:
                if lost_error is None:
                    raise
                if resume_from is not None or len(run.begun) > 1:
                    raise lost_error from None  # lost before the run's first checkpoint was written
                # this call began the run and no epoch ended: the model's weights are still those it was
                # called with, so the run starts again from its beginning (less than a checkpoint's words lost)
                logger.warning("the cluster was lost before the run's first checkpoint was written: training "
                               "again from the start")
                resume, below = False, None
            except _Lost as err:
                if run.settings.checkpoint_dir is None or lost >= MAX_RESUMES:
                    raise err.error from None
                lost_error = err.error
                lost += 1
                logger.warning("%s; resuming from the last checkpoint in %s once the cluster is back (waiting up to "
                               "%.0f s, attempt %i of %i)", err.what, run.settings.checkpoint_dir,
                               run.settings.cluster_timeout, lost, MAX_RESUMES)
                resume, below = True, None
                run.resumes += 1

    def wait_for_shards(self, dispatcher):
        """Resuming: wait up to ``cluster_timeout`` for as many shards as the lost session had
        (the run goes on with those there are after that)."""
        deadline = time.monotonic() + self.run.settings.cluster_timeout
        while len(dispatcher.call("status").shards) < self.run.shard_count and time.monotonic() < deadline:
            time.sleep(0.2)

    def checkpoint(self, dispatcher, sid, last):
        """An epoch ended: ask for a checkpoint and wait until every shard has copied its rows
        (the run's last: until it is on disk), so that it holds exactly the epochs trained."""
        run = self.run
        started = time.monotonic()
        sequence = run.awaiting = dispatcher.call("checkpoint", session=sid, token=run.token)
        while True:
            progress = dispatcher.call("progress", session=sid, token=run.token)
            self.check_workers(progress)
            state = progress.checkpoints
            if state.failed >= sequence:
                logger.error("the checkpoint at the end of epoch %i failed (%s); training goes on, the last complete "
                             "one is %i", progress.flushed, state.error, state.committed)
                run.failed_reported = max(run.failed_reported, state.failed)
                break
            if (state.committed if last else state.taken) >= sequence:
                break
            if time.monotonic() - started > run.settings.cluster_timeout:
                logger.error("checkpoint %i at the end of epoch %i: not %s within %.0f s; training goes on (the last "
                             "complete checkpoint is %i)", sequence, progress.flushed,
                             "on disk" if last else "copied by every shard", run.settings.cluster_timeout,
                             state.committed)
                break
            time.sleep(0.01)
        run.awaiting = None  # from now on a failure of it (once copied) is reported as any other
        run.checkpoint_wait += time.monotonic() - started
