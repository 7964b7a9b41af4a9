"""Where a session would go on from a checkpoint, and a session started from there (no sockets,
no clock): the epochs trained and flushed, the jobs (or byte ranges) of the current epoch trained,
and the CRC-32 of their words.

Mixed into :class:`gensim_distw2v.core.session.Session`.
"""
from gensim_distw2v import protocol
from gensim_distw2v.protocol.constants import UPLOADING

__all__ = ["Resumable"]


class Resumable:
    """The checkpoint side of a :class:`~gensim_distw2v.core.session.Session` (see the module's docstring)."""

    def trained_mark(self):
        """What :meth:`resume_point` follows, cheaply: ``(last epoch trained and flushed, jobs
        merged in all)``. While it is unchanged, a checkpoint would repeat the last one."""
        return self.advance(), sum(counts.done for counts in self.counts.values())

    def advance(self):
        """Note the epochs now trained and flushed (in order); returns the last one (-1: none)."""
        while self.completed + 1 < self.config.epochs and self.completed + 1 <= self.closed_epoch \
                and self.epoch_done(self.completed + 1):
            self.completed += 1
            self.done_ids.pop(self.completed, None)
        return self.completed

    def resume_point(self, checkpoint):
        """Where a session resumed from checkpoint number ``checkpoint`` taken now would go on: a
        :class:`gensim_distw2v.protocol.Resumed` (the next epoch to train and, in it, the jobs or
        ranges trained; their counts, the loss). Jobs handed out and not yet merged are not in it:
        they are trained again after a resume."""
        epoch = self.advance() + 1
        done = sorted(self.done_ids.get(epoch, ()))
        first = 0 if self.file is not None else self.first_job.get(epoch, self.next_id)
        below = first
        for index, job_id in enumerate(done):
            if job_id != below:
                done = done[index:]
                break
            below += 1
        else:
            done = []
        epochs = {str(e): protocol.EpochCounts(put=c.done, done=c.done, raw_words=c.raw_words,
                                           effective_words=c.effective_words, examples=c.examples)
                  for e, c in self.counts.items() if e <= epoch}
        return protocol.Resumed(checkpoint=checkpoint, epoch=epoch, first_job=first, done_below=below, done_jobs=done,
                            crc=int(self.crc.get(epoch, 0)), epochs=epochs, loss=float(self.loss),
                            head=list(self.head), range_bytes=0 if self.file is None else self.file.range_bytes)

    def restore(self, point):
        """Start from a checkpoint's :class:`gensim_distw2v.protocol.Resumed` (before
        :meth:`~gensim_distw2v.core.session.Session.start`):
        its counts and loss; the ranges it trained are not handed out again (the client skips the
        jobs it trained)."""
        self.expect(UPLOADING)
        for key, counts in point.epochs.items():
            self.counts[int(key)] = protocol.EpochCounts(**counts.to_wire())
        self.loss = point.loss
        self.completed = self.closed_epoch = point.epoch - 1
        self.crc[point.epoch] = point.crc
        trained = list(range(point.first_job, point.done_below)) + list(point.done_jobs)
        self.done_ids[point.epoch] = trained
        if self.file is not None:
            if point.range_bytes != self.file.range_bytes:
                raise ValueError(f"restore: the checkpoint's ranges are of {point.range_bytes} bytes, this session's "
                                 f"of {self.file.range_bytes}")
            self.skip[point.epoch] = set(trained)
        else:
            self.next_id = self.next_job = point.first_job
            self.first_job[point.epoch] = point.first_job
            self.head, self.head_epoch = list(point.head), point.epoch
