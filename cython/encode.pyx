# cython: language_level=3
# cython: boundscheck=False
# cython: wraparound=False
"""Sentences of tokens to vocabulary indices, the client's per-token work, in compiled code.

The client encodes every word of an iterable corpus before it leaves the machine; in Python
that is a dictionary lookup and a list append per token, the client's largest cost. Here the
lookups run in C against gensim's own ``key_to_index`` dictionary (the same semantics: a token
that is not a key is dropped).
"""

import numpy as np

cimport numpy as cnp

cnp.import_array()


def encode_sentences(sentences, dict key_to_index):
    """Encode sentences into ``(indices, offsets)``, dropping out-of-vocabulary tokens.

    Parameters
    ----------
    sentences : sequence of sequence of str
        The job's sentences (lists are the fast path; any iterable of tokens works).
    key_to_index : dict of (str, int)
        gensim's ``wv.key_to_index``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        uint32 indices and int64 offsets (``len(sentences) + 1`` entries; sentence ``s`` is
        ``indices[offsets[s]:offsets[s + 1]]``).
    """
    if not isinstance(sentences, list):
        sentences = list(sentences)
    sentences = [s if isinstance(s, list) else list(s) for s in sentences]
    cdef list sentence
    cdef Py_ssize_t total = 0, n = 0, k = 0
    for sentence in sentences:
        total += len(sentence)
    indices = np.empty(total, dtype=np.uint32)
    offsets = np.empty(len(sentences) + 1, dtype=np.int64)
    cdef cnp.uint32_t[::1] out = indices
    cdef cnp.int64_t[::1] ends = offsets
    cdef object index
    ends[0] = 0
    for sentence in sentences:
        for token in sentence:
            index = key_to_index.get(token)
            if index is not None:
                out[n] = index
                n += 1
        k += 1
        ends[k] = n
    return indices[:n], offsets
