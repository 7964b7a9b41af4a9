"""Iterables the workers can read themselves: a ``LineSentence`` of a plain file goes the ``corpus_file`` way.

gensim users pass ``LineSentence(path)`` (or ``PathLineSentences(folder)``) to ``train()``. Streamed
through the client, every token is read, split and encoded by one Python thread, which caps a cluster
near a few million words per second. Such an iterable names a file, and the workers' ``corpus_file``
reader (:mod:`gensim_distw2v.io.corpusfile`) splits lines exactly as ``LineSentence`` does, cuts them
at the same ``max_sentence_length`` and drops the same unknown words, with the learning rate following
the same progress in words: so when the file is a plain text file the workers can read at the same
path, the client hands them the path instead of the words (a folder's files: their paths, read back
to back in ``PathLineSentences``' order). :func:`readable_file` says whether an
iterable is such a file, and if not, why (the client logs it, and streams the iterable).
"""
import dataclasses
import os
import typing

from gensim.models.word2vec import LineSentence, PathLineSentences

from gensim_distw2v.io.corpusfile import MAX_SENTENCE_LENGTH

__all__ = ["ReadableFile", "readable_file", "readable_paths", "COMPRESSED"]

# what gensim's utils.open (smart_open) decompresses by the file's extension: not readable in byte ranges
COMPRESSED = (".bz2", ".gz", ".lz4", ".xz", ".zst")


@dataclasses.dataclass(frozen=True)
class ReadableFile:
    """A corpus iterable the workers can read as a ``corpus_file``.

    Attributes
    ----------
    path : str
        The file's absolute path (of several files, their folder).
    total_words : int
        Raw words per epoch (given to ``train()``, or counted by ``build_vocab`` over the same corpus).
    kind : str
        The iterable's class name, for the log.
    files : tuple of str or None
        Several files read back to back, in order (a ``PathLineSentences`` folder); None: ``path``.
    """

    path: str
    total_words: int
    kind: str
    files: typing.Optional[tuple] = None

    @property
    def corpus_file(self):
        """What the session's ``corpus_file`` is: the path, or the files' paths."""
        return self.path if self.files is None else self.files


def _source(corpus):
    """The files an exact ``LineSentence`` / ``PathLineSentences`` reads (a list of paths), or (None, why
    not)."""
    kind = type(corpus)
    if kind is LineSentence:
        source = corpus.source
        if not isinstance(source, (str, os.PathLike)):
            return None, "it reads an open file object, not a path"
        return [os.fspath(source)], None
    if kind is PathLineSentences:
        files = [os.fspath(path) for path in corpus.input_files]
        if not files:
            return None, f"{corpus.source} holds no file"
        return files, None
    return None, None  # any other iterable: nothing to say


def readable_paths(corpus):
    """The files the workers can read for ``corpus`` as gensim reads them (a list of paths), or
    ``(None, why not)`` (None: ``corpus`` is no file-reading iterable at all)."""
    paths, why = _source(corpus)
    if paths is None:
        return None, why
    if corpus.limit is not None:
        return None, f"limit={corpus.limit} reads only the first lines"
    if corpus.max_sentence_length != MAX_SENTENCE_LENGTH:
        return None, (f"max_sentence_length={corpus.max_sentence_length} differs from the workers' reader's "
                      f"{MAX_SENTENCE_LENGTH}")
    for path in paths:
        if path.lower().endswith(COMPRESSED):
            return None, f"{path} is compressed (byte ranges of it cannot be read apart)"
        if "://" in path or not os.path.isfile(path):
            return None, f"{path} is not a regular file on this machine"
    return paths, None


def readable_file(corpus, total_examples=None, total_words=None, corpus_count=None, corpus_total_words=None):
    """Whether the workers can read ``corpus`` themselves, as a ``corpus_file``.

    Parameters
    ----------
    corpus : iterable
        What ``train()`` got as ``corpus_iterable``.
    total_examples, total_words : int, optional
        As given to ``train()``.
    corpus_count, corpus_total_words : int, optional
        The model's counts from ``build_vocab`` (sentences and raw words of the corpus it scanned).

    Returns
    -------
    (ReadableFile or None, str or None)
        The file, or None and why not (None: ``corpus`` is no file-reading iterable at all).
    """
    paths, why = readable_paths(corpus)
    if paths is None:
        return None, why
    words = total_words
    if not words and total_examples and total_examples == corpus_count:
        words = corpus_total_words  # the vocabulary was built from this corpus: its words per epoch
    if not words:
        return None, ("its words per epoch are unknown (give train() total_words, or the total_examples "
                      "build_vocab counted)")
    kind = type(corpus).__name__
    if len(paths) == 1:
        return ReadableFile(path=os.path.abspath(paths[0]), total_words=int(words), kind=kind), None
    return ReadableFile(path=os.path.abspath(os.fspath(corpus.source)), total_words=int(words), kind=kind,
                        files=tuple(os.path.abspath(path) for path in paths)), None
