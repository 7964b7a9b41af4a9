"""``corpus_file`` mode: byte ranges read by the workers, every line trained exactly once per epoch.

A ``LineSentence`` of a plain file given to ``train()`` goes the same way (the workers read the file,
not the client), unless a worker cannot see it, and then the client streams it.

The reader is checked against gensim's ``LineSentence`` (which builds the vocabulary) under every
cut of awkward files; the cluster is checked end to end with ranges cut mid-line, with a worker
killed mid-epoch, and with a worker that sees no file, or another file, at the client's path
(a mount namespace of its own: the same path, a different filesystem view, as on another host).
"""
import dataclasses
import logging
import os
import random
import re
import shutil
import signal
import sys
import threading
import time

import gensim.models
import numpy as np
import pytest
from gensim.models.word2vec import LineSentence, PathLineSentences
from gensim.test.utils import datapath

from gensim_distw2v import LocalCluster, Word2Vec
from gensim_distw2v.io import transport
from gensim_distw2v.protocol import errors
from gensim_distw2v._lines import encode_lines
from gensim_distw2v.client.training import find_dispatcher
from gensim_distw2v.client.readable import readable_file
from gensim_distw2v import protocol
from gensim_distw2v.io.corpusfile import (RangeReader, check_file, check_files, fingerprint, fingerprint_files,
                                          open_reader, ranges, vocab_arrays, vocab_lookup)

WORDS = ["a", "bb", "ccc", "é", "日本語", "naïve", "Ωmega", "ŀl", "x\u2010y", "\u0100", "rare"]


def encoded(path, keys):
    """What LineSentence gives, as vocabulary indices (unknown words dropped)."""
    index = {k: i for i, k in enumerate(keys)}
    return [[index[t] for t in s if t in index] for s in LineSentence(path)]


def read_all(path, vocab, cuts):
    """Read a file as the ranges between ``cuts``; sentences, raw words and examples."""
    sentences, raw, examples = [], 0, 0
    with RangeReader(path, vocab) as reader:
        for lo, hi in zip(cuts, cuts[1:]):
            indices, offsets, jobs, words, pieces = reader.read(lo, hi)
            assert len(offsets) == pieces + 1 and jobs[0] == 0 and jobs[-1] == pieces
            assert all(offsets[b] - offsets[a] <= 10_000 for a, b in zip(jobs[:-1], jobs[1:]))
            sentences += [indices[offsets[s]:offsets[s + 1]].tolist() for s in range(pieces)]
            raw += words
            examples += pieces
    return sentences, raw, examples


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.unit
def test_every_line_read_exactly_once_under_any_cuts(tmp_path, seed, awkward_text):
    rng = random.Random(seed)
    path = str(tmp_path / "awkward.txt")
    with open(path, "w", encoding="utf8", newline="") as fout:
        fout.write(awkward_text(rng))
    expected_tokens = list(LineSentence(path))
    keys = sorted({t for s in expected_tokens for t in s} - {"rare"})  # "rare" is out of the vocabulary
    vocab = vocab_lookup(*vocab_arrays(keys))
    expected = encoded(path, keys)
    size = os.path.getsize(path)
    cut_sets = [list(range(0, size, step)) + [size] for step in (1, 3, 64, 4096, size)]
    cut_sets += [[0] + sorted(rng.sample(range(1, size), 40)) + [size] for _ in range(5)]
    for cuts in cut_sets:
        sentences, raw, examples = read_all(path, vocab, cuts)
        assert sentences == expected, f"cuts every {cuts[1] - cuts[0]} bytes"
        assert raw == sum(len(s) for s in expected_tokens)
        assert examples == len(expected_tokens)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.unit
def test_files_back_to_back_read_as_path_line_sentences_reads_them(tmp_path, seed, awkward_text):
    """A folder's files (PathLineSentences) as one run of bytes: every line once under any cuts, each
    file's last line ended by its end (no final newline, or an empty file, joins nothing)."""
    rng = random.Random(seed)
    folder = tmp_path / "parts"
    folder.mkdir()
    texts = [awkward_text(rng, lines=rng.randint(0, 40)) for _ in range(5)] + ["", "a bb", "\n"]
    rng.shuffle(texts)
    for i, text in enumerate(texts):
        (folder / f"{i:02d}.txt").write_text(text, encoding="utf8", newline="")
    corpus = PathLineSentences(str(folder))
    expected_tokens = list(corpus)
    keys = sorted({t for s in expected_tokens for t in s} - {"rare"})
    vocab = vocab_lookup(*vocab_arrays(keys))
    index = {k: i for i, k in enumerate(keys)}
    expected = [[index[t] for t in s if t in index] for s in expected_tokens]
    found = fingerprint_files(corpus.input_files)
    spec = protocol.CorpusFileSpec(path=str(folder), size=found["size"], digest=found["digest"], range_bytes=1,
                                   total_words=1, start_alpha=0.025, end_alpha=0.0001, files=found["files"])
    spec.check()
    assert check_files(spec.parts()) is None
    size = found["size"]
    cut_sets = [list(range(0, size, step)) + [size] for step in (1, 7, 4096, size)]
    cut_sets += [[0] + sorted(rng.sample(range(1, size), min(size - 1, 30))) + [size] for _ in range(3)]
    for cuts in cut_sets:
        sentences, raw, examples = [], 0, 0
        with open_reader(spec, vocab) as reader:
            for lo, hi in zip(cuts, cuts[1:]):
                indices, offsets, jobs, words, pieces = reader.read(lo, hi)
                assert len(offsets) == pieces + 1 and jobs[0] == 0 and jobs[-1] == pieces
                assert all(b > a for a, b in zip(jobs[:-1], jobs[1:])) or pieces == 0, "no empty job"
                sentences += [indices[offsets[i]:offsets[i + 1]].tolist() for i in range(pieces)]
                raw += words
                examples += pieces
        assert sentences == expected, f"cuts every {cuts[1] - cuts[0]} bytes"
        assert raw == sum(len(t) for t in expected_tokens) and examples == len(expected_tokens)
    (folder / "03.txt").write_text("changed", encoding="utf8")
    assert "03.txt" in check_files(spec.parts())
    bad = dataclasses.replace(spec, size=size + 1)
    with pytest.raises(ValueError, match="do not add up"):
        bad.check()


@pytest.mark.unit
def test_reader_edge_files(tmp_path):
    vocab = vocab_lookup(*vocab_arrays(["a", "b"]))
    cases = {"empty": b"", "newlines": b"\n\n\n", "one": b"a", "crlf": b"a b\r\nb\r\n", "long line": b"a " * 600_000}
    for name, data in cases.items():
        path = tmp_path / name.replace(" ", "_")
        path.write_bytes(data)
        expected = encoded(str(path), ["a", "b"])
        for step in (1, 5, 1 << 20):
            cuts = list(range(0, len(data), step)) + [len(data)]
            sentences, raw, _ = read_all(str(path), vocab, cuts if len(data) else [])
            assert sentences == expected, name
            assert raw == sum(len(s) for s in LineSentence(str(path)))
    with pytest.raises(ValueError, match="do not fit a buffer of 3 bytes"):
        encode_lines(b"a b", 4, 3, vocab)
    with pytest.raises(ValueError, match="vocab_offsets must run"):
        vocab_lookup(np.frombuffer(b"ab", np.uint8), np.array([0, 3], np.int64))


@pytest.mark.unit
def test_vocab_table_finds_every_word_and_nothing_else():
    rng = random.Random(7)
    alphabet = "abcdefghijéß中Ж"
    keys = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(20_000)})
    table = vocab_lookup(*vocab_arrays(keys))
    assert len(table) == len(keys)
    assert all(table.get(k.encode("utf8")) == i for i, k in enumerate(keys))
    assert table.get(b"") is None and table.get(b"zz") is None and table.get(keys[0].encode("utf8") + b"k") is None
    assert table.get("é".encode("latin-1")) is None  # other bytes, not the UTF-8 word
    empty = vocab_lookup(*vocab_arrays([]))
    assert len(empty) == 0 and empty.get(b"a") is None
    twice = vocab_lookup(*vocab_arrays(["a", "b", "a"]))
    assert len(twice) == 2 and twice.get(b"a") == 2  # distinct words (the worker checks the count); last index
    with pytest.raises(RuntimeError, match="built once"):
        twice.__init__(*vocab_arrays(["c"]))


@pytest.mark.unit
def test_only_regular_files_are_read(tmp_path):
    """A FIFO at the path would block the reader forever: refused by its kind, at once."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        fingerprint(str(fifo))
    assert check_file(str(fifo), {"size": 0, "digest": ""}) == f"cannot read {fifo}: not a regular file"
    assert check_file(str(tmp_path), {"size": 0, "digest": ""}) == f"{tmp_path} is a directory"


@pytest.mark.unit
def test_file_fingerprint_tells_files_apart(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"x" * 300_000)
    mine = fingerprint(str(path))
    assert check_file(str(path), mine) is None
    assert check_file(str(tmp_path / "nope.txt"), mine) == f"no file at {tmp_path / 'nope.txt'}"
    assert "is a directory" in check_file(str(tmp_path), mine)
    path.write_bytes(b"x" * 299_999)
    assert "has 299999 bytes here, the client's has 300000" in check_file(str(path), mine)
    path.write_bytes(b"x" * 150_000 + b"y" + b"x" * 149_999)  # one byte differs, inside a sampled block
    assert "other content" in check_file(str(path), mine)
    assert ranges(10, 3) == 4 and ranges(0, 3) == 0 and ranges(9, 3) == 3


@pytest.mark.unit
def test_which_iterables_the_workers_read(tmp_path):
    plain, packed, other = tmp_path / "a.txt", tmp_path / "b.txt.gz", tmp_path / "dir"
    plain.write_text("a b\nc\n")
    packed.write_bytes(b"")
    other.mkdir()
    (other / "x.txt").write_text("a\n")
    counts = dict(corpus_count=2, corpus_total_words=3)
    found, why = readable_file(LineSentence(str(plain)), total_examples=2, **counts)
    assert why is None and found.path == str(plain) and found.total_words == 3 and found.kind == "LineSentence"
    found, why = readable_file(PathLineSentences(str(other)), total_words=9, **counts)  # one file: read
    assert why is None and found.path == str(other / "x.txt") and found.total_words == 9
    (other / "y.txt").write_text("b\n")
    found, why = readable_file(PathLineSentences(str(other)), total_words=9, **counts)  # two: read back to back
    assert why is None and found.files == (str(other / "x.txt"), str(other / "y.txt")) and found.path == str(other)
    assert found.corpus_file == found.files
    (other / "z.txt.gz").write_bytes(b"")
    refused = {
        "z.txt.gz is compressed": (PathLineSentences(str(other)), dict(total_words=9)),
        "open file object": (LineSentence(open(plain, "rb")), dict(total_words=9)),
        "limit=1": (LineSentence(str(plain), limit=1), dict(total_words=9)),
        "max_sentence_length=5": (LineSentence(str(plain), max_sentence_length=5), dict(total_words=9)),
        "is compressed": (LineSentence(str(packed)), dict(total_words=9)),
        "not a regular file": (LineSentence(str(tmp_path / "gone.txt")), dict(total_words=9)),
        "words per epoch are unknown": (LineSentence(str(plain)), dict(total_examples=5)),  # not build_vocab's corpus
    }
    for reason, (corpus, given) in refused.items():
        found, why = readable_file(corpus, **given, **counts)
        assert found is None and reason in why, (reason, why)
    refused["open file object"][0].source.close()
    assert readable_file([["a", "b"]], total_words=2, **counts) == (None, None)  # any other iterable: no word

    class Mine(LineSentence):  # a subclass may read otherwise: streamed
        pass
    assert readable_file(Mine(str(plain)), total_words=3, **counts) == (None, None)


# ---------------------------------------------------------------------------------------------- cluster
PARAMS = dict(vector_size=16, min_count=1, seed=7, workers=1, sg=1, negative=3, epochs=2)


@pytest.fixture(scope="module")
def counted_file(tmp_path_factory):
    """Lines of 3**i tokens (i = 0..9; the last is cut into two sentences), mixed with empty lines, non-ASCII
    tokens and a final line without a newline: a line trained twice or skipped shows in the word count."""
    rng = random.Random(11)
    lines = []
    for i in rng.sample(range(10), 10):
        lines.append(" ".join(rng.choice(WORDS[:-1]) + str(j % 50) for j in range(3 ** i)))
        lines.append(rng.choice(["", "\u3000", " "]))
    path = tmp_path_factory.mktemp("cf") / "counted.txt"
    path.write_text("\n".join(lines), encoding="utf8")
    return str(path)


@pytest.fixture(scope="module")
def two_workers():
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster:
        yield cluster


@pytest.mark.cluster
def test_ranges_cut_mid_line_train_every_line_once(two_workers, counted_file, caplog):
    total = (3 ** 10 - 1) // 2
    # batch_words=29: ranges of about 29 words (~180 bytes) cut every line of more than one range
    with caplog.at_level(logging.INFO, logger="gensim_distw2v.client"):
        model = Word2Vec(corpus_file=counted_file, distributed=True, ns_conf=two_workers.ns_conf, batch_words=29,
                         **PARAMS)
    assert model.corpus_total_words == total and model.corpus_count == 11  # 10 lines, one cut in two
    stats = model.cluster_stats
    assert stats["raw_words"] == 2 * total
    assert all(w["words"] > 0 for w in stats["workers"].values()), "both workers read ranges"
    assert not [r for r in caplog.records if "did not equal expected count" in r.getMessage()]
    epochs = [r.getMessage() for r in caplog.records if re.match(r"EPOCH \d: training on", r.getMessage())]
    assert epochs == [m for m in epochs if f"on {total} raw words" in m] and len(epochs) == 2
    assert any("ranges of" in r.getMessage() and "the same on all 2 workers" in r.getMessage() for r in caplog.records)
    assert np.isfinite(model.wv.vectors).all()
    # train() as in gensim: corpus_file and total_words; effective and raw words back
    effective, raw = model.train(corpus_file=counted_file, total_words=model.corpus_total_words, epochs=1)
    assert raw == total and 0 < effective <= total
    with pytest.raises(ValueError, match="total_words must be provided alongside corpus_file"):
        model.train(corpus_file=counted_file, total_examples=model.corpus_count, epochs=1)


@pytest.mark.cluster
def test_line_sentence_of_a_file_is_read_by_the_workers(two_workers, counted_file, caplog):
    """gensim's usual call, train(LineSentence(path), total_examples=...): the workers read the file in
    ranges, every line once, the client puts no job; workers_read=False streams it through the client."""
    total = (3 ** 10 - 1) // 2
    model = Word2Vec(distributed=True, ns_conf=two_workers.ns_conf, batch_words=29, **PARAMS)
    model.build_vocab(LineSentence(counted_file))
    for workers_read in (True, False):
        model.workers_read = workers_read
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gensim_distw2v.client"):
            effective, raw = model.train(LineSentence(counted_file), total_examples=model.corpus_count, epochs=2)
        assert raw == 2 * total and 0 < effective <= raw
        messages = [r.getMessage() for r in caplog.records]
        read = [m for m in messages if "the workers read the LineSentence's file" in m]
        checked = [m for m in messages if "the same on all 2 workers" in m]
        assert (len(read), len(checked)) == ((1, 1) if workers_read else (0, 0)), messages
        assert not [m for m in messages if "did not equal expected count" in m]
        stats = model.cluster_stats
        assert all(w["words"] > 0 for w in stats["workers"].values()), "both workers trained"
    assert np.isfinite(model.wv.vectors).all()


@pytest.mark.cluster
def test_gensims_corpus_file_rate_runs_each_epoch_one_wth_of_the_way(two_workers, counted_file):
    """corpus_file_rate='gensim': the cluster's two trainer threads each take an epoch's rate half the
    way, as gensim's corpus_file mode with workers=2 does; the default, and a LineSentence the workers
    read, decay linearly to min_alpha."""
    model = Word2Vec(distributed=True, ns_conf=two_workers.ns_conf, batch_words=29, corpus_file_rate="gensim",
                     **PARAMS)
    model.build_vocab(corpus_file=counted_file)
    total, start, end = model.corpus_total_words, model.alpha, model.min_alpha
    model.train(corpus_file=counted_file, total_words=total, epochs=2)
    assert model.cluster_stats["rate_threads"] == 2 and model.cluster_stats["raw_words"] == 2 * total
    assert model.min_alpha_yet_reached == pytest.approx(start - (start - end) * 1.5 / 2)
    model.train(LineSentence(counted_file), total_examples=model.corpus_count, epochs=2)
    assert model.cluster_stats["rate_threads"] == 1 and model.min_alpha_yet_reached == pytest.approx(end)
    model.corpus_file_rate = "linear"
    model.train(corpus_file=counted_file, total_words=total, epochs=2)
    assert model.cluster_stats["rate_threads"] == 1 and model.min_alpha_yet_reached == pytest.approx(end)


@pytest.mark.cluster
def test_path_line_sentences_of_several_files_are_read_by_the_workers(two_workers, counted_file, tmp_path, caplog):
    """A folder of files (PathLineSentences): read back to back in its order, ranges spanning files, every
    line once; the model's vocabulary and counts from gensim's build_vocab over the same iterable."""
    lines = open(counted_file, encoding="utf8").read().split("\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    for i, (a, b) in enumerate([(0, 5), (5, 6), (6, len(lines))]):  # the last file ends without a newline
        (folder / f"part{i}.txt").write_text("\n".join(lines[a:b]) + ("\n" if i < 2 else ""), encoding="utf8")
    total = (3 ** 10 - 1) // 2
    model = Word2Vec(distributed=True, ns_conf=two_workers.ns_conf, batch_words=29, **PARAMS)
    model.build_vocab(PathLineSentences(str(folder)))
    assert model.corpus_total_words == total
    with caplog.at_level(logging.INFO, logger="gensim_distw2v.client"):
        effective, raw = model.train(PathLineSentences(str(folder)), total_examples=model.corpus_count, epochs=2)
    assert raw == 2 * total and 0 < effective <= raw
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"the workers read the PathLineSentences's 3 files in {folder}" in m for m in messages), messages
    assert any("the same on all 2 workers" in m for m in messages)
    assert not [m for m in messages if "did not equal expected count" in m]


@pytest.mark.cluster
def test_log_says_when_the_streaming_client_is_the_cap(two_workers, lee_corpus, caplog):
    """An iterable slower than the cluster (here 10 ms a sentence): the client never waits for room in the
    dispatcher's queue, and its log says it capped the speed, and what lets the workers read instead."""
    class Slow:
        def __iter__(self):
            for sentence in lee_corpus[:250]:
                time.sleep(0.01)
                yield sentence

    model = Word2Vec(distributed=True, ns_conf=two_workers.ns_conf, **{**PARAMS, "epochs": 1})
    model.build_vocab(lee_corpus[:250])
    with caplog.at_level(logging.INFO, logger="gensim_distw2v.client"):
        model.train(Slow(), total_examples=250, epochs=1)
    capped = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "capped the speed" in
              r.getMessage()]
    assert len(capped) == 1 and re.search(r"EPOCH 0: the client was busy reading and encoding the corpus "
                                          r"(9\d|100)% of the", capped[0]), capped
    assert "LineSentence of a file every worker sees" in capped[0]


@pytest.mark.cluster
def test_corpus_file_model_learns_and_loads_in_gensim(two_workers, lee_corpus, tmp_path):
    params = dict(vector_size=32, min_count=2, seed=3, workers=1, sg=1, negative=5, epochs=5)
    path = datapath("lee_background.cor")
    ours = Word2Vec(corpus_file=path, distributed=True, ns_conf=two_workers.ns_conf, **params)
    reference = gensim.models.Word2Vec(corpus_file=path, **params)
    untrained = gensim.models.Word2Vec(**params)
    untrained.build_vocab(corpus_file=path)
    assert ours.wv.index_to_key == reference.wv.index_to_key  # gensim's own vocabulary building

    def quality(model):  # mean similarity of adjacent words: the corpus's structure, learned or not
        pairs = [(a, b) for s in lee_corpus[:100] for a, b in zip(s, s[1:])
                 if a in model.wv.key_to_index and b in model.wv.key_to_index and a != b]
        return float(np.mean([model.wv.similarity(a, b) for a, b in pairs]))

    assert quality(ours) > quality(untrained) + 0.2
    assert quality(ours) > quality(reference) - 0.1
    ours.save(str(tmp_path / "cf.model"))
    loaded = gensim.models.Word2Vec.load(str(tmp_path / "cf.model"))
    assert type(loaded) is gensim.models.Word2Vec and np.array_equal(loaded.wv.vectors, ours.wv.vectors)


@pytest.mark.cluster
def test_worker_killed_mid_epoch_its_ranges_are_read_again(counted_file, freeze_busy_worker):
    total = (3 ** 10 - 1) // 2
    with LocalCluster(n_workers=3, worker_timeout=3.0) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, batch_words=29, **{**PARAMS, "epochs": 8})
        model.build_vocab(corpus_file=counted_file)
        probe = find_dispatcher(cluster.ns_conf)
        result = {}

        def run():
            try:
                result["counts"] = model.train(corpus_file=counted_file, total_words=total, epochs=8)
            except BaseException as err:  # noqa: B902 - handed to the test thread
                result["error"] = err

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        victim, proc = None, None
        while victim is None and thread.is_alive():
            victim, proc = freeze_busy_worker(cluster, probe, 1) or (None, None)
            time.sleep(0.01)
        assert victim is not None, "rank 1 never held ranges"
        os.kill(proc.pid, signal.SIGKILL)
        line = cluster.processes["dispatcher"].wait_for(rf"worker {victim} lost .*; (\d+) unmerged jobs go back",
                                                        timeout=15)
        thread.join(timeout=120)
        assert not thread.is_alive() and "error" not in result, result.get("error")
        assert int(line.group(1)) >= 1
        assert result["counts"][1] == 8 * total  # its ranges were read again by the others, none twice
        transport.release(probe)


NEEDS_UNSHARE = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a worker with another view of the filesystem needs Linux, root and unshare")  # (root: .ci/run's)


def lee_in_shared(tmp_path):
    """``(folder, path)``: lee's corpus copied into a folder a namespaced worker can be made blind to."""
    shared = tmp_path / "shared"
    shared.mkdir()
    path = shared / "corpus.txt"
    shutil.copy(datapath("lee_background.cor"), path)
    return shared, path


@NEEDS_UNSHARE
@pytest.mark.parametrize("view", ["missing", "other"])
@pytest.mark.system
def test_worker_that_does_not_see_the_file_is_refused(tmp_path, view, lee_corpus, start_namespaced_worker):
    shared, path = lee_in_shared(tmp_path)
    other = tmp_path / "other.txt"  # same size, one word changed
    data = path.read_bytes()
    other.write_bytes(data[:1000] + data[1000:1005].upper() + data[1005:])
    setup = f"mount -t tmpfs none {shared}" if view == "missing" else f"mount --bind {other} {path}"
    with LocalCluster(n_workers=1) as cluster:
        blind = start_namespaced_worker(cluster, "worker-blind", setup)
        cluster.processes["dispatcher"].wait_for(rf"worker {re.escape(blind)} registered", timeout=60)
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
        model.build_vocab(corpus_file=str(path))
        before = model.wv.vectors.copy()
        with pytest.raises(ValueError) as err:
            model.train(corpus_file=str(path), total_words=model.corpus_total_words, epochs=1)
        message = str(err.value)
        assert f"corpus_file {path}: 1 of 2 workers do not see the file" in message
        reason = (f"no file at {path}" if view == "missing"
                  else f"{path} has the client's size (360082 bytes) but other content")
        assert f"worker {blind}: {reason}" in message and "must read the same file at the same path" in message
        assert (model.wv.vectors == before).all()  # nothing trained
        cluster.processes["worker-blind"].kill()
        cluster.processes["dispatcher"].wait_for(rf"worker {re.escape(blind)} lost", timeout=30)
        # the cluster keeps serving: with the blind worker gone, the same call trains
        _effective, raw = model.train(corpus_file=str(path), total_words=model.corpus_total_words, epochs=1)
        assert raw == sum(len(s) for s in lee_corpus)


@NEEDS_UNSHARE
@pytest.mark.system
def test_line_sentence_a_worker_does_not_see_is_streamed(tmp_path, lee_corpus, caplog, start_namespaced_worker):
    shared, path = lee_in_shared(tmp_path)
    with LocalCluster(n_workers=1) as cluster:
        blind = start_namespaced_worker(cluster, "worker-blind", f"mount -t tmpfs none {shared}")
        cluster.processes["dispatcher"].wait_for(rf"worker {re.escape(blind)} registered", timeout=60)
        model = Word2Vec(LineSentence(str(path)), distributed=True, ns_conf=cluster.ns_conf, **PARAMS)  # no error
        with caplog.at_level(logging.INFO, logger="gensim_distw2v.client"):
            _effective, raw = model.train(LineSentence(str(path)), total_examples=model.corpus_count, epochs=1)
        assert raw == sum(len(s) for s in lee_corpus)
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(f"worker {blind}: no file at {path}" in m and "the client streams the LineSentence itself" in m
                   for m in warned), warned
        assert all(w["words"] > 0 for w in model.cluster_stats["workers"].values()), "the blind worker trained too"


@pytest.mark.cluster
def test_session_that_fails_on_every_worker_ends_with_their_reasons(two_workers, counted_file):
    """A worker on which a session fails tells the dispatcher: its jobs go back to the queue, and when no
    worker is left the client raises with every worker's reason instead of waiting; the workers serve on."""
    model = Word2Vec(distributed=True, ns_conf=two_workers.ns_conf, **PARAMS)
    model.build_vocab(corpus_file=counted_file)
    keys = list(model.wv.index_to_key)
    model.wv.index_to_key[1] = keys[0]  # one word twice: every worker refuses this vocabulary at join
    before = model.wv.vectors.copy()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="training failed on every worker of the session") as err:
        model.train(corpus_file=counted_file, total_words=model.corpus_total_words, epochs=1)
    assert time.monotonic() - started < 20
    assert str(err.value).count("distinct words, not") == 2 and (model.wv.vectors == before).all()
    model.wv.index_to_key[1] = keys[1]
    assert model.train(corpus_file=counted_file, total_words=model.corpus_total_words, epochs=1)[1] == \
        model.corpus_total_words


@pytest.mark.cluster
def test_file_session_refuses_misuse(two_workers, counted_file):
    dispatcher = find_dispatcher(two_workers.ns_conf)
    model = Word2Vec(distributed=True, ns_conf=two_workers.ns_conf, **PARAMS)
    model.build_vocab(corpus_file=counted_file)
    from gensim_distw2v.client.training import DistributedTraining

    session = DistributedTraining(model, two_workers.ns_conf)
    record, arrays = session.setup.config(2, False, 1, counted_file, model.corpus_total_words)
    sid, links, _resumed = session.setup.open(dispatcher, record, arrays)
    config = record.to_wire()
    try:
        with pytest.raises(ValueError, match="trains from a corpus file; open its epochs with open_file_epoch"):
            dispatcher.call("put_jobs", session=sid, jobs=[], token=session.run.token)
        with pytest.raises(errors.Forbidden, match="open_file_epoch: not this session's owner secret"):
            dispatcher.call("open_file_epoch", session=sid, epoch=0)  # (a member knows the session's id)
        assert dispatcher.call("open_file_epoch", session=sid, epoch=0, token=session.run.token) == -(-config["corpus_file"]["size"]
                                                                            // config["corpus_file"]["range_bytes"])
        with pytest.raises(ValueError, match="epoch 0 was opened before"):
            dispatcher.call("open_file_epoch", session=sid, epoch=0, token=session.run.token)
        with pytest.raises(ValueError, match="is not one of the session's 1"):
            dispatcher.call("open_file_epoch", session=sid, epoch=1, token=session.run.token)
        with pytest.raises(errors.BadRequest, match="malformed file_check: field 'problem' must be str, got int"):
            dispatcher.send("file_check", {"name": "gensim_distw2v.worker.x", "session": sid, "problem": 5})
    finally:
        links.close(sid)
        dispatcher.call("close", session=sid, token=session.run.token)
        transport.release(dispatcher)
    bad = dict(config, corpus_file=dict(config["corpus_file"], range_bytes=0))
    with pytest.raises(ValueError, match="range_bytes and total_words >= 1"):
        find_dispatcher(two_workers.ns_conf).send("open_session", bad)
    for damp_rows in ({"syn0": 5}, {"syn0": 5, "syn1neg": -1}, {"syn0": 5, "syn1neg": "5"}, [5, 5]):
        with pytest.raises(ValueError, match="damp_rows'? must be"):
            find_dispatcher(two_workers.ns_conf).send("open_session", dict(config, damp_rows=damp_rows))
    for key, value, message in (("hot_rows", -1, "hot_rows must be in"), ("hot_rows", 10 ** 9, "hot_rows must be in"),
                                ("hot_rows", "5", "hot_rows")):
        with pytest.raises(ValueError, match=message):
            find_dispatcher(two_workers.ns_conf).send("open_session", dict(config, **{key: value}))
    # the settings travel whole and are validated as where they were built
    for key, value, message in (("bytes_per_word", 100.0, "malformed session settings"),
                                ("cold_every", 0, "cold_every must be an int in"),
                                ("merge_dtype", "int4", "merge_dtype must be one of"),
                                ("merge_dtype", None, "merge_dtype"), ("sync_words", None, "sync_words must be set"),
                                ("hold_back", "0.1", "hold_back must be in")):
        with pytest.raises(ValueError, match=message):
            find_dispatcher(two_workers.ns_conf).send("open_session", dict(config, settings={**config["settings"], key: value}))
    for settings in ({k: v for k, v in config["settings"].items() if k != "merge"}, {**config["settings"], "x": 1}, []):
        with pytest.raises(ValueError, match="malformed session (settings|config: field 'settings' must be dict)"):
            find_dispatcher(two_workers.ns_conf).send("open_session", dict(config, settings=settings))
    # and it still trains
    assert model.train(corpus_file=counted_file, total_words=model.corpus_total_words, epochs=1)[1] == \
        model.corpus_total_words
