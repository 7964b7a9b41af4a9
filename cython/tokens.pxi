# Shared by lines.pyx and counts.pyx (``include``d): how gensim's ``LineSentence`` splits a line, and
# the hashes both modules' tables use.
import os as _os

from libc.stdint cimport uint64_t


cdef extern from "siphash.h":
    uint64_t gdw_siphash(const unsigned char *p, size_t n, uint64_t k0, uint64_t k1, int c_rounds,
                         int d_rounds) noexcept nogil


# The word tables hash with FNV-1a, fast on short words, until one insert looks at more than MAX_CHAIN
# slots, or the slots looked at past each word's first come to more than MEAN_PROBES a word on average
# (PROBE_SLACK aside): then the table is rebuilt once on SipHash-1-3 under a key drawn from the OS once per
# process (per module) and never sent anywhere. Text written to collide in FNV-1a (its low bits follow its
# state's low bits only, so chained birthday collisions give 2^k words in one slot chain; or many groups of
# fewer than MAX_CHAIN such words, each its own chain) costs a table one rebuild, after which its words land
# in slots nobody can predict; real text grows no such chain (about one slot past the first a word, at most
# half the slots full) and keeps FNV-1a's speed (benchmarks/hashflood.py measures both).
cdef uint64_t _KEY0 = int.from_bytes(_os.urandom(8), "little")
cdef uint64_t _KEY1 = int.from_bytes(_os.urandom(8), "little")
MAX_CHAIN = 100  # slots one insert may look at before its table is rebuilt on the keyed hash
cdef Py_ssize_t _MAX_CHAIN = MAX_CHAIN
MEAN_PROBES = 8  # slots past the first a counted word may cost on average before the rebuild
PROBE_SLACK = 4096  # ... beyond these many: a small table's first words decide nothing
cdef int64_t _MEAN_PROBES = MEAN_PROBES
cdef int64_t _PROBE_SLACK = PROBE_SLACK
# a vocabulary's table (built once, then looked up by every token, however often the text repeats a word): more
# than LONG_SHARE of its words (LONG_SLACK aside) placed more than LONG_CHAIN slots past their first rebuilds it
LONG_CHAIN = 16
LONG_SHARE = 1 / 256
LONG_SLACK = 64
cdef int64_t _LONG_CHAIN = LONG_CHAIN


cdef inline Py_ssize_t _space(const unsigned char *p, Py_ssize_t i, Py_ssize_t end) noexcept nogil:
    """Length in bytes of the whitespace character at ``p[i]`` (as ``str.split()`` sees it), or 0.

    Safe to call at any byte: UTF-8 continuation bytes (0x80-0xBF) never match a lead byte below.
    """
    cdef unsigned char c = p[i], c1, c2
    if c == 32 or 9 <= c <= 13 or 28 <= c <= 31:
        return 1
    if c == 0xC2:
        return 2 if i + 1 < end and (p[i + 1] == 0x85 or p[i + 1] == 0xA0) else 0
    if c < 0xE1 or c > 0xE3 or i + 2 >= end:
        return 0
    c1, c2 = p[i + 1], p[i + 2]
    if c == 0xE1:
        return 3 if c1 == 0x9A and c2 == 0x80 else 0
    if c == 0xE3:
        return 3 if c1 == 0x80 and c2 == 0x80 else 0
    if c1 == 0x80 and (0x80 <= c2 <= 0x8A or c2 == 0xA8 or c2 == 0xA9 or c2 == 0xAF):
        return 3
    if c1 == 0x81 and c2 == 0x9F:
        return 3
    return 0


cdef inline uint64_t _fnv1a(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """FNV-1a, 64 bits: the same on every node (which shard counts a word must agree across nodes)."""
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * 1099511628211ULL
    return h


cdef inline uint64_t _hash(const unsigned char *p, Py_ssize_t n, bint keyed) noexcept nogil:
    """A table's slot hash: SipHash-1-3 under this process's key once the table is ``keyed``, else FNV-1a."""
    if keyed:
        return gdw_siphash(p, <size_t>n, _KEY0, _KEY1, 1, 3)
    return _fnv1a(p, n)


cdef inline Py_ssize_t _token(const unsigned char *p, Py_ssize_t i, Py_ssize_t end, Py_ssize_t *start) noexcept nogil:
    """The next token of ``p[i:end]``: ``start[0]`` is set to its first byte and its end is returned
    (both ``end`` when only whitespace is left)."""
    cdef Py_ssize_t w
    while i < end:
        w = _space(p, i, end)
        if w == 0:
            break
        i += w
    start[0] = i
    if i < end:
        i += 1
        while i < end and _space(p, i, end) == 0:
            i += 1
    return i
