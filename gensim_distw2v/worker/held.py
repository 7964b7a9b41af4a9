"""A fetched job as a worker holds it: a streamed job decoded; a corpus file's byte range read and
encoded when fetched where its rows are wanted from then on (skip-gram: its words, and the rows they
use, known before it trains), else by the trainer thread that trains it (CBOW); and when its rows are
wanted by the merge rounds (docs/schedule.rst, "Skip-gram at half the share")."""
import time

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.io.corpusfile import open_reader

__all__ = ["held_job", "wants_held_rows", "train_range", "open_ranges", "RangeReads"]


def wants_held_rows(file, params):
    """Whether a job's rows are wanted from its fetch (streamed jobs; a corpus file's ranges for
    skip-gram), else only while it trains (a corpus file's ranges for CBOW).

    Parameters
    ----------
    file : gensim_distw2v.protocol.CorpusFileSpec or None
        The session's corpus file (None: jobs streamed by the client).
    params : gensim_distw2v.protocol.TrainParams
        The session's training parameters (``sg``).
    """
    return file is None or bool(params.sg)


def held_job(msg, file, vocab_size, reader=None):
    """``(job, data, indices, read_cpu)`` of a fetched job's message.

    Parameters
    ----------
    msg : dict
        A :class:`gensim_distw2v.protocol.Job` or, with a ``file``, a
        :class:`gensim_distw2v.protocol.RangeJob` on the wire.
    file : gensim_distw2v.protocol.CorpusFileSpec or None
        The corpus file (its size checks a range's bounds); None: a streamed job.
    vocab_size : int
        The vocabulary's size (checks a streamed job's word indices).
    reader : gensim_distw2v.io.corpusfile.RangeReader, optional
        The corpus file's reader, to read the range now; without one it is left for its trainer
        (:class:`RangeReads`).

    Returns
    -------
    tuple
        The job; the range read (``reader.read``'s ``indices, offsets, starts, raw, examples``), None for
        a streamed job or a range left unread; the word indices it trains (None if unread); the thread
        CPU seconds the read took.
    """
    if file is None:
        job = protocol.Job.from_wire(msg, vocab_size=vocab_size)
        return job, None, job.indices, 0.0
    job = protocol.RangeJob.from_wire(msg, size=file.size)
    if reader is None:
        return job, None, None, 0.0
    cpu = time.thread_time()
    data = reader.read(job.lo, job.hi)
    return job, data, data[0], time.thread_time() - cpu


def train_range(train_pieces, job, data, rng):
    """Train a byte range of the corpus file, read and encoded (``data``: ``indices, offsets, starts,
    raw, examples``), chunk by chunk; ``(effective, loss, raw, examples, untrained)``.

    Parameters
    ----------
    train_pieces : callable
        ``train_pieces(indices, offsets, raw_words, alpha, rng) -> (effective, loss)``: the worker's
        kernel call, which counts the chunk's raw words towards the merge interval.
    job : gensim_distw2v.protocol.RangeJob
        The range (its ``alpha``).
    data : tuple
        :meth:`gensim_distw2v.io.corpusfile.RangeReader.read`'s.
    rng : object
        The trainer thread's random state.

    Returns
    -------
    tuple
        Effective words trained, the loss, the range's raw words and examples, and the raw words no
        chunk counted (a range of empty or unknown-word lines), which the caller counts.
    """
    indices, offsets, starts, raw, examples = data
    effective, loss, counted, total = 0, 0.0, 0, len(indices)
    for a, b in zip(starts[:-1].tolist(), starts[1:].tolist()):
        # each chunk (at most the kernel's 10,000 words) counts its share of the range's raw words
        share = (raw * int(offsets[b]) // total if total else raw) - counted
        counted += share
        words, chunk_loss = train_pieces(indices[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a], share,
                                         job.alpha, rng)
        effective += words
        loss += chunk_loss
    return effective, loss, raw, examples, raw - counted


def open_ranges(file, vocab, folders=None):
    """A reader of the session's corpus file (:func:`gensim_distw2v.io.corpusfile.open_reader`, within
    ``folders``, the worker's ``--corpus-dir``); a file checked at join and gone (or moved out of those
    folders) since is a RuntimeError naming it."""
    try:
        return open_reader(file, vocab, folders)
    except OSError as err:
        raise RuntimeError(f"cannot open the corpus file {file.path}: {err}") from None


class RangeReads:
    """A trainer thread's own reader of the ranges left unread at their fetch (CBOW's, whose rows are
    wanted only while they train): every trainer reads its own, where one fetch thread reading for all
    of them would bind at six to eight CBOW threads (a read costs about a fifth of CBOW's kernel a word,
    0.14-0.20 µs on devmix; skip-gram's kernel is three times CBOW's, so its fetch thread reads for up to
    about 24 threads).

    Parameters
    ----------
    file : gensim_distw2v.protocol.CorpusFileSpec or None
        The session's corpus file (None: jobs streamed by the client, never unread).
    vocab : object
        The vocabulary, as :func:`gensim_distw2v.io.corpusfile.open_reader` takes it.
    rows : bool
        Whether to name the rows a range's words use (the worker keeps
        :attr:`~gensim_distw2v.worker.state.WorkState.want`).
    folders : tuple of str, optional
        The worker's ``--corpus-dir`` (:func:`open_ranges`).
    """

    def __init__(self, file, vocab, rows, folders=None):
        self.file, self.vocab, self.rows, self.reader, self.folders = file, vocab, rows, None, folders

    def read(self, job, data, rows):
        """``(data, rows)`` of a job from the queue: a range left unread, read now (its reader opened at the
        first); any other as it came."""
        if data is not None or self.file is None:
            return data, rows
        if self.reader is None:
            self.reader = open_ranges(self.file, self.vocab, self.folders)
        data = self.reader.read(job.lo, job.hi)
        return data, (np.unique(data[0]) if self.rows else None)

    def close(self):
        """Close the reader, if one was opened."""
        if self.reader is not None:
            self.reader.close()
