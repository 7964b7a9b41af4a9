# cython: language_level=3
# cython: boundscheck=False
# cython: wraparound=False
# cython: cdivision=True
"""The worker's job kernel: train one job of pre-encoded sentences with the GIL released.

A job is a flat ``uint32`` array of vocabulary indices plus ``int64`` sentence boundaries
(``offsets[s]:offsets[s + 1]`` is sentence ``s``). For each job :meth:`JobTrainer.train_job` does
what gensim's ``train_batch_sg`` / ``train_batch_cbow`` do after tokens have become indices:

1. draw the job's ``next_random`` from the random state (when negative sampling or
   down-sampling needs it), exactly as gensim's ``init_w2v_config`` does;
2. without the GIL: frequent-word down-sampling, keeping at most 10,000 words per job
   (gensim's ``MAX_SENTENCE_LEN``);
3. draw the reduced windows in one ``rng.randint(0, window, n)`` call, as gensim does;
4. without the GIL: the pair loop, calling gensim's exported ``w2v_fast_sentence_*``
   kernels on the shared arrays (Hogwild: many threads may train into the same arrays).

The GIL is held only for the O(1) work per job of steps 1 and 3 (two numpy calls) and the
argument checks; nothing runs per token in Python.
"""

import numpy as np

cimport numpy as cnp
from libc.stdlib cimport free, malloc

from gensim.models.word2vec_inner cimport (
    REAL_t,
    random_int32,
    w2v_fast_sentence_cbow_hs,
    w2v_fast_sentence_cbow_neg,
    w2v_fast_sentence_sg_hs,
    w2v_fast_sentence_sg_neg,
)

cnp.import_array()

# gensim truncates every batch to this many (effective) words; so do we, for identical results.
MAX_WORDS_IN_JOB = 10000
cdef int MAX_WORDS = 10000

cdef struct JobBuffers:
    # per-call scratch memory (one job, one thread)
    cnp.uint32_t *indexes
    int *reduced_windows
    int *sentence_idx
    int *codelens
    cnp.uint32_t **points
    cnp.uint8_t **codes
    REAL_t *work
    REAL_t *neu1


cdef int _alloc_buffers(JobBuffers *buf, Py_ssize_t n_words, Py_ssize_t n_sentences, int size, int hs) noexcept:
    """Allocate ``buf``; return 0 on success, -1 when out of memory (free with _free_buffers either way)."""
    n_words = max(n_words, 1)
    buf.indexes = <cnp.uint32_t *>malloc(n_words * sizeof(cnp.uint32_t))
    buf.reduced_windows = <int *>malloc(n_words * sizeof(int))
    buf.sentence_idx = <int *>malloc((n_sentences + 1) * sizeof(int))
    buf.codelens = <int *>malloc(n_words * sizeof(int))
    buf.work = <REAL_t *>malloc(size * sizeof(REAL_t))
    buf.neu1 = <REAL_t *>malloc(size * sizeof(REAL_t))
    buf.points = <cnp.uint32_t **>malloc(n_words * sizeof(cnp.uint32_t *)) if hs else NULL
    buf.codes = <cnp.uint8_t **>malloc(n_words * sizeof(cnp.uint8_t *)) if hs else NULL
    if (buf.indexes == NULL or buf.reduced_windows == NULL or buf.sentence_idx == NULL or buf.codelens == NULL
            or buf.work == NULL or buf.neu1 == NULL or (hs and (buf.points == NULL or buf.codes == NULL))):
        return -1
    return 0


cdef void _free_buffers(JobBuffers *buf) noexcept nogil:
    free(buf.indexes)
    free(buf.reduced_windows)
    free(buf.sentence_idx)
    free(buf.codelens)
    free(buf.work)
    free(buf.neu1)
    free(buf.points)
    free(buf.codes)


cdef cnp.ndarray _checked(object arr, str name, object dtype, int ndim, bint writeable=False):
    """Return ``arr`` if it is a C-contiguous ndarray of ``dtype`` and ``ndim``; else raise ValueError."""
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{name} must be a numpy array of {np.dtype(dtype)}, got {type(arr).__name__}")
    if arr.dtype != dtype:
        raise ValueError(f"{name} must have dtype {np.dtype(dtype)}, got {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (use numpy.ascontiguousarray)")
    if writeable and not arr.flags.writeable:
        raise ValueError(f"{name} must be writeable: the kernel trains it in place")
    return arr


cdef class JobTrainer:
    """Trains jobs into a fixed set of model arrays, in place.

    The arrays are checked once here (dtype, shape, contiguity, index ranges); each job is
    checked in :meth:`train_job`. The trainer keeps references to the arrays, so they stay
    alive while it exists. Several threads may call :meth:`train_job` at once (Hogwild).

    Parameters
    ----------
    syn0 : numpy.ndarray of float32, shape (vocab_size, vector_size)
        Input word vectors (gensim's ``wv.vectors``), trained in place.
    lockf : numpy.ndarray of float32, shape (n,), n >= 1
        gensim's ``wv.vectors_lockf``; word ``w`` uses ``lockf[w % n]``.
    sg : {0, 1}
        1 for skip-gram, 0 for CBOW.
    hs : {0, 1}
        Hierarchical softmax.
    negative : int
        Number of negative samples (0 for none). ``hs`` or ``negative`` must be on.
    window : int
        Maximum context window, >= 1.
    cbow_mean : {0, 1}
        CBOW only: average (1) or sum (0) the context vectors.
    shrink_windows : bool
        Draw a reduced window per word, as word2vec does.
    syn1neg : numpy.ndarray of float32, shape like syn0, optional
        Output weights for negative sampling (required when ``negative > 0``).
    cum_table : numpy.ndarray of uint32, shape (vocab_size,), optional
        gensim's negative-sampling table (required when ``negative > 0``).
    sample_int : numpy.ndarray of uint32, shape (vocab_size,), optional
        gensim's ``wv.expandos['sample_int']``; down-sampling is on when it is given.
    syn1 : numpy.ndarray of float32, shape like syn0, optional
        Output weights for hierarchical softmax (required when ``hs``).
    points, codes, code_offsets : numpy.ndarray, optional
        The Huffman tree, flattened (required when ``hs``): word ``w``'s points are
        ``points[code_offsets[w]:code_offsets[w + 1]]`` (uint32, each < vocab_size), its codes
        the same slice of ``codes`` (uint8); ``code_offsets`` is int64 of length vocab_size + 1.

    Raises
    ------
    ValueError
        If any array has the wrong dtype, shape or contents, or a hyper-parameter is out of range.
    """

    cdef readonly object arrays
    cdef readonly int vocab_size, vector_size, sg, hs, negative, window, cbow_mean, shrink_windows, sample
    cdef REAL_t *_syn0
    cdef REAL_t *_syn1
    cdef REAL_t *_syn1neg
    cdef REAL_t *_lockf
    cdef cnp.uint32_t _lockf_len
    cdef cnp.uint32_t *_cum_table
    cdef unsigned long long _cum_table_len
    cdef cnp.uint32_t *_sample_int
    cdef cnp.uint32_t *_points
    cdef cnp.uint8_t *_codes
    cdef cnp.int64_t *_code_offsets

    def __init__(self, syn0, lockf, *, int sg, int hs, int negative, int window, int cbow_mean=1,
                 bint shrink_windows=True, syn1neg=None, cum_table=None, sample_int=None,
                 syn1=None, points=None, codes=None, code_offsets=None):
        if sg not in (0, 1):
            raise ValueError(f"sg must be 0 or 1, got {sg}")
        if hs not in (0, 1):
            raise ValueError(f"hs must be 0 or 1, got {hs}")
        if negative < 0:
            raise ValueError(f"negative must be >= 0, got {negative}")
        if not hs and not negative:
            raise ValueError("either hs=1 or negative > 0 is needed, otherwise nothing is trained")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if cbow_mean not in (0, 1):
            raise ValueError(f"cbow_mean must be 0 or 1, got {cbow_mean}")
        self.sg, self.hs, self.negative, self.window = sg, hs, negative, window
        self.cbow_mean, self.shrink_windows = cbow_mean, shrink_windows

        cdef cnp.ndarray a = _checked(syn0, "syn0", np.float32, 2, writeable=True)
        if a.shape[0] < 1 or a.shape[1] < 1:
            raise ValueError(f"syn0 must have at least one row and one column, got shape {syn0.shape}")
        if a.shape[0] >= 2 ** 32:
            raise ValueError(f"vocabulary of {a.shape[0]} words does not fit uint32 indices")
        shape = (a.shape[0], a.shape[1])
        self.vocab_size, self.vector_size = shape
        self._syn0 = <REAL_t *>cnp.PyArray_DATA(a)
        arrays = {"syn0": syn0}

        a = _checked(lockf, "lockf", np.float32, 1)
        if a.shape[0] < 1:
            raise ValueError("lockf must have at least one element")
        self._lockf, self._lockf_len = <REAL_t *>cnp.PyArray_DATA(a), <cnp.uint32_t>a.shape[0]
        arrays["lockf"] = lockf

        if negative:
            if syn1neg is None or cum_table is None:
                raise ValueError("negative > 0 needs syn1neg and cum_table")
            a = _checked(syn1neg, "syn1neg", np.float32, 2, writeable=True)
            if (a.shape[0], a.shape[1]) != shape:
                raise ValueError(f"syn1neg must have syn0's shape {shape}, got {syn1neg.shape}")
            self._syn1neg = <REAL_t *>cnp.PyArray_DATA(a)
            a = _checked(cum_table, "cum_table", np.uint32, 1)
            if a.shape[0] != self.vocab_size:
                raise ValueError(f"cum_table must have {self.vocab_size} entries, got {a.shape[0]}")
            if cum_table[self.vocab_size - 1] == 0 or (self.vocab_size > 1 and np.any(np.diff(cum_table.astype(np.int64)) < 0)):
                raise ValueError("cum_table must be non-decreasing with a positive last entry (gensim's make_cum_table)")
            self._cum_table, self._cum_table_len = <cnp.uint32_t *>cnp.PyArray_DATA(a), a.shape[0]
            arrays.update(syn1neg=syn1neg, cum_table=cum_table)

        if sample_int is not None:
            a = _checked(sample_int, "sample_int", np.uint32, 1)
            if a.shape[0] != self.vocab_size:
                raise ValueError(f"sample_int must have {self.vocab_size} entries, got {a.shape[0]}")
            self._sample_int, self.sample = <cnp.uint32_t *>cnp.PyArray_DATA(a), 1
            arrays["sample_int"] = sample_int

        if hs:
            if syn1 is None or points is None or codes is None or code_offsets is None:
                raise ValueError("hs=1 needs syn1, points, codes and code_offsets")
            a = _checked(syn1, "syn1", np.float32, 2, writeable=True)
            if (a.shape[0], a.shape[1]) != shape:
                raise ValueError(f"syn1 must have syn0's shape {shape}, got {syn1.shape}")
            self._syn1 = <REAL_t *>cnp.PyArray_DATA(a)
            _checked(points, "points", np.uint32, 1)
            _checked(codes, "codes", np.uint8, 1)
            _checked(code_offsets, "code_offsets", np.int64, 1)
            if code_offsets.shape[0] != self.vocab_size + 1:
                raise ValueError(f"code_offsets must have {self.vocab_size + 1} entries, got {code_offsets.shape[0]}")
            if code_offsets[0] != 0 or np.any(np.diff(code_offsets) < 0):
                raise ValueError("code_offsets must start at 0 and be non-decreasing")
            if code_offsets[self.vocab_size] != points.shape[0] or points.shape[0] != codes.shape[0]:
                raise ValueError(
                    f"code_offsets ends at {code_offsets[self.vocab_size]}, but points has {points.shape[0]} "
                    f"and codes {codes.shape[0]} entries: all three must agree")
            if points.shape[0] and points.max() >= self.vocab_size:
                raise ValueError(f"points has an entry {points.max()} >= vocab_size {self.vocab_size}")
            if np.any(np.diff(code_offsets) > 64):
                raise ValueError("a Huffman code longer than 64 is impossible for a uint32 vocabulary")
            self._points = <cnp.uint32_t *>cnp.PyArray_DATA(points)
            self._codes = <cnp.uint8_t *>cnp.PyArray_DATA(codes)
            self._code_offsets = <cnp.int64_t *>cnp.PyArray_DATA(code_offsets)
            arrays.update(syn1=syn1, points=points, codes=codes, code_offsets=code_offsets)
        self.arrays = arrays

    def train_job(self, indices, offsets, double alpha, rng, bint compute_loss=False):
        """Train one job into the model arrays, in place.

        Parameters
        ----------
        indices : numpy.ndarray of uint32, shape (n,)
            The job's words as vocabulary indices, sentences one after another.
        offsets : numpy.ndarray of int64, shape (n_sentences + 1,)
            Sentence boundaries: ``offsets[0] == 0``, non-decreasing, ``offsets[-1] == n``.
        alpha : float
            Learning rate for the whole job.
        rng : numpy.random.RandomState
            Random state: per job, ``next_random`` is drawn first (2 draws, when negative
            sampling or down-sampling is on), then the reduced windows (one ``randint`` call
            of as many values as words survive down-sampling), as gensim draws them.
        compute_loss : bool, optional
            Accumulate the training loss of this job.

        Returns
        -------
        (int, float)
            Effective words (kept after down-sampling and the 10,000-word cap) and the job's
            loss (0.0 unless ``compute_loss``).

        Raises
        ------
        ValueError
            On a wrong dtype or shape, an index >= vocab_size, or offsets that do not fit
            ``indices``; nothing is trained then.
        """
        cdef cnp.ndarray idx_arr = _checked(indices, "indices", np.uint32, 1)
        cdef cnp.ndarray off_arr = _checked(offsets, "offsets", np.int64, 1)
        cdef Py_ssize_t n = idx_arr.shape[0], n_sent = off_arr.shape[0] - 1, s
        cdef const cnp.uint32_t *words = <const cnp.uint32_t *>cnp.PyArray_DATA(idx_arr)
        cdef const cnp.int64_t *bounds = <const cnp.int64_t *>cnp.PyArray_DATA(off_arr)
        cdef cnp.uint32_t max_index = 0
        if n_sent < 0 or bounds[0] != 0 or bounds[n_sent] != n:
            raise ValueError(
                f"offsets must run from 0 to len(indices)={n}, got "
                f"{'an empty array' if n_sent < 0 else f'{bounds[0]}..{bounds[n_sent]}'}")
        for s in range(n_sent):
            if bounds[s + 1] < bounds[s]:
                raise ValueError(f"offsets must be non-decreasing, but offsets[{s + 1}] < offsets[{s}]")
        for s in range(n):
            if words[s] > max_index:
                max_index = words[s]
        if n and max_index >= <cnp.uint32_t>self.vocab_size:
            raise ValueError(f"indices has an entry {max_index} >= vocab_size {self.vocab_size}")
        if not hasattr(rng, "randint"):
            raise ValueError(f"rng must be a numpy.random.RandomState, got {type(rng).__name__}")

        cdef unsigned long long next_random = 0
        if self.negative or self.sample:
            next_random = (2 ** 24) * rng.randint(0, 2 ** 24) + rng.randint(0, 2 ** 24)

        cdef JobBuffers buf
        cdef int kept = 0, kept_sentences = 0, i
        cdef REAL_t loss = 0
        cdef cnp.int64_t[::1] drawn
        try:
            if _alloc_buffers(&buf, min(n, MAX_WORDS), n_sent, self.vector_size, self.hs) < 0:
                raise MemoryError("cannot allocate the job's scratch buffers")
            with nogil:
                kept = self._subsample(words, bounds, n_sent, &buf, &next_random, &kept_sentences)
            if self.shrink_windows and kept:
                drawn = np.ascontiguousarray(rng.randint(0, self.window, kept), dtype=np.int64)
                for i in range(kept):
                    buf.reduced_windows[i] = <int>drawn[i]
            else:
                for i in range(kept):
                    buf.reduced_windows[i] = 0
            with nogil:
                self._train(&buf, kept_sentences, <REAL_t>alpha, next_random, compute_loss, &loss)
        finally:
            _free_buffers(&buf)
        return kept, float(loss)

    cdef int _subsample(self, const cnp.uint32_t *words, const cnp.int64_t *bounds, Py_ssize_t n_sent,
                        JobBuffers *buf, unsigned long long *next_random, int *kept_sentences) noexcept nogil:
        """Down-sample into ``buf`` as gensim's train_batch_* do; return the words kept."""
        cdef int kept = 0, sent_count = 0
        cdef Py_ssize_t s, t
        cdef cnp.uint32_t w
        buf.sentence_idx[0] = 0
        for s in range(n_sent):
            if bounds[s + 1] == bounds[s]:
                continue  # gensim skips empty sentences without counting them
            for t in range(bounds[s], bounds[s + 1]):
                w = words[t]
                if self.sample and self._sample_int[w] < random_int32(next_random):
                    continue
                buf.indexes[kept] = w
                if self.hs:
                    buf.codelens[kept] = <int>(self._code_offsets[w + 1] - self._code_offsets[w])
                    buf.points[kept] = &self._points[self._code_offsets[w]]
                    buf.codes[kept] = &self._codes[self._code_offsets[w]]
                kept += 1
                if kept == MAX_WORDS:
                    break
            sent_count += 1
            buf.sentence_idx[sent_count] = kept
            if kept == MAX_WORDS:
                break
        kept_sentences[0] = sent_count
        return kept

    cdef void _train(self, JobBuffers *buf, int n_sent, REAL_t alpha, unsigned long long next_random,
                     bint compute_loss, REAL_t *loss) noexcept nogil:
        """The pair loop of gensim's train_batch_sg / train_batch_cbow over the kept words."""
        cdef int s, i, j, k, start, end, size = self.vector_size
        cdef int loss_flag = 1 if compute_loss else 0
        for s in range(n_sent):
            start, end = buf.sentence_idx[s], buf.sentence_idx[s + 1]
            for i in range(start, end):
                j = i - self.window + buf.reduced_windows[i]
                if j < start:
                    j = start
                k = i + self.window + 1 - buf.reduced_windows[i]
                if k > end:
                    k = end
                if self.sg:
                    for j in range(j, k):
                        if j == i:
                            continue
                        if self.hs:
                            w2v_fast_sentence_sg_hs(
                                buf.points[i], buf.codes[i], buf.codelens[i], self._syn0, self._syn1, size,
                                buf.indexes[j], alpha, buf.work, self._lockf, self._lockf_len, loss_flag, loss)
                        if self.negative:
                            next_random = w2v_fast_sentence_sg_neg(
                                self.negative, self._cum_table, self._cum_table_len, self._syn0, self._syn1neg,
                                size, buf.indexes[i], buf.indexes[j], alpha, buf.work, next_random,
                                self._lockf, self._lockf_len, loss_flag, loss)
                else:
                    if self.hs:
                        w2v_fast_sentence_cbow_hs(
                            buf.points[i], buf.codes[i], buf.codelens, buf.neu1, self._syn0, self._syn1, size,
                            buf.indexes, alpha, buf.work, i, j, k, self.cbow_mean, self._lockf, self._lockf_len,
                            loss_flag, loss)
                    if self.negative:
                        next_random = w2v_fast_sentence_cbow_neg(
                            self.negative, self._cum_table, self._cum_table_len, buf.codelens, buf.neu1,
                            self._syn0, self._syn1neg, size, buf.indexes, alpha, buf.work, i, j, k,
                            self.cbow_mean, next_random, self._lockf, self._lockf_len, loss_flag, loss)
