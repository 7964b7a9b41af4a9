"""The Python face of the compiled job kernel (:mod:`gensim_distw2v._inner`).

Turns a gensim model's arrays into a :class:`~gensim_distw2v._inner.JobTrainer`, and trains a
stream of jobs with T threads into the same arrays (Hogwild, as gensim's worker threads do).
"""
import logging
import threading

import numpy as np

from gensim_distw2v import build

build.check()  # before the kernel's import: a clear error if it does not fit the installed gensim

from gensim_distw2v._inner import MAX_WORDS_IN_JOB, JobTrainer  # noqa: E402

logger = logging.getLogger(__name__)

__all__ = ["JobTrainer", "MAX_WORDS_IN_JOB", "huffman_arrays", "model_arrays", "node_counts", "reverse_tree",
           "trainer_for_model", "train_jobs", "train_like_gensim"]


def huffman_arrays(wv):
    """Flatten gensim's per-word Huffman ``point`` / ``code`` arrays.

    Parameters
    ----------
    wv : gensim.models.KeyedVectors
        Vectors whose ``expandos`` hold ``'point'`` and ``'code'`` (set by ``build_vocab`` with ``hs=1``).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        ``points`` (uint32), ``codes`` (uint8) and ``code_offsets`` (int64, vocab_size + 1 entries):
        word ``w``'s path is ``points[code_offsets[w]:code_offsets[w + 1]]``.
    """
    points, codes = wv.expandos["point"], wv.expandos["code"]
    lengths = np.fromiter((len(c) for c in codes), dtype=np.int64, count=len(codes))
    offsets = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat_points = np.concatenate(points).astype(np.uint32) if len(points) else np.zeros(0, np.uint32)
    flat_codes = np.concatenate(codes).astype(np.uint8) if len(codes) else np.zeros(0, np.uint8)
    return flat_points, flat_codes, offsets


def reverse_tree(arrays):
    """hs's tree nodes renumbered busiest first, for the cluster: ``arrays`` with its ``points``
    mapped ``p -> V - 2 - p`` and its ``syn1`` rows permuted alike (copies; the rest as is).

    gensim numbers the ``V - 1`` inner nodes of the Huffman tree in the order it makes them, which
    is the order of their counts: the root, on every word's path, is node ``V - 2``, the last row of
    ``syn1``. The merge rules' tiers work on a matrix's first rows, in decreasing frequency
    (:mod:`gensim_distw2v.core.merge`), so the cluster trains the reversed numbering: the same arithmetic
    on the same rows, which are only stored in another order (one worker still reproduces gensim to
    the bit). The map is its own inverse: apply it to the trained ``syn1`` (``syn1[order]`` with
    ``order`` from :func:`reverse_tree_order`) to give the model gensim's numbering back.

    Parameters
    ----------
    arrays : dict of (str, numpy.ndarray)
        As :func:`model_arrays` returns them; without ``syn1`` (no hs) returned as is.

    Returns
    -------
    dict of (str, numpy.ndarray)
    """
    if "syn1" not in arrays:
        return arrays
    out = dict(arrays)
    n_rows = len(arrays["syn1"])
    out["points"] = (np.uint32(max(0, n_rows - 2)) - arrays["points"]).astype(np.uint32)
    out["syn1"] = np.ascontiguousarray(arrays["syn1"][reverse_tree_order(n_rows)])
    return out


def reverse_tree_order(n_rows):
    """The row order of :func:`reverse_tree`: ``[V - 2, ..., 1, 0, V - 1]`` (row ``V - 1`` of
    ``syn1`` is no node); its own inverse."""
    order = np.arange(n_rows, dtype=np.int64)
    order[:max(0, n_rows - 1)] = order[:max(0, n_rows - 1)][::-1]
    return order


def node_counts(points, code_offsets, counts, n_rows):
    """How often each ``syn1`` row (tree node) is on a trained word's path: per node, the summed
    counts of the words below it (float64, ``n_rows``).

    Parameters
    ----------
    points, code_offsets : numpy.ndarray
        The flat paths of :func:`huffman_arrays` (in either numbering).
    counts : array_like
        Word counts in vocabulary order.
    n_rows : int
        Rows of ``syn1``.
    """
    lengths = np.diff(np.asarray(code_offsets, dtype=np.int64))
    weights = np.repeat(np.asarray(counts, dtype=np.float64), lengths)
    return np.bincount(np.asarray(points, dtype=np.int64), weights=weights, minlength=n_rows)[:n_rows]


def model_arrays(model):
    """Everything the kernel needs from a gensim ``Word2Vec`` whose vocabulary is built.

    Returns
    -------
    (dict, dict)
        ``(params, arrays)``: the hyper-parameters (plain ints) and the arrays, named as
        :class:`~gensim_distw2v._inner.JobTrainer` takes them. The weight arrays are the model's
        own (not copies), so training through them trains the model.
    """
    if not model.wv.key_to_index or not len(model.wv.vectors):
        raise RuntimeError("you must first build vocabulary before training the model")
    params = dict(
        sg=int(model.sg), hs=int(model.hs), negative=int(model.negative), window=int(model.window),
        cbow_mean=int(model.cbow_mean), shrink_windows=bool(model.shrink_windows),
    )
    arrays = dict(syn0=model.wv.vectors, lockf=model.wv.vectors_lockf)
    if model.negative:
        arrays.update(syn1neg=model.syn1neg, cum_table=model.cum_table)
    if model.sample:
        arrays["sample_int"] = np.ascontiguousarray(model.wv.expandos["sample_int"], dtype=np.uint32)
    if model.hs:
        arrays["syn1"] = model.syn1
        arrays["points"], arrays["codes"], arrays["code_offsets"] = huffman_arrays(model.wv)
    return params, arrays


def trainer_for_model(model):
    """A :class:`~gensim_distw2v._inner.JobTrainer` that trains ``model``'s own weight arrays in place."""
    params, arrays = model_arrays(model)
    return JobTrainer(**params, **arrays)


def train_jobs(trainer, jobs, threads=1, rngs=None, compute_loss=False):
    """Train an iterable of jobs with ``threads`` threads sharing ``trainer``'s arrays.

    Parameters
    ----------
    trainer : JobTrainer
        The kernel, bound to the model arrays.
    jobs : iterable of (numpy.ndarray, numpy.ndarray, float)
        ``(indices, offsets, alpha)`` per job; consumed lazily, one job at a time per thread.
    threads : int, optional
        Number of threads.
    rngs : list of numpy.random.RandomState, optional
        One random state per thread (default: seeds 1..threads).
    compute_loss : bool, optional
        Accumulate the loss.

    Returns
    -------
    (int, float)
        Effective words trained and the summed loss.

    Raises
    ------
    Exception
        The first error raised in any thread (the others stop at their next job).
    """
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    rngs = rngs or [np.random.RandomState(seed) for seed in range(1, threads + 1)]
    if len(rngs) != threads:
        raise ValueError(f"need one random state per thread: {threads} threads, {len(rngs)} rngs")
    source, lock = iter(jobs), threading.Lock()
    totals, errors = [[0, 0.0] for _ in range(threads)], []

    def run(tid):
        while not errors:
            with lock:
                job = next(source, None)
            if job is None:
                return
            try:
                words, loss = trainer.train_job(job[0], job[1], job[2], rngs[tid], compute_loss)
            except BaseException as err:  # re-raised by the caller, as fastText does
                errors.append(err)
                return
            totals[tid][0] += words
            totals[tid][1] += loss

    if threads == 1:
        run(0)
    else:
        pool = [threading.Thread(target=run, args=(tid,), daemon=True) for tid in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
    if errors:
        raise errors[0]
    return sum(t[0] for t in totals), sum(t[1] for t in totals)


def train_like_gensim(model, corpus, epochs=None, compute_loss=False):
    """Train ``model`` in this process, one thread, exactly as gensim's ``train()`` with ``workers=1``.

    Same job cuts, learning rates and random stream (``model.random``) as gensim, through the
    kernel: the reference the distributed path is compared with.

    Returns
    -------
    (int, float)
        Effective words and the loss (summed per job in float64, where gensim keeps one float32).
    """
    from gensim_distw2v.core.jobs import iter_epoch_jobs

    epochs = epochs or model.epochs
    trainer = trainer_for_model(model)
    effective, loss = 0, 0.0
    for epoch in range(epochs):
        jobs = iter_epoch_jobs(
            corpus, model.wv.key_to_index, batch_words=model.batch_words, cur_epoch=epoch, epochs=epochs,
            start_alpha=model.alpha, end_alpha=model.min_alpha, total_examples=model.corpus_count)
        for job in jobs:
            words, job_loss = trainer.train_job(job.indices, job.offsets, job.alpha, model.random, compute_loss)
            effective += words
            loss += job_loss
    return effective, loss
