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

from .benchmark_modules import load


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
    steps = (1, 7, 4096, size) if seed == 1 else (7, 4096, size)  # cuts at every byte: one text (the slowest)
    cut_sets = [list(range(0, size, step)) + [size] for step in steps]
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


def _siphash_reference(data, k0, k1, c_rounds, d_rounds):
    """SipHash-c-d as the paper writes it (Aumasson and Bernstein, 2012), in Python."""
    mask = 0xFFFFFFFFFFFFFFFF

    def rotl(x, b):
        return ((x << b) | (x >> (64 - b))) & mask

    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & mask
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & mask
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & mask
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & mask
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)
    whole = len(data) - len(data) % 8
    blocks = [int.from_bytes(data[i:i + 8], "little") for i in range(0, whole, 8)]
    blocks.append(int.from_bytes(data[whole:], "little") | (len(data) & 0xFF) << 56)
    for m in blocks:
        v[3] ^= m
        rounds(c_rounds)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(d_rounds)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


@pytest.mark.unit
def test_the_tables_keyed_hash_is_siphash():
    from gensim_distw2v._counts import siphash

    key0, key1 = int.from_bytes(bytes(range(8)), "little"), int.from_bytes(bytes(range(8, 16)), "little")
    # the paper's test vectors (SipHash-2-4, key 00..0f, messages 00 01 02 ...)
    assert _siphash_reference(b"", key0, key1, 2, 4) == 0x726FDB47DD0E0E31
    assert _siphash_reference(bytes(range(15)), key0, key1, 2, 4) == 0xA129CA6149BE45E5
    rng = random.Random(5)
    for n in list(range(0, 34)) + [100, 1000]:
        data = bytes(rng.randrange(256) for _ in range(n))
        k0, k1 = rng.getrandbits(64), rng.getrandbits(64)
        assert siphash(data, k0, k1, 2, 4) == _siphash_reference(data, k0, k1, 2, 4)
        assert siphash(data, k0, k1) == _siphash_reference(data, k0, k1, 1, 3)


def _flood():
    return load("hashflood")


@pytest.mark.unit
def test_words_written_to_collide_in_fnv_share_no_chain():
    from gensim_distw2v._lines import VocabTable, encode_lines

    flood = _flood()
    words = flood.colliding_words(13)
    assert len(set(words)) == 2 ** 13 and len({flood.fnv1a(w) & 0xFFFFFFFF for w in words}) == 1  # the attack is real
    text = b"\n".join(words + words[:100]) + b"\n"
    table = WordCounts()
    assert table.count_lines(text, 0, len(text)) == (2 ** 13 + 100, 2 ** 13 + 100)
    got = as_dict(table)
    assert len(got) == 2 ** 13 and got[words[0].decode()] == 2 and got[words[-1].decode()] == 1
    # one chain of MAX_CHAIN slots, then the keyed hash: about one slot past the first a word, not thousands
    assert table.keyed and table.probes / len(words) < 3
    data = np.frombuffer(b"".join(words), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in words])]).astype(np.int64)
    vocab = VocabTable(data, offsets)
    assert len(vocab) == 2 ** 13 and vocab.keyed and vocab.probes / len(words) < 3
    indices = encode_lines(text, 0, len(text), vocab)[0]
    assert indices[:2 ** 13].tolist() == list(range(2 ** 13))


@pytest.mark.unit
def test_many_short_chains_of_colliding_words_cost_a_rebuild_not_a_chain_a_token():
    """Groups of words written to collide, each group shorter than MAX_CHAIN and its own chain (a family of
    32 words sharing their low 32 bits of FNV-1a, each group with its own suffix), among plain words and
    repeated: no insert looks along MAX_CHAIN slots, but every token of them along a dozen or more (the build
    before this check: 21.9 slots a token, never rebuilt). Counting rebuilds
    its table on the keyed hash once the slots looked at average more than MEAN_PROBES a word; a vocabulary
    once more than LONG_SHARE of its words sit LONG_CHAIN slots past their first."""
    from gensim_distw2v import _counts
    from gensim_distw2v._lines import VocabTable, encode_lines

    flood = _flood()
    family = flood.colliding_words(5)
    suffixes = sorted({bytes(r) for r in np.random.default_rng(4).integers(97, 123, size=(128, 3), dtype=np.uint8)})
    groups = [[w + suffix for w in family] for suffix in suffixes[:32]]
    lows = [{flood.fnv1a(w) & 0xFFFFFFFF for w in group} for group in groups]
    assert all(len(low) == 1 for low in lows) and len(set().union(*lows)) == len(groups)  # the attack is real
    colliding = [w for group in groups for w in group]
    plain = flood.random_words(4_000, len(colliding[0]))
    text = b"\n".join(plain + colliding * 32) + b"\n"
    table = WordCounts()
    assert table.count_lines(text, 0, len(text))[0] == len(plain) + 32 * len(colliding)
    assert table.keyed and table.probes <= _counts.MEAN_PROBES * table.adds + _counts.PROBE_SLACK + 200, \
        (table.probes, table.adds)
    got = as_dict(table)
    assert len(got) == len(plain) + len(colliding) and got[colliding[0].decode()] == got[colliding[-1].decode()] == 32
    words = plain + colliding
    data = np.frombuffer(b"".join(words), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(w) for w in words])]).astype(np.int64)
    vocab = VocabTable(data, offsets)
    assert vocab.keyed and len(vocab) == len(words)
    assert encode_lines(text, 0, len(text), vocab)[0][-len(colliding):].tolist() == list(
        range(len(plain), len(words)))


@pytest.mark.unit
def test_real_text_keeps_the_fast_hash():
    from gensim_distw2v._lines import VocabTable

    with open(datapath("lee_background.cor"), "rb") as fin:
        text = fin.read()
    table = WordCounts()
    table.count_lines(text, 0, len(text))
    words, offsets, _counts, _firsts = table.arrays()
    assert not table.keyed and not VocabTable(words, offsets).keyed


@pytest.mark.unit
def test_a_word_goes_to_the_same_group_in_every_process():
    flood = _flood()
    table = WordCounts()
    text = b"alpha beta gamma delta epsilon zeta eta theta iota kappa \xc3\xa9t\xc3\xa9\n"
    table.count_lines(text, 0, len(text))
    for parts in (1, 2, 3, 7):
        for group, (words, offsets, _, _) in enumerate(table.split(parts)):
            for i in range(len(offsets) - 1):  # the unkeyed hash's high half decides it, on every node alike
                assert (flood.fnv1a(bytes(words[offsets[i]:offsets[i + 1]])) >> 32) % parts == group


@pytest.mark.parametrize("word", [b"", b"a b", b"a\tb", b"\xff", b"a\xc2\xa0b", b"\xe3\x80\x80", b"\n"])
@pytest.mark.unit
def test_merging_refuses_what_linesentence_never_yields(word):
    table = WordCounts()
    words = np.frombuffer(b"ok" + word, dtype=np.uint8)
    offsets = np.array([0, 2, 2 + len(word)], dtype=np.int64)
    with pytest.raises(ValueError, match="word 1 .* is not a word as LineSentence splits text"):
        table.add(words, offsets, np.array([1, 1]), np.array([0, 5]))


@pytest.mark.unit
def test_counts_saturate_rather_than_wrap():
    table = WordCounts()
    words, offsets = np.frombuffer(b"w", dtype=np.uint8), np.array([0, 1], dtype=np.int64)
    big = np.iinfo(np.int64).max - 3
    table.add(words, offsets, np.array([big]), np.array([0]))
    table.add(words, offsets, np.array([big]), np.array([0]))
    assert table.arrays()[2].tolist() == [np.iinfo(np.int64).max]
