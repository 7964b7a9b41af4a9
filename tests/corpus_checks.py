"""Checks shared by the synthetic corpora's tests: the text is gensim ``LineSentence`` of the asked size, and its
frequencies are what the generator's model expects."""
import re
from collections import Counter

import numpy as np
import pytest

from .benchmark_modules import load

synth_corpus = load("synth_corpus")


def assert_linesentence(path, tokens, lines, asked):
    """Lowercase tokens, one sentence a line, ``tokens`` in ``lines`` lines: whole lines, at most one over ``asked``;
    lengths of real text's (3 to 300, median 12 to 18)."""
    text = open(path, encoding="ascii").read()
    assert re.fullmatch(r"([a-z]+( [a-z]+)*\n)+", text)
    per_line = [len(line.split()) for line in text.splitlines()]
    assert len(per_line) == lines and sum(per_line) == tokens
    assert asked <= tokens < asked + 300  # whole lines: at most one line over
    assert min(per_line) >= 3 and max(per_line) <= 300 and 12 <= np.median(per_line) <= 18


def assert_frequencies_follow(model, path, tokens, expected_distinct):
    """Distinct words (and those seen 5 times) as ``expected_distinct(model, tokens, min_count)`` says, the 30
    most frequent words' counts as ``model.expected_count`` says, and a rank/frequency slope near -1."""
    counts = Counter(open(path, encoding="ascii").read().split())
    assert len(counts) == pytest.approx(expected_distinct(model, tokens), rel=0.05)
    seen5 = sum(1 for c in counts.values() if c >= 5)
    assert seen5 == pytest.approx(expected_distinct(model, tokens, 5), rel=0.1)
    top = [w for w, _ in counts.most_common(30)]
    expected = model.expected_count([synth_corpus._parse(w) for w in top], tokens)
    assert np.array([counts[w] for w in top]) == pytest.approx(expected, rel=0.15)
    freq = np.array(sorted(counts.values(), reverse=True)[9:1000], dtype=float)
    slope = np.polyfit(np.log(np.arange(10, 10 + len(freq))), np.log(freq), 1)[0]
    assert -1.4 < slope < -0.6
