# cython: language_level=3
# cython: boundscheck=False
# cython: wraparound=False
"""Lines of a corpus file to vocabulary indices: ``corpus_file`` mode's per-token work, compiled.

A worker reads a byte range of the corpus file and hands the bytes here. Lines are split as
gensim's ``LineSentence`` splits them (which is what built the vocabulary): at ``b"\\n"``, then
into tokens at every character Python's ``str.split()`` counts as whitespace (ASCII spaces,
tabs, ``\\r``, ``\\x1c``-``\\x1f``, and the Unicode spaces U+0085, U+00A0, U+1680,
U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 in their UTF-8 form), and a line longer
than ``max_sentence_length`` tokens becomes several sentences of at most that many. Tokens are
looked up as UTF-8 bytes in a :class:`VocabTable` (a hash table of the vocabulary that needs no
Python objects, so the whole loop runs without the GIL and the worker's merge thread runs
meanwhile); unknown tokens are dropped.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memchr, memcmp

cnp.import_array()


include "tokens.pxi"


cdef class VocabTable:
    """The vocabulary as an open-addressing hash table: UTF-8 bytes -> index, without the GIL.

    Parameters
    ----------
    vocab_bytes : numpy.ndarray of uint8
        Every word's UTF-8 bytes, back to back (:func:`gensim_distw2v.corpusfile.vocab_arrays`).
    vocab_offsets : numpy.ndarray of int64
        ``len(words) + 1`` offsets into ``vocab_bytes``: word ``i`` is
        ``vocab_bytes[offsets[i]:offsets[i + 1]]``.

    Raises
    ------
    ValueError
        The offsets do not run non-decreasing from 0 to ``len(vocab_bytes)``.
    """
    cdef readonly Py_ssize_t n_words  # distinct words
    cdef object _data, _offsets, _slots  # the owners of the buffers below
    cdef const unsigned char *data
    cdef const cnp.int64_t *offsets
    cdef cnp.int64_t *slots  # a word's index, or -1: an empty slot
    cdef uint64_t mask
    cdef readonly int64_t probes  # slots looked at past each word's first while the table was built
    cdef readonly bint keyed  # whether the slots follow the keyed hash (a chain grew past MAX_CHAIN)

    def __cinit__(self):
        self.slots = NULL
        self.mask = 0
        self.n_words = 0
        self.probes = 0
        self.keyed = False

    def __init__(self, vocab_bytes, vocab_offsets):
        if self.slots != NULL:
            raise RuntimeError("a VocabTable is built once; make a new one")
        data = np.array(vocab_bytes, dtype=np.uint8, copy=True)  # private copies: nobody changes them
        offsets = np.array(vocab_offsets, dtype=np.int64, copy=True)
        if (data.ndim != 1 or offsets.ndim != 1 or not len(offsets) or offsets[0] != 0
                or offsets[-1] != len(data) or (np.diff(offsets) < 0).any()):
            raise ValueError(f"vocab_offsets must run non-decreasing from 0 to {len(data)}")
        cdef Py_ssize_t words = len(offsets) - 1
        cdef Py_ssize_t capacity = 16
        while capacity < 2 * words:
            capacity *= 2
        slots = np.full(capacity, -1, dtype=np.int64)
        self._data, self._offsets, self._slots = data, offsets, slots
        cdef const cnp.int64_t[::1] offsets_view = offsets
        cdef cnp.int64_t[::1] slots_view = slots
        self.data = <const unsigned char *>cnp.PyArray_DATA(data)
        self.offsets = &offsets_view[0]
        self.slots = &slots_view[0]
        self.mask = capacity - 1
        if self._fill(words):  # words written to collide in FNV-1a, in one chain or many short: again, keyed
            self.keyed = True
            slots.fill(-1)
            self.n_words = 0
            self._fill(words)

    cdef bint _fill(self, Py_ssize_t words):
        """Put every word in its slot; on FNV-1a, stop (True) where an insert looks along more than MAX_CHAIN
        slots, or more than LONG_SHARE of the words (LONG_SLACK aside) more than LONG_CHAIN: every token of such
        a word looks as far (groups of words written to collide, each group its own chain)."""
        cdef Py_ssize_t i
        cdef int64_t before, long_ones = 0
        cdef int64_t most_long = <int64_t>(words * LONG_SHARE) + LONG_SLACK
        cdef uint64_t at
        for i in range(words):
            before = self.probes
            at = self._slot(self.data + self.offsets[i], self.offsets[i + 1] - self.offsets[i], &self.probes)
            if not self.keyed:
                if self.probes - before > _LONG_CHAIN:
                    long_ones += 1
                if self.probes - before > _MAX_CHAIN or long_ones > most_long:
                    return True
            if self.slots[at] < 0:
                self.n_words += 1
            self.slots[at] = i  # a repeated word: the last index wins, as in a dict
        return False

    cdef inline uint64_t _slot(self, const unsigned char *p, Py_ssize_t n, int64_t *probes) noexcept nogil:
        """The slot holding these bytes, or the empty slot where they would go (the table is at
        most half full, so there is one); ``probes[0]`` counts the slots looked at past the first."""
        cdef uint64_t at = _hash(p, n, self.keyed) & self.mask
        cdef cnp.int64_t word
        while True:
            word = self.slots[at]
            if word < 0 or (self.offsets[word + 1] - self.offsets[word] == n
                            and memcmp(self.data + self.offsets[word], p, n) == 0):
                return at
            at = (at + 1) & self.mask
            probes[0] += 1

    cdef inline cnp.int64_t find(self, const unsigned char *p, Py_ssize_t n) noexcept nogil:
        """The index of the word with these UTF-8 bytes, or -1."""
        cdef int64_t probes = 0  # (not kept: lookups run on many threads at once)
        return self.slots[self._slot(p, n, &probes)]

    def get(self, bytes word):
        """The index of ``word`` (UTF-8 bytes), or None."""
        if self.slots == NULL:
            raise ValueError("this VocabTable was never built")
        cdef cnp.int64_t found = self.find(<const unsigned char *>word, len(word))
        return None if found < 0 else found

    def __len__(self):
        """The number of distinct words."""
        return self.n_words


def encode_lines(const unsigned char[::1] buf, Py_ssize_t first, Py_ssize_t stop, VocabTable vocab not None,
                 Py_ssize_t max_sentence_length=10000, Py_ssize_t max_job_words=10000):
    """Encode the lines of ``buf`` that start in ``[first, stop)``.

    Parameters
    ----------
    buf : bytes-like
        File bytes; ``first`` must be a line start (or ``len(buf)``). The last line starting
        before ``stop`` must be complete in ``buf`` (end with ``b"\\n"``, or at the end of file).
    first, stop : int
        Positions in ``buf``: every line whose first byte lies in ``[first, stop)`` is encoded.
    vocab : VocabTable
        The vocabulary.
    max_sentence_length : int
        Tokens per sentence at most (gensim's ``LineSentence`` cut; 10,000).
    max_job_words : int
        In-vocabulary words per job at most (the kernel trains at most 10,000 words of a job).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray, int, int)
        ``indices`` (uint32), ``offsets`` (int64, sentences + 1 entries), ``jobs`` (int64: the
        sentence each job starts at, then the number of sentences), raw words (tokens, in the
        vocabulary or not) and examples (sentences, as ``LineSentence`` yields them: empty lines
        yield none).
    """
    cdef Py_ssize_t size = buf.shape[0]
    if not 0 <= first <= size or stop < 0:
        raise ValueError(f"encode_lines: first={first} and stop={stop} do not fit a buffer of {size} bytes")
    if max_sentence_length < 1 or max_job_words < 1:
        raise ValueError("encode_lines: max_sentence_length and max_job_words must be >= 1")
    if vocab.slots == NULL:
        raise ValueError("encode_lines: the VocabTable was never built")
    if stop > size:
        stop = size
    cdef Py_ssize_t capacity = (size - first) // 2 + 2  # a token and its separator take >= 2 bytes
    indices = np.empty(capacity, dtype=np.uint32)
    offsets = np.empty(capacity + 1, dtype=np.int64)
    jobs = np.empty(capacity + 1, dtype=np.int64)
    cdef cnp.uint32_t[::1] out = indices
    cdef cnp.int64_t[::1] ends = offsets
    cdef cnp.int64_t[::1] starts = jobs
    cdef const unsigned char *p = &buf[0] if size else NULL
    cdef Py_ssize_t pos = first, line_end, i, j, n = 0, sentences = 0, n_jobs = 1, job_words = 0
    cdef Py_ssize_t raw = 0, in_piece = 0, length
    cdef const void *newline
    cdef cnp.int64_t found
    ends[0] = 0
    starts[0] = 0
    with nogil:
        while pos < stop:
            newline = memchr(p + pos, 10, size - pos)
            line_end = (<const unsigned char *>newline - p) if newline != NULL else size
            i = pos
            in_piece = 0
            while True:
                j = _token(p, i, line_end, &i)
                if i < line_end:  # a token [i, j)
                    found = vocab.find(p + i, j - i)
                    if found >= 0:
                        out[n] = <cnp.uint32_t>found
                        n += 1
                    raw += 1
                    in_piece += 1
                    i = j
                # close a sentence at the line's end, or once it holds max_sentence_length tokens
                if in_piece and (in_piece == max_sentence_length or i >= line_end):
                    length = n - ends[sentences]
                    if job_words and job_words + length > max_job_words:
                        starts[n_jobs] = sentences
                        n_jobs += 1
                        job_words = 0
                    job_words += length
                    sentences += 1
                    ends[sentences] = n
                    in_piece = 0
                if i >= line_end:
                    break
            pos = line_end + 1
    starts[n_jobs] = sentences
    return indices[:n], offsets[:sentences + 1], jobs[:n_jobs + 1], raw, sentences
