"""Cutting a corpus into jobs, exactly as gensim's ``Word2Vec._job_producer`` does.

A job is a run of whole sentences of at most ``batch_words`` raw words (a longer sentence
gets a job of its own), encoded as flat uint32 vocabulary indices plus int64 sentence offsets
(out-of-vocabulary words dropped), with the learning rate gensim would give it: linear decay
from ``start_alpha`` to ``end_alpha`` with the progress pushed so far, counted in examples when
``total_examples`` is known and in raw words otherwise.
"""
from typing import NamedTuple

import numpy as np

from gensim_distw2v._encode import encode_sentences  # compiled: the client's per-token lookups

__all__ = ["Job", "encode_sentences", "next_alpha", "iter_epoch_jobs"]


class Job(NamedTuple):
    """One unit of training work."""
    indices: np.ndarray  #: uint32 vocabulary indices, sentences one after another
    offsets: np.ndarray  #: int64 sentence boundaries, ``len(sentences) + 1`` entries
    alpha: float  #: learning rate of the whole job
    raw_words: int  #: tokens before dropping out-of-vocabulary words (gensim's raw word count)
    examples: int  #: sentences in the job


def next_alpha(start_alpha, end_alpha, cur_epoch, epochs, epoch_progress):
    """gensim's ``_get_next_alpha``: linear decay over all epochs, never below ``end_alpha``."""
    progress = (cur_epoch + epoch_progress) / epochs
    return max(end_alpha, start_alpha - (start_alpha - end_alpha) * progress)


def iter_epoch_jobs(corpus, key_to_index, *, batch_words, cur_epoch, epochs, start_alpha, end_alpha,
                    total_examples=None, total_words=None, max_sentence_length=None):
    """Yield one epoch's jobs with gensim's cuts and learning rates.

    Parameters
    ----------
    corpus : iterable of list of str
        The sentences, streamed: only one job is held at a time.
    key_to_index : dict of (str, int)
        Vocabulary.
    batch_words : int
        Target raw words per job (gensim's ``batch_words``).
    cur_epoch, epochs : int
        This epoch (from 0) and the number of epochs of the ``train()`` call.
    start_alpha, end_alpha : float
        Learning-rate schedule of the ``train()`` call.
    total_examples, total_words : int, optional
        Corpus size, one of them required (as in gensim).
    max_sentence_length : int, optional
        Cut longer sentences into pieces of this many tokens, as gensim's ``LineSentence`` does
        (gensim's kernel trains at most 10,000 words of a job and drops the rest). Only the first
        piece counts as an example. None: no cutting (exactly gensim's iterable behaviour).

    Yields
    ------
    Job
    """
    if not total_examples and not total_words:
        raise ValueError("You must specify either total_examples or total_words, for proper learning-rate "
                         "and progress calculations.")
    batch, batch_size, batch_examples = [], 0, 0
    pushed_words = pushed_examples = 0
    alpha = next_alpha(start_alpha, end_alpha, cur_epoch, epochs, 0.0)

    for sentence, example in _pieces(corpus, max_sentence_length):
        length = len(sentence)
        if batch_size + length <= batch_words:
            batch.append(sentence)
            batch_size += length
            batch_examples += example
            continue
        indices, offsets = encode_sentences(batch, key_to_index)
        yield Job(indices, offsets, alpha, batch_size, batch_examples)
        if total_examples:
            pushed_examples += batch_examples
            progress = pushed_examples / total_examples
        else:
            pushed_words += batch_size
            progress = pushed_words / total_words
        alpha = next_alpha(start_alpha, end_alpha, cur_epoch, epochs, progress)
        batch, batch_size, batch_examples = [sentence], length, example
    if batch:
        indices, offsets = encode_sentences(batch, key_to_index)
        yield Job(indices, offsets, alpha, batch_size, batch_examples)


def _pieces(corpus, max_length):
    """``(sentence or piece, 1 if it starts a sentence else 0)``."""
    for sentence in corpus:
        if max_length is None or len(sentence) <= max_length:
            yield sentence, 1
        else:
            for start in range(0, len(sentence), max_length):
                yield sentence[start:start + max_length], int(start == 0)
