# cython: language_level=3
# cython: boundscheck=False
# cython: wraparound=False
"""Word counts of a corpus file's lines, as gensim's ``build_vocab`` counts them, compiled.

A worker counts byte ranges of the corpus file (the lines that start in each, whole, as it reads
them to train: :mod:`gensim_distw2v.io.corpusfile`). Lines are split as gensim's ``LineSentence``
splits them (the same whitespace as :func:`gensim_distw2v._lines.encode_lines`; a line of more
than ``max_sentence_length`` tokens is several sentences; an empty line is none), and each line
must be valid UTF-8, as ``LineSentence``'s strict decoding demands. Every distinct word keeps its
count and the file offset of its first occurrence: gensim's vocabulary keeps its words in the
order they first occur (the order ties of count keep when it sorts), so counts of ranges counted
anywhere, merged (:meth:`WordCounts.add`), give gensim's order back (:meth:`WordCounts.arrays`).
The table needs no Python objects: the whole loop runs without the GIL.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport INT64_MAX, int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp, memcpy

cnp.import_array()


include "tokens.pxi"


cdef inline Py_ssize_t _utf8_bad(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """The offset of the first byte of ``p[:n]`` that strict UTF-8 decoding refuses (as Python's
    ``bytes.decode('utf-8')``: no overlong forms, no surrogates, nothing beyond U+10FFFF), or -1."""
    cdef Py_ssize_t i = 0, k, need
    cdef unsigned char c, lo, hi
    while i < n:
        c = p[i]
        if c < 0x80:
            i += 1
            continue
        lo, hi = 0x80, 0xBF
        if 0xC2 <= c <= 0xDF:
            need = 1
        elif c == 0xE0:
            need, lo = 2, 0xA0
        elif 0xE1 <= c <= 0xEC or 0xEE <= c <= 0xEF:
            need = 2
        elif c == 0xED:
            need, hi = 2, 0x9F
        elif c == 0xF0:
            need, lo = 3, 0x90
        elif 0xF1 <= c <= 0xF3:
            need = 3
        elif c == 0xF4:
            need, hi = 3, 0x8F
        else:
            return i
        if i + need >= n:  # fewer bytes left than the sequence needs
            return i
        if not lo <= p[i + 1] <= hi:
            return i
        for k in range(2, need + 1):
            if not 0x80 <= p[i + k] <= 0xBF:
                return i
        i += need + 1
    return -1


def siphash(const unsigned char[::1] data, uint64_t k0, uint64_t k1, int c_rounds=1, int d_rounds=3):
    """SipHash-c-d of ``data`` under the key ``(k0, k1)``, as the word tables hash (with this process's
    own key, which nothing outside it sees): for tests against the reference."""
    return gdw_siphash(&data[0] if data.shape[0] else <const unsigned char *>b"", <size_t>data.shape[0], k0, k1,
                       c_rounds, d_rounds)


cdef inline bint _is_word(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """Whether ``p[:n]`` is one token as ``LineSentence`` splits text: not empty, no whitespace, UTF-8."""
    cdef Py_ssize_t i
    if n <= 0 or _utf8_bad(p, n) >= 0:
        return False
    for i in range(n):
        if _space(p, i, n):
            return False
    return True


cdef inline int _resize(void **block, size_t size) noexcept nogil:
    """``*block`` reallocated to ``size`` bytes; 1 (the block as it was) if there is no memory."""
    cdef void *p = realloc(block[0], size)
    if p == NULL:
        return 1
    block[0] = p
    return 0


cdef class WordCounts:
    """Distinct words (UTF-8 bytes) with their counts and first offsets, in a hash table without the GIL.

    Count ranges with :meth:`count_lines`, merge other tables' :meth:`arrays` with :meth:`add`,
    read the result with :meth:`arrays` (in first-occurrence order).
    """
    cdef unsigned char *arena  # the words' bytes, back to back
    cdef int64_t arena_len, arena_cap
    cdef int64_t *key_at  # per word: where its bytes start in the arena
    cdef int64_t *key_len
    cdef int64_t *counts
    cdef int64_t *firsts  # the file offset of its first occurrence
    cdef uint64_t *hashes
    cdef int64_t n, cap  # words, and room for them
    cdef int64_t *slots  # a word's number, or -1
    cdef uint64_t mask
    cdef readonly int64_t probes  # slots looked at past each word's first: how long the chains run
    cdef readonly int64_t adds  # words counted (each a look along its chain)
    cdef readonly bint keyed  # whether the slots follow the keyed hash (after a chain of more than MAX_CHAIN)

    def __cinit__(self):
        self.arena = NULL
        self.key_at = self.key_len = self.counts = self.firsts = self.slots = NULL
        self.hashes = NULL
        self.n = self.cap = self.arena_len = self.arena_cap = 0
        self.mask = 0
        self.probes = 0
        self.adds = 0
        self.keyed = False
        if self._grow_words(16) or self._grow_arena(256) or self._rehash(64):  # (small: a table a range)
            raise MemoryError()

    def __dealloc__(self):
        free(self.arena)
        free(self.key_at)
        free(self.key_len)
        free(self.counts)
        free(self.firsts)
        free(self.hashes)
        free(self.slots)

    def __len__(self):
        """The number of distinct words."""
        return self.n

    cdef int _grow_words(self, int64_t cap) noexcept nogil:
        if (_resize(<void **>&self.key_at, cap * sizeof(int64_t))
                or _resize(<void **>&self.key_len, cap * sizeof(int64_t))
                or _resize(<void **>&self.counts, cap * sizeof(int64_t))
                or _resize(<void **>&self.firsts, cap * sizeof(int64_t))
                or _resize(<void **>&self.hashes, cap * sizeof(uint64_t))):
            return 1
        self.cap = cap
        return 0

    cdef int _grow_arena(self, int64_t cap) noexcept nogil:
        if _resize(<void **>&self.arena, cap):
            return 1
        self.arena_cap = cap
        return 0

    cdef int _rehash(self, int64_t capacity) noexcept nogil:
        """A slot table of ``capacity`` (a power of two, more than twice the words) for every word."""
        cdef int64_t *slots = <int64_t *>malloc(capacity * sizeof(int64_t))
        cdef int64_t i
        cdef uint64_t at, mask = capacity - 1
        if slots == NULL:
            return 1
        for i in range(capacity):
            slots[i] = -1
        for i in range(self.n):
            at = self.hashes[i] & mask
            while slots[at] >= 0:
                at = (at + 1) & mask
            slots[at] = i
        free(self.slots)
        self.slots, self.mask = slots, mask
        return 0

    cdef int _rekey(self) noexcept nogil:
        """Every word's slot again, on the keyed hash; 1 if out of memory."""
        cdef int64_t i
        self.keyed = True
        for i in range(self.n):
            self.hashes[i] = _hash(self.arena + self.key_at[i], self.key_len[i], True)
        return self._rehash(<int64_t>self.mask + 1)

    cdef int _add(self, const unsigned char *p, int64_t length, int64_t count, int64_t first) noexcept nogil:
        """Count ``count`` more of the word ``p[:length]``, first seen at ``first``; 1 if out of memory."""
        cdef uint64_t h = _hash(p, length, self.keyed)
        cdef uint64_t at = h & self.mask
        cdef int64_t word, cap
        cdef Py_ssize_t chain = 0
        self.adds += 1
        if not self.keyed and self.probes > _MEAN_PROBES * self.adds + _PROBE_SLACK:
            # many short chains of words written to collide (each below MAX_CHAIN): on to the keyed hash
            return self._rekey() or self._add(p, length, count, first)
        while True:
            word = self.slots[at]
            if word < 0:
                break
            if self.hashes[word] == h and self.key_len[word] == length and \
                    memcmp(self.arena + self.key_at[word], p, length) == 0:
                # saturating: counts summed from many parts never wrap round to a negative
                self.counts[word] = INT64_MAX if self.counts[word] > INT64_MAX - count else self.counts[word] + count
                if first < self.firsts[word]:
                    self.firsts[word] = first
                return 0
            at = (at + 1) & self.mask
            self.probes += 1
            chain += 1
            if chain > _MAX_CHAIN and not self.keyed:  # words written to collide: on to the keyed hash
                return self._rekey() or self._add(p, length, count, first)
        if self.n == self.cap and self._grow_words(2 * self.cap):
            return 1
        if self.arena_len + length > self.arena_cap:
            cap = 2 * self.arena_cap
            while cap < self.arena_len + length:
                cap *= 2
            if self._grow_arena(cap):
                return 1
        word = self.n
        memcpy(self.arena + self.arena_len, p, length)
        self.key_at[word], self.key_len[word] = self.arena_len, length
        self.counts[word], self.firsts[word], self.hashes[word] = count, first, h
        self.arena_len += length
        self.n += 1
        self.slots[at] = word
        if 2 * self.n > <int64_t>self.mask and self._rehash(2 * (<int64_t>self.mask + 1)):
            return 1
        return 0

    def count_lines(self, const unsigned char[::1] buf, Py_ssize_t first, Py_ssize_t stop, int64_t base=0,
                    Py_ssize_t max_sentence_length=10000):
        """Count the words of the lines of ``buf`` that start in ``[first, stop)``.

        Parameters
        ----------
        buf : bytes-like
            File bytes; ``first`` must be a line start (or ``len(buf)``), and the last line starting
            before ``stop`` complete in ``buf`` (as :func:`gensim_distw2v._lines.encode_lines`).
        first, stop : int
            Positions in ``buf``.
        base : int
            The file offset of ``buf[0]``: a word's first occurrence is kept as a file offset.
        max_sentence_length : int
            Tokens per sentence at most (gensim's ``LineSentence`` cut; 10,000).

        Returns
        -------
        (int, int)
            Raw words (tokens) and sentences (as ``LineSentence`` yields them: empty lines none).

        Raises
        ------
        ValueError
            A line is not valid UTF-8 (its file offset is named). The lines before it are counted:
            count a range into a table of its own, and drop the table on an error.
        """
        cdef Py_ssize_t size = buf.shape[0]
        if not 0 <= first <= size or stop < 0:
            raise ValueError(f"count_lines: first={first} and stop={stop} do not fit a buffer of {size} bytes")
        if max_sentence_length < 1:
            raise ValueError("count_lines: max_sentence_length must be >= 1")
        if stop > size:
            stop = size
        cdef const unsigned char *p = &buf[0] if size else NULL
        cdef Py_ssize_t pos = first, line_end, i, j, in_piece, bad = -1, bad_line = -1
        cdef int64_t raw = 0, sentences = 0
        cdef int failed = 0
        cdef const void *newline
        with nogil:
            while pos < stop:
                newline = memchr(p + pos, 10, size - pos)
                line_end = (<const unsigned char *>newline - p) if newline != NULL else size
                bad = _utf8_bad(p + pos, line_end - pos)
                if bad >= 0:
                    bad, bad_line = pos + bad, pos
                    break
                i = pos
                in_piece = 0
                while True:
                    j = _token(p, i, line_end, &i)
                    if i < line_end:  # a token [i, j)
                        if self._add(p + i, j - i, 1, base + i):
                            failed = 1
                            break
                        raw += 1
                        in_piece += 1
                        i = j
                    if in_piece and (in_piece == max_sentence_length or i >= line_end):
                        sentences += 1
                        in_piece = 0
                    if i >= line_end:
                        break
                if failed:
                    break
                pos = line_end + 1
        if failed:
            raise MemoryError("count_lines: out of memory for the word table")
        if bad >= 0:
            raise ValueError(f"the line at byte {base + bad_line} is not valid UTF-8 (byte {base + bad}: "
                             f"{bytes(buf[bad:bad + 4])!r}); gensim's LineSentence reads UTF-8 text only")
        return raw, sentences

    def add(self, words, offsets, counts, firsts):
        """Merge another table's :meth:`arrays` into this one (counts summed, first offsets the least)."""
        cdef const unsigned char[::1] data = np.ascontiguousarray(words, dtype=np.uint8)
        cdef const int64_t[::1] at = np.ascontiguousarray(offsets, dtype=np.int64)
        cdef const int64_t[::1] c = np.ascontiguousarray(counts, dtype=np.int64)
        cdef const int64_t[::1] f = np.ascontiguousarray(firsts, dtype=np.int64)
        cdef Py_ssize_t i, n = c.shape[0]
        if at.shape[0] != n + 1 or f.shape[0] != n or (n and (at[0] != 0 or at[n] != data.shape[0])):
            raise ValueError("add: offsets must have one more entry than counts and firsts, from 0 to len(words)")
        for i in range(n):
            if at[i + 1] < at[i] or c[i] < 1 or f[i] < 0:
                raise ValueError("add: offsets must not decrease, counts must be >= 1 and firsts >= 0")
        cdef const unsigned char *p = &data[0] if data.shape[0] else <const unsigned char *>b""
        cdef Py_ssize_t bad = -1
        with nogil:
            for i in range(n):
                if not _is_word(p + at[i], at[i + 1] - at[i]):
                    bad = i
                    break
        if bad >= 0:
            raise ValueError(f"add: word {bad} ({bytes(data[at[bad]:at[bad + 1]][:40])!r}) is not a word as "
                             "LineSentence splits text: empty, holding whitespace, or not UTF-8")
        cdef int failed = 0
        with nogil:
            for i in range(n):
                if self._add(p + at[i], at[i + 1] - at[i], c[i], f[i]):
                    failed = 1
                    break
        if failed:
            raise MemoryError("add: out of memory for the word table")

    def nbytes(self):
        """Bytes the table holds (its words, their counts, offsets and hashes, its slots)."""
        return int(self.arena_cap + 5 * 8 * self.cap + 8 * (self.mask + 1))

    def split(self, int parts):
        """The words in ``parts`` groups by a hash of each word (a word is in the same group on every
        node, whatever else a table holds): a list of ``parts`` tuples ``(words, offsets, counts,
        firsts)`` as :meth:`arrays` gives (each group in the table's order, not first-occurrence)."""
        if not 1 <= parts <= 65536:
            raise ValueError(f"split: parts must be in [1, 65536], got {parts}")
        cdef int64_t n = self.n, i, p, length
        cdef uint64_t many = <uint64_t>parts
        sizes = np.zeros(parts + 1, dtype=np.int64)  # words per group, then where each group starts
        spans = np.zeros(parts + 1, dtype=np.int64)  # bytes per group, then where each group's start
        group = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] g = group, ws = sizes, bs = spans
        with nogil:
            for i in range(n):  # unkeyed, so that every node puts a word in the same group
                p = <int64_t>((_fnv1a(self.arena + self.key_at[i], self.key_len[i]) >> 32) % many)
                g[i] = p
                ws[p + 1] += 1
                bs[p + 1] += self.key_len[i]
            for p in range(parts):
                ws[p + 1] += ws[p]
                bs[p + 1] += bs[p]
        words = np.empty(self.arena_len, dtype=np.uint8)
        lengths = np.empty(n, dtype=np.int64)
        counts = np.empty(n, dtype=np.int64)
        firsts = np.empty(n, dtype=np.int64)
        word_at, byte_at = sizes[:-1].copy(), spans[:-1].copy()  # each group's cursor
        cdef unsigned char[::1] w = words
        cdef int64_t[::1] ln = lengths, c = counts, f = firsts, wa = word_at, ba = byte_at
        cdef int64_t k
        with nogil:
            for i in range(n):
                p = g[i]
                k = wa[p]
                length = self.key_len[i]
                if length:
                    memcpy(&w[ba[p]], self.arena + self.key_at[i], length)
                ba[p] += length
                ln[k], c[k], f[k] = length, self.counts[i], self.firsts[i]
                wa[p] = k + 1
        out = []
        for p in range(parts):
            lo, hi = sizes[p], sizes[p + 1]
            offsets = np.zeros(hi - lo + 1, dtype=np.int64)
            np.cumsum(lengths[lo:hi], out=offsets[1:])
            out.append((words[spans[p]:spans[p + 1]], offsets, counts[lo:hi], firsts[lo:hi]))
        return out

    def arrays(self):
        """``(words, offsets, counts, firsts)``: the words' UTF-8 bytes back to back (uint8), their
        ``n + 1`` offsets, counts and first offsets (int64), in the order the words first occur."""
        cdef int64_t n = self.n, i, k, length
        firsts = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] f = firsts
        if n:
            memcpy(&f[0], self.firsts, n * sizeof(int64_t))
        cdef const int64_t[::1] by = np.argsort(firsts, kind="stable").astype(np.int64)
        words = np.empty(self.arena_len, dtype=np.uint8)
        offsets = np.zeros(n + 1, dtype=np.int64)
        counts = np.empty(n, dtype=np.int64)
        cdef unsigned char[::1] w = words
        cdef int64_t[::1] o = offsets
        cdef int64_t[::1] c = counts
        cdef int64_t at = 0
        with nogil:
            for k in range(n):
                i = by[k]
                length = self.key_len[i]
                if length:
                    memcpy(&w[at], self.arena + self.key_at[i], length)
                at += length
                o[k + 1] = at
                c[k] = self.counts[i]
                f[k] = self.firsts[i]
        return words, offsets, counts, firsts


def decode_words(words, offsets, order):
    """The words ``words[offsets[i]:offsets[i + 1]]`` for each ``i`` of ``order``, as a list of str
    (UTF-8; :meth:`WordCounts.arrays`' or :meth:`WordCounts.split`'s arrays): one compiled loop,
    where slicing in Python cost about 0.25 us a word.

    Raises
    ------
    ValueError
        Offsets or ``order`` out of range, or a word that is not UTF-8.
    """
    cdef const unsigned char[::1] data = np.ascontiguousarray(words, dtype=np.uint8)
    cdef const int64_t[::1] at = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef const int64_t[::1] by = np.ascontiguousarray(order, dtype=np.int64)
    cdef Py_ssize_t n = at.shape[0] - 1, k, i, size = data.shape[0]
    if n < 0 or (n and (at[0] != 0 or at[n] != size)):
        raise ValueError("decode_words: offsets must run from 0 to len(words)")
    for k in range(n):
        if at[k + 1] < at[k]:
            raise ValueError("decode_words: offsets must not decrease")
    cdef const char *p = <const char *>&data[0] if size else <const char *>b""
    out = [None] * by.shape[0]
    for k in range(by.shape[0]):
        i = by[k]
        if not 0 <= i < n:
            raise ValueError(f"decode_words: order holds {i}, beyond the {n} words")
        out[k] = PyUnicode_DecodeUTF8(p + at[i], at[i + 1] - at[i], "strict")
    return out
