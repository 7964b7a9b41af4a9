"""``corpus_file`` mode: a shared corpus file, cut into byte ranges that workers read themselves.

The file is gensim's ``corpus_file`` / ``LineSentence`` format: one sentence per line, tokens
separated by whitespace, UTF-8. Every worker must see the same file at the same path (a shared
filesystem); :func:`fingerprint` and :func:`check_file` tell whether it does.

Ranges: the dispatcher cuts ``[0, size)`` into byte ranges at fixed positions, blind to line
boundaries (:func:`ranges`). A range owns every line whose first byte lies in it, whole, even
where the line runs past the range's end; so every line of the file belongs to exactly one
range, whatever the cuts (:meth:`RangeReader.read`). The per-token work (splitting, lookups,
counting a range's words for the vocabulary) runs in compiled code
(:func:`gensim_distw2v._lines.encode_lines`, :class:`gensim_distw2v._counts.WordCounts`).
"""
import errno
import hashlib
import os
import stat

import numpy as np

from gensim_distw2v._lines import VocabTable, encode_lines

__all__ = ["fingerprint", "fingerprint_files", "check_file", "check_files", "corpus_folders", "outside", "ranges",
           "vocab_arrays", "vocab_lookup", "RangeReader", "FilesReader", "open_reader"]

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
    if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would hang or never end the read
        raise IsADirectoryError(errno.EISDIR, "not a regular file", path) if os.path.isdir(path) else \
            OSError(errno.EINVAL, "not a regular file", path)
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


def fingerprint_files(paths):
    """The :func:`fingerprint` of several files read back to back (a ``PathLineSentences`` folder).

    Returns
    -------
    dict
        ``{"size": int, "digest": str, "files": [[path, size, digest], ...]}``: the sizes' sum, a
        BLAKE2b digest over the files' digests (and their order), and each file's.
    """
    files, digest = [], hashlib.blake2b(digest_size=16)
    for path in paths:
        found = fingerprint(path)
        files.append([os.path.abspath(path), found["size"], found["digest"]])
        digest.update(f"{found['size']}:{found['digest']};".encode("ascii"))
    return {"size": sum(f[1] for f in files), "digest": digest.hexdigest(), "files": files}


def corpus_folders(spec):
    """The folders a worker may read corpora from, as real paths: ``spec`` is a ``:``-separated list (a
    worker's ``--corpus-dir``), or None (any file: returns None).

    Raises
    ------
    ValueError
        One of them is not a folder (named, with the option).
    """
    if spec is None:
        return None
    folders = []
    for folder in spec.split(os.pathsep):
        if folder:
            if not os.path.isdir(folder):
                raise ValueError(f"--corpus-dir: {folder} is not a folder")
            folders.append(os.path.realpath(folder))
    if not folders:
        raise ValueError("--corpus-dir: no folder given (leave the option out to read any file)")
    return tuple(folders)


def outside(path, folders):
    """Whether ``path``, symlinks resolved, is in none of ``folders`` (real paths); never when
    ``folders`` is None (any file this user can read)."""
    if folders is None:
        return False
    return _beyond(os.path.realpath(path), folders)


def _beyond(real, folders):
    return not any(os.path.commonpath([real, folder]) == folder for folder in folders)


def _opened_path(fin, path):
    """The real path of the file ``fin`` has open (Linux: its descriptor's, whatever the path's
    components became since; elsewhere the path resolved now)."""
    try:
        return os.readlink(f"/proc/self/fd/{fin.fileno()}")
    except OSError:
        return os.path.realpath(path)


def check_files(parts, folders=None):
    """Whether this node sees every file the client saw: None, or what is wrong with the first that differs.

    Parameters
    ----------
    parts : list of (str, int, str)
        ``(path, size, digest)`` of each file (:meth:`gensim_distw2v.protocol.CorpusFileSpec.parts`).
    folders : tuple of str, optional
        The only folders (real paths) whose files may be read (a worker's ``--corpus-dir``); a file
        outside them is refused without a look at it, so the answer says nothing of whether it
        exists or of its size. None: any file.
    """
    for path, _size, _digest in parts:
        if outside(path, folders):
            return f"{path} is not in a folder this worker reads corpora from (its --corpus-dir)"
    for path, size, digest in parts:
        problem = check_file(path, {"size": size, "digest": digest})
        if problem is not None:
            return problem
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
    """Reads byte ranges of a corpus file as encoded sentences, or counts their words (one reader
    per thread).

    Parameters
    ----------
    path : str
        The corpus file.
    vocab : gensim_distw2v._lines.VocabTable, optional
        :func:`vocab_lookup` of the vocabulary (to :meth:`read`; not needed to :meth:`count`).
    max_job_words : int
        In-vocabulary words per job at most.
    folders : tuple of str, optional
        The only folders (real paths) a file may be read from (a worker's ``--corpus-dir``): the file
        *opened* is checked, so a path whose folders were swapped for a symlink after the worker checked
        it is refused (a PermissionError naming it), not read. None: any file.
    """

    def __init__(self, path, vocab=None, max_job_words=MAX_SENTENCE_LENGTH, folders=None):
        self.file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        if folders is not None and _beyond(_opened_path(self.file, path), folders):
            self.file.close()
            raise PermissionError(f"{path} is not in a folder this worker reads corpora from (its --corpus-dir) "
                                  f"now that it is opened: a folder on its path changed since it was checked")
        self.path, self.vocab, self.max_job_words = path, vocab, max_job_words

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
        buf, first, stop, _start = self._lines(lo, hi)
        return encode_lines(buf, first, stop, self.vocab, MAX_SENTENCE_LENGTH, self.max_job_words)

    def count(self, lo, hi, counts, offset=0):
        """Count the words of the lines that start in bytes ``[lo, hi)`` into ``counts`` (a
        :class:`gensim_distw2v._counts.WordCounts`), their first occurrences as offsets in the file
        plus ``offset``; ``(raw words, sentences)``.

        Raises
        ------
        ValueError
            A line is not valid UTF-8 (the file and the line's offset named).
        """
        buf, first, stop, start = self._lines(lo, hi)
        try:
            return counts.count_lines(buf, first, stop, start + offset, MAX_SENTENCE_LENGTH)
        except ValueError as err:
            raise ValueError(f"{self.path}: {err}") from None

    def _lines(self, lo, hi):
        """``(buf, first, stop, start)``: the file's bytes from ``start`` on, with every line that
        starts in ``[lo, hi)`` whole, those lines starting in ``buf[first:stop]``."""
        start = max(0, lo - 1)  # the byte before lo tells whether lo starts a line
        self.file.seek(start)
        buf = bytearray(self.file.read(hi - start))
        if lo == 0:
            first = 0
        else:
            newline = buf.find(b"\n", 0, hi - 1 - start)  # a line starts at p in [lo, hi) iff byte p-1 is \n
            if newline < 0:
                return b"", 0, 0, start  # the range lies inside one line: it owns none
            first = newline + 1
        # the last line starting before hi ends at the first \n at or after byte hi - 1 (or at the end)
        searched = max(0, hi - 1 - start)
        while buf.find(b"\n", searched) < 0:
            searched = max(searched, len(buf))
            more = self.file.read(READ_MORE)
            if not more:
                break
            buf += more
        return buf, first, hi - start, start

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class FilesReader:
    """Reads byte ranges of several files laid back to back, as :class:`RangeReader` reads one.

    A range ``[lo, hi)`` of the whole owns the lines whose first byte lies in it, as in one file;
    a file's end ends its last line (``PathLineSentences`` reads each file apart), so a range that
    spans files reads each one's part and the parts' sentences and jobs follow one another (no job
    spans two files).

    Parameters
    ----------
    parts : list of (str, int, str)
        ``(path, size, digest)`` of each file, in order.
    vocab : gensim_distw2v._lines.VocabTable
        :func:`vocab_lookup` of the vocabulary.
    max_job_words : int
        In-vocabulary words per job at most.
    folders : tuple of str, optional
        As :class:`RangeReader`'s, for every file.
    """

    def __init__(self, parts, vocab=None, max_job_words=MAX_SENTENCE_LENGTH, folders=None):
        self.paths = [path for path, _size, _digest in parts]
        self.starts = np.cumsum([0] + [size for _path, size, _digest in parts]).tolist()
        self.vocab, self.max_job_words, self.folders = vocab, max_job_words, folders
        self.open = None  # (file index, its RangeReader): one file open at a time (a folder may hold thousands)

    def close(self):
        """Close the file open."""
        if self.open is not None:
            self.open[1].close()
            self.open = None

    def _reader(self, i):
        if self.open is None or self.open[0] != i:
            self.close()
            self.open = (i, RangeReader(self.paths[i], self.vocab, self.max_job_words, self.folders))
        return self.open[1]

    def read(self, lo, hi):
        """Encode the lines that start in bytes ``[lo, hi)`` of the files back to back.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray, numpy.ndarray, int, int)
            As :meth:`RangeReader.read`.
        """
        pieces = []
        for i in range(len(self.paths)):
            start, end = self.starts[i], self.starts[i + 1]
            if end <= lo or start >= hi or end == start:
                continue
            pieces.append(self._reader(i).read(max(lo, start) - start, min(hi, end) - start))
        if len(pieces) == 1:
            return pieces[0]
        return _joined(pieces, self.vocab)

    def count(self, lo, hi, counts):
        """Count the words of the lines that start in bytes ``[lo, hi)`` of the files back to back
        into ``counts``, first occurrences as offsets in the whole; ``(raw words, sentences)``
        (:meth:`RangeReader.count`)."""
        raw = sentences = 0
        for i in range(len(self.paths)):
            start, end = self.starts[i], self.starts[i + 1]
            if end <= lo or start >= hi or end == start:
                continue
            got = self._reader(i).count(max(lo, start) - start, min(hi, end) - start, counts, start)
            raw, sentences = raw + got[0], sentences + got[1]
        return raw, sentences

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _joined(pieces, vocab):
    """Several :func:`encode_lines` results as one: sentences, then jobs, one after another."""
    raw, examples = sum(p[3] for p in pieces), sum(p[4] for p in pieces)
    pieces = [p for p in pieces if len(p[1]) > 1]  # a piece without sentences adds no (empty) job
    if len(pieces) <= 1:
        found = pieces[0] if pieces else encode_lines(b"", 0, 0, vocab)
        return found[:3] + (raw, examples)
    indices = np.concatenate([p[0] for p in pieces])
    offsets, jobs, words, sentences = [np.zeros(1, dtype=np.int64)], [], 0, 0
    for p_indices, p_offsets, p_jobs, _raw, _examples in pieces:
        offsets.append(p_offsets[1:] + words)
        jobs.append(p_jobs[:-1] + sentences)
        words += len(p_indices)
        sentences += len(p_offsets) - 1
    jobs.append(np.array([sentences], dtype=np.int64))
    return indices, np.concatenate(offsets).astype(np.int64), np.concatenate(jobs).astype(np.int64), raw, examples


def open_reader(spec, vocab, folders=None):
    """A reader of a session's corpus (:class:`gensim_distw2v.protocol.CorpusFileSpec`): one file's
    :class:`RangeReader`, or a :class:`FilesReader` of several; ``folders``: a worker's
    ``--corpus-dir`` (:func:`corpus_folders`), checked against each file as it is opened."""
    if spec.files is None:
        return RangeReader(spec.path, vocab, folders=folders)
    return FilesReader(spec.parts(), vocab, folders=folders)
