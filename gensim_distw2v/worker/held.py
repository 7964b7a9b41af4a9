"""A fetched job as a worker holds it: a streamed job decoded, a corpus file's byte range read and
encoded when fetched (so its words, and the rows they use, are known before it trains), and when its
rows are wanted by the merge rounds (docs/schedule.rst, "Skip-gram at half the share")."""
import time

from gensim_distw2v import protocol

__all__ = ["held_job", "wants_held_rows"]


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


def held_job(msg, reader, file, vocab_size):
    """``(job, data, indices, read_cpu)`` of a fetched job's message.

    Parameters
    ----------
    msg : dict
        A :class:`gensim_distw2v.protocol.Job` or, with a ``reader``, a
        :class:`gensim_distw2v.protocol.RangeJob` on the wire.
    reader : gensim_distw2v.io.corpusfile.RangeReader or None
        The corpus file's reader (None: a streamed job).
    file : gensim_distw2v.protocol.CorpusFileSpec or None
        The corpus file (its size checks a range's bounds).
    vocab_size : int
        The vocabulary's size (checks a streamed job's word indices).

    Returns
    -------
    tuple
        The job; the range read (``reader.read``'s ``indices, offsets, starts, raw, examples``), None for
        a streamed job; the word indices it trains; the thread CPU seconds the read took.
    """
    if reader is None:
        job = protocol.Job.from_wire(msg, vocab_size=vocab_size)
        return job, None, job.indices, 0.0
    job = protocol.RangeJob.from_wire(msg, size=file.size)
    cpu = time.thread_time()
    data = reader.read(job.lo, job.hi)
    return job, data, data[0], time.thread_time() - cpu
