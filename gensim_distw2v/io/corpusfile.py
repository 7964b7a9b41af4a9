"""``corpus_file`` mode: a shared corpus file, cut into byte ranges that workers read themselves.

The file is gensim's ``corpus_file`` / ``LineSentence`` format: one sentence per line, tokens
separated by whitespace, UTF-8. Every worker must see the same file at the same path (a shared
filesystem); :func:`fingerprint` and :func:`check_file` tell whether it does.

Ranges: the dispatcher cuts ``[0, size)`` into byte ranges at fixed positions, blind to line
boundaries (:func:`ranges`). A range owns every line whose first byte lies in it, whole, even
where the line runs past the range's end; so every line of the file belongs to exactly one
range, whatever the cuts (:meth:`RangeReader.read`). The per-token work (splitting, lookups)
runs in compiled code (:func:`gensim_distw2v._lines.encode_lines`).
"""
import hashlib
import os

import numpy as np

from gensim_distw2v._lines import VocabTable, encode_lines

__all__ = ["fingerprint", "check_file", "ranges", "vocab_arrays", "vocab_lookup", "RangeReader"]

SAMPLE_BLOCKS = 16  # blocks of the file read for its fingerprint: the first, the last, and evenly between
BLOCK_BYTES = 64 * 1024
READ_MORE = 1024 * 1024  # bytes read at a time past a range's end, to finish its last line
MAX_SENTENCE_LENGTH = 10000  # gensim's LineSentence cut (and the kernel's cap on a job's words)


def fingerprint(path):
    """Size and a digest of sampled blocks of a file: cheap, and different for a different file.

    Returns
    -------
    dict
        ``{"size": int, "digest": str}`` (BLAKE2b over the size and :data:`SAMPLE_BLOCKS` blocks
        of :data:`BLOCK_BYTES` bytes at positions fixed by the size).

    Raises
    ------
    OSError
        The file cannot be opened or read.
    """
    with open(path, "rb") as fin:
        size = os.fstat(fin.fileno()).st_size
        digest = hashlib.blake2b(str(size).encode("ascii"), digest_size=16)
        last = max(0, size - BLOCK_BYTES)
        for offset in sorted({last * i // (SAMPLE_BLOCKS - 1) for i in range(SAMPLE_BLOCKS)}):
            fin.seek(offset)
            digest.update(fin.read(BLOCK_BYTES))
    return {"size": size, "digest": digest.hexdigest()}


def check_file(path, expected):
    """Whether this node sees the file the client saw.

    Parameters
    ----------
    path : str
        The corpus file's path.
    expected : dict
        The client's :func:`fingerprint` of it.

    Returns
    -------
    str or None
        None if the file is the same, else what is wrong (missing, unreadable, other size,
        other content).
    """
    try:
        mine = fingerprint(path)
    except FileNotFoundError:
        return f"no file at {path}"
    except IsADirectoryError:
        return f"{path} is a directory"
    except OSError as err:
        return f"cannot read {path}: {err.strerror or err}"
    if mine["size"] != expected["size"]:
        return f"{path} has {mine['size']} bytes here, the client's has {expected['size']}"
    if mine["digest"] != expected["digest"]:
        return f"{path} has the client's size ({mine['size']} bytes) but other content"
    return None


def ranges(size, range_bytes):
    """Number of ranges ``[i * range_bytes, min(size, (i + 1) * range_bytes))`` covering ``size`` bytes."""
    return -(-size // range_bytes)


def vocab_arrays(index_to_key):
    """The vocabulary as two arrays for the wire: UTF-8 bytes back to back, and int64 offsets.

    Raises
    ------
    ValueError
        A key is not a str (``corpus_file`` text has str tokens only).
    """
    bad = next((key for key in index_to_key if not isinstance(key, str)), None)
    if bad is not None:
        raise ValueError(f"corpus_file training needs a vocabulary of str words, but it holds {bad!r} "
                         f"({type(bad).__name__}); build it with build_vocab(corpus_file=...)")
    encoded = [key.encode("utf8") for key in index_to_key]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def vocab_lookup(vocab_bytes, vocab_offsets):
    """The vocabulary's lookup table (UTF-8 bytes -> index, usable without the GIL) from
    :func:`vocab_arrays`' two arrays.

    Raises
    ------
    ValueError
        The offsets do not run non-decreasing from 0 to ``len(vocab_bytes)``.
    """
    return VocabTable(vocab_bytes, vocab_offsets)


class RangeReader:
    """Reads byte ranges of a corpus file as encoded sentences (one reader per thread).

    Parameters
    ----------
    path : str
        The corpus file.
    vocab : gensim_distw2v._lines.VocabTable
        :func:`vocab_lookup` of the vocabulary.
    max_job_words : int
        In-vocabulary words per job at most.
    """

    def __init__(self, path, vocab, max_job_words=MAX_SENTENCE_LENGTH):
        self.file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        self.vocab, self.max_job_words = vocab, max_job_words

    def close(self):
        """Close the file."""
        self.file.close()

    def read(self, lo, hi):
        """Encode the lines that start in bytes ``[lo, hi)``, each whole.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray, numpy.ndarray, int, int)
            As :func:`gensim_distw2v._lines.encode_lines`: indices, sentence offsets, job starts,
            raw words and examples.
        """
        start = max(0, lo - 1)  # the byte before lo tells whether lo starts a line
        self.file.seek(start)
        buf = bytearray(self.file.read(hi - start))
        if lo == 0:
            first = 0
        else:
            newline = buf.find(b"\n", 0, hi - 1 - start)  # a line starts at p in [lo, hi) iff byte p-1 is \n
            if newline < 0:
                return encode_lines(b"", 0, 0, self.vocab)  # the range lies inside one line: it owns none
            first = newline + 1
        # the last line starting before hi ends at the first \n at or after byte hi - 1 (or at the end)
        searched = max(0, hi - 1 - start)
        while buf.find(b"\n", searched) < 0:
            searched = max(searched, len(buf))
            more = self.file.read(READ_MORE)
            if not more:
                break
            buf += more
        return encode_lines(buf, first, hi - start, self.vocab, MAX_SENTENCE_LENGTH, self.max_job_words)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
