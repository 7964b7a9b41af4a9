# Shared by lines.pyx and counts.pyx (``include``d): how gensim's ``LineSentence`` splits a line, and
# the hash both modules' tables use.
from libc.stdint cimport uint64_t


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


cdef inline uint64_t _hash(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """FNV-1a, 64 bits."""
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * 1099511628211ULL
    return h


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
