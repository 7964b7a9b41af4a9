"""The vocabulary's counting on byte ranges of a corpus file (compiled, without the GIL), checked
against gensim's own scan (``Word2Vec._scan_vocab`` over a ``LineSentence`` or
``PathLineSentences``): the same words in the same first-occurrence order, the same counts, raw
words and sentences, under any cuts of awkward files and whatever order the ranges' tables merge in.
"""
import random

import numpy as np
import pytest
from gensim.models.word2vec import LineSentence, PathLineSentences, Word2Vec
from gensim.test.utils import datapath

from gensim_distw2v import protocol
from gensim_distw2v._counts import WordCounts
from gensim_distw2v.io.corpusfile import RangeReader, fingerprint_files, open_reader


def gensim_scan(sentences):
    """gensim's raw vocabulary (a dict in first-occurrence order), raw words and sentences."""
    model = Word2Vec()
    total, count = model._scan_vocab(sentences, 10 ** 9, None)
    return dict(model.raw_vocab), total, count


def as_dict(counts):
    """A table's words and counts as gensim's raw vocabulary: str -> count, in first-occurrence order."""
    words, offsets, found, _firsts = counts.arrays()
    return {bytes(words[offsets[i]:offsets[i + 1]]).decode("utf8"): int(found[i]) for i in range(len(found))}


def count_ranges(reader, cuts, rng):
    """Each range counted into a table of its own, the tables merged in a random order."""
    parts, raw, sentences = [], 0, 0
    for lo, hi in zip(cuts, cuts[1:]):
        table = WordCounts()
        got = reader.count(lo, hi, table)
        raw, sentences = raw + got[0], sentences + got[1]
        parts.append(table.arrays())
    rng.shuffle(parts)
    total = WordCounts()
    for part in parts:
        total.add(*part)
    return as_dict(total), raw, sentences


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.unit
def test_counts_match_gensims_scan_under_any_cuts(tmp_path, seed, awkward_text):
    rng = random.Random(seed)
    path = tmp_path / "awkward.txt"
    path.write_text(awkward_text(rng), encoding="utf8", newline="")
    expected = gensim_scan(LineSentence(str(path)))
    size = path.stat().st_size
    cut_sets = [list(range(0, size, step)) + [size] for step in (1, 7, 4096, size)]
    cut_sets += [[0] + sorted(rng.sample(range(1, size), 40)) + [size] for _ in range(3)]
    with RangeReader(str(path)) as reader:
        for cuts in cut_sets:
            got = count_ranges(reader, cuts, rng)
            assert got == expected, f"cuts every {cuts[1] - cuts[0]} bytes"
            assert list(got[0]) == list(expected[0])  # gensim's order: first occurrence


@pytest.mark.unit
def test_counts_of_files_back_to_back_match_path_line_sentences(tmp_path, awkward_text):
    rng = random.Random(4)
    folder = tmp_path / "parts"
    folder.mkdir()
    texts = [awkward_text(rng, lines=rng.randint(0, 40)) for _ in range(5)] + ["", "a bb", "\n", "bb a\n"]
    for i, text in enumerate(texts):
        (folder / f"{i:02d}.txt").write_text(text, encoding="utf8", newline="")
    corpus = PathLineSentences(str(folder))
    expected = gensim_scan(corpus)
    found = fingerprint_files(corpus.input_files)
    spec = protocol.CorpusFileSpec(path=str(folder), size=found["size"], digest=found["digest"], range_bytes=1,
                                   total_words=1, start_alpha=0.025, end_alpha=0.0001, files=found["files"])
    size = found["size"]
    for cuts in ([0, size], list(range(0, size, 13)) + [size], [0] + sorted(rng.sample(range(1, size), 30)) + [size]):
        with open_reader(spec, None) as reader:
            got = count_ranges(reader, cuts, rng)
        assert got == expected and list(got[0]) == list(expected[0])


@pytest.mark.unit
def test_lee_corpus_counts_match_gensim():
    path = datapath("lee_background.cor")
    expected = gensim_scan(LineSentence(path))
    with RangeReader(path) as reader:
        size = reader.file.seek(0, 2)
        got = count_ranges(reader, [0, size // 3, size // 2, size], random.Random(5))
    assert got == expected and list(got[0]) == list(expected[0])
    assert expected[1] == 59890 and expected[2] == 300  # (the corpus gensim's tests know)


@pytest.mark.parametrize("data", [b"\xff", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xe6\x97",
                                  b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\x80", b"\xc3\xa9", b"\xf0\x9f\x98\x80",
                                  b"\xed\x9f\xbf", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf"])
@pytest.mark.unit
def test_utf8_is_refused_exactly_where_python_refuses_it(tmp_path, data):
    path = tmp_path / "text.txt"
    path.write_bytes(b"fine words\nok " + data + b" more\nlast\n")
    try:
        (b"ok " + data).decode("utf8")
    except UnicodeDecodeError:
        with RangeReader(str(path)) as reader, pytest.raises(ValueError, match=f"{path}: the line at byte 11 is not "
                                                                              f"valid UTF-8 \\(byte 14"):
            reader.count(0, path.stat().st_size, WordCounts())
        return
    with RangeReader(str(path)) as reader:
        got = reader.count(0, path.stat().st_size, table := WordCounts())
    assert as_dict(table) == gensim_scan(LineSentence(str(path)))[0] and got == (6, 3)


@pytest.mark.unit
def test_merging_refuses_malformed_arrays():
    table = WordCounts()
    table.count_lines(b"a b a\n", 0, 6)
    words, offsets, counts, firsts = table.arrays()
    assert as_dict(table) == {"a": 2, "b": 1} and firsts.tolist() == [0, 2]
    other = WordCounts()
    other.add(words, offsets, counts, firsts + 100)
    other.add(words, offsets, counts, firsts)
    assert as_dict(other) == {"a": 4, "b": 2} and other.arrays()[3].tolist() == [0, 2]
    for bad in ((words, offsets[:-1], counts, firsts), (words, offsets, counts * 0, firsts),
                (words, offsets, counts, firsts - 5), (words, offsets[::-1].copy(), counts, firsts)):
        with pytest.raises(ValueError, match="add: "):
            other.add(*bad)
    with pytest.raises(ValueError, match="do not fit a buffer of 3 bytes"):
        table.count_lines(b"a b", 4, 3)
    assert len(WordCounts()) == 0 and [len(a) for a in WordCounts().arrays()] == [0, 1, 0, 0]


@pytest.mark.unit
def test_many_distinct_words_grow_the_table():
    words = [f"w{i}" for i in range(200_000)]
    text = (" ".join(words) + "\n" + " ".join(reversed(words[:1000])) + "\n").encode()
    table = WordCounts()
    assert table.count_lines(text, 0, len(text)) == (201_000, 21)  # (LineSentence cuts at 10,000 tokens)
    got = as_dict(table)
    assert list(got) == words and got["w0"] == 2 and got["w999"] == 2 and got["w1000"] == 1
    assert np.sum(table.arrays()[2]) == 201_000
