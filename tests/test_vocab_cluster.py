"""The vocabulary counted on the cluster (``build_vocab`` of a distributed model): the same model state as
gensim's ``build_vocab`` on the same file (words, order, counts, corpus counts, ``min_count``,
``max_final_vocab``, ``trim_rule``, ``sample``), words partitioned across shards by hash and each
range added once, a worker killed or frozen while it counts (its ranges counted by another, the
counts exact), a line that is not UTF-8 and a worker that does not see the file named.
"""
import collections
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
import types

import gensim.models
import numpy as np
import pytest
from gensim import utils
from gensim.models.word2vec import LineSentence, PathLineSentences
from gensim.test.utils import datapath

from gensim_distw2v import LocalCluster, Word2Vec, protocol
from gensim_distw2v._counts import WordCounts
from gensim_distw2v.client import vocab
from gensim_distw2v.protocol import calls, constants, errors, tables
from gensim_distw2v.shard import counts as vocab_counts
from gensim_distw2v.shard.counts import CountTables
from gensim_distw2v.shard.guards import ShardGuards
from gensim_distw2v.versions import versions

LEE = datapath("lee_background.cor")


def table_of(text):
    table = WordCounts()
    data = text.encode("utf8")
    table.count_lines(data, 0, len(data))
    return table


def as_dict(words, offsets, counts, firsts=None):
    return {bytes(words[offsets[i]:offsets[i + 1]]).decode("utf8"): int(counts[i]) for i in range(len(counts))}


# ---------------------------------------------------------------------------------------------- in-process
@pytest.mark.unit
def test_split_puts_each_word_in_the_same_part_on_every_table():
    rng = random.Random(3)
    words = [f"w{i}é" for i in range(500)] + ["日本語", "a", "bb"]
    one = table_of("\n".join(" ".join(rng.choice(words) for _ in range(30)) for _ in range(200)))
    two = table_of("\n".join(" ".join(rng.choice(words) for _ in range(30)) for _ in range(200)))
    part_of = {}
    for table in (one, two):
        whole = as_dict(*table.arrays())
        parts = table.split(3)
        seen = {}
        for index, (w, o, c, f) in enumerate(parts):
            assert len(o) == len(c) + 1 == len(f) + 1 and o[-1] == len(w)
            for word in as_dict(w, o, c):
                assert part_of.setdefault(word, index) == index, word  # the same part in both tables
            seen.update(as_dict(w, o, c))
        assert seen == whole  # the parts are the table, each word once
        assert all(len(p[2]) for p in parts), "500 words in 3 parts: none empty"
    with pytest.raises(ValueError, match="parts must be"):
        one.split(0)


def leased(secret="t0k"):
    """A shard's ``granted``: the dispatcher leases every count, with secret ``secret``."""
    return lambda count: protocol.owner_digest(secret)


def served(held):
    """``call(op, request)``: a shard's count calls on the count tables ``held``, through the shard's table, its
    guards and its handlers (as over the wire, in-process)."""
    table = calls.Table("shard", [tables.SHARD[op] for op in ("count_open", "count_add", "count_take", "count_close")])
    server = types.SimpleNamespace(counts=held)
    server.guards = lambda: ShardGuards(server).table()
    return calls.Caller(table, calls.Handlers(table, server).handle).call


def part(table, index, parts, rid, token=None, count="c1"):
    """Range ``rid``'s part ``index`` of ``parts`` of ``table``, carrying the range's token (of the count
    secret "t0k") unless ``token`` is given."""
    w, o, c, f = table.split(parts)[index]
    token = protocol.range_token("t0k", count, rid) if token is None else token
    return protocol.CountPart.from_wire(protocol.CountPart(count=count, token=token, range=rid, index=index, words=w,
                                                           offsets=o, counts=c, firsts=f).to_wire())


@pytest.mark.unit
def test_a_shard_adds_each_range_once_and_hands_its_part_out_in_order():
    shard = CountTables("shard-x", max_bytes=1 << 30, granted=leased())
    call = served(shard)
    call("count_open", protocol.CountOpen(count="c1", token="t0k", index=1, parts=2))
    first = table_of("b a c\na d\n")
    second = WordCounts()  # a range further on: its first offsets are file offsets, after the first's
    data = b"e a b\n"
    second.count_lines(data, 0, len(data), base=100)
    assert call("count_add", part(first, 1, 2, rid=0)) is True
    assert call("count_add", part(first, 1, 2, rid=0)) is False  # counted again (its worker was lost): not added twice
    assert call("count_add", part(second, 1, 2, rid=1)) is True
    with pytest.raises(errors.Forbidden):
        call("count_add", part(second, 1, 2, rid=2, token="other"))
    with pytest.raises(errors.Forbidden):  # the count's secret is not a range's token, nor one range's another's
        call("count_add", part(second, 1, 2, rid=2, token="t0k"))
    with pytest.raises(errors.Forbidden):
        call("count_add", part(second, 1, 2, rid=2, token=protocol.range_token("t0k", "c1", 3)))
    with pytest.raises(errors.BadRequest, match="holds index 1"):
        call("count_add", part(second, 0, 2, rid=2))
    expected = collections.Counter()
    for table in (first, second):
        expected.update(as_dict(*table.split(2)[1]))
    chunks = [call("count_take", protocol.CountTake(count="c1", token="t0k", lo=lo, hi=lo + 1)) for lo in range(6)]
    got = {}
    for chunk in chunks:
        got.update(as_dict(chunk.words, chunk.offsets, chunk.counts))
    assert got == dict(expected) and chunks[0].total == len(expected) and chunks[0].ranges == 2
    firsts = [int(f) for chunk in chunks for f in chunk.firsts]
    assert firsts == sorted(firsts)  # first-occurrence order
    with pytest.raises(errors.BadRequest, match="after the count was taken"):
        call("count_add", part(second, 1, 2, rid=7))
    call("count_close", protocol.CountRef(count="c1", token="t0k"))
    with pytest.raises(errors.SessionClosed):
        call("count_take", protocol.CountTake(count="c1", token="t0k", lo=0, hi=1))


@pytest.mark.unit
def test_a_shard_sends_only_the_words_of_min_count_and_tells_of_the_others():
    shard = CountTables("shard-x", max_bytes=1 << 30, granted=leased())
    shard.open(protocol.CountOpen(count="c1", token="t0k", index=0, parts=1))
    shard.add(part(table_of("naïve b a naïve\nc 日本語 a naïve 日本語 d\n"), 0, 1, rid=0))
    chunk = shard.take(protocol.CountTake(count="c1", token="t0k", lo=0, hi=10, min_count=2))
    assert as_dict(chunk.words, chunk.offsets, chunk.counts) == {"naïve": 3, "a": 2, "日本語": 2}
    assert list(chunk.firsts) == sorted(chunk.firsts) and chunk.total == 3
    assert (chunk.dropped, chunk.dropped_total) == (3, 3)  # b, c, d once each
    with pytest.raises(errors.BadRequest, match="taken with min_count 2 already"):
        shard.take(protocol.CountTake(count="c1", token="t0k", lo=0, hi=10, min_count=3))


@pytest.mark.unit
def test_a_shard_refuses_a_part_beyond_its_memory():
    shard = CountTables("shard-x", max_bytes=10_000, granted=leased())
    shard.open(protocol.CountOpen(count="c1", token="t0k", index=0, parts=1))
    big = table_of(" ".join(f"word{i}" for i in range(5000)))
    with pytest.raises(errors.Full, match="beyond its limit of 10000"):
        shard.add(part(big, 0, 1, rid=0))
    with pytest.raises(errors.SessionClosed):  # and the count is dropped
        shard.add(part(big, 0, 1, rid=1))


@pytest.mark.unit
def test_count_messages_refuse_what_does_not_fit():
    table = table_of("a b c\n")
    w, o, c, f = table.arrays()
    good = protocol.CountPart(count="c", token="t", range=0, index=0, words=w, offsets=o, counts=c, firsts=f).to_wire()
    protocol.CountPart.from_wire(dict(good))
    with pytest.raises(ValueError, match="offsets must have one more entry"):
        protocol.CountPart.from_wire(dict(good, offsets=protocol.pack_array(o[:-1])))
    with pytest.raises(ValueError, match="counts must be >= 1"):
        protocol.CountPart.from_wire(dict(good, counts=protocol.pack_array(np.zeros(3, np.int64))))
    spec = vocab.corpus_spec(LEE)
    request = protocol.CountRanges(count="c", tokens=["t"], corpus=spec, ranges=[[0, 0, spec.size]],
                                   shards=[["shard-a", "PYRO:a@h:1"]]).to_wire()
    protocol.CountRanges.from_wire(request)
    with pytest.raises(ValueError, match="0 <= lo < hi <= the corpus' size"):
        protocol.CountRanges.from_wire(dict(request, ranges=[[0, 0, spec.size + 1]]))
    with pytest.raises(ValueError, match="one token of 1 to 64 characters per range"):
        protocol.CountRanges.from_wire(dict(request, tokens=[]))


@pytest.mark.unit
def test_a_shard_never_drops_a_count_in_use_for_another(monkeypatch):
    """Issue 54, item 3: a fifth count_open from a peer with the key used to drop the oldest count, live."""
    shard = CountTables("shard-x", max_bytes=1 << 30, granted=leased())
    for i in range(4):
        shard.open(protocol.CountOpen(count=f"c{i}", token="t0k", index=0, parts=1))
    with pytest.raises(errors.Busy, match="holds 4 vocabulary counts in use"):
        shard.open(protocol.CountOpen(count="mallory", token="t0k", index=0, parts=1))
    assert shard.add(part(table_of("a b\n"), 0, 1, rid=0, count="c0")) is True  # the live count goes on
    shard.held["c1"].touched -= vocab_counts.IDLE_SECONDS + 1  # c1 idle for longer than a count may be
    shard.open(protocol.CountOpen(count="c4", token="t0k", index=0, parts=1))
    assert sorted(shard.held) == ["c0", "c2", "c3", "c4"]


@pytest.mark.unit
def test_a_shard_checks_its_budget_before_a_part_is_added():
    """Issue 54, item 2: the budget covers every count a shard holds, and a part is refused before it is
    added (not once its table has grown past the limit)."""
    text = " ".join(f"word{i}" for i in range(3000)) + "\n"
    one = part(table_of(text), 0, 1, rid=0, count="c0")
    need = vocab_counts._growth(one)
    shard = CountTables("shard-x", max_bytes=need + 20_000, granted=leased())
    shard.open(protocol.CountOpen(count="c0", token="t0k", index=0, parts=1))
    shard.open(protocol.CountOpen(count="c1", token="t0k", index=0, parts=1))
    assert shard.add(one) is True
    with pytest.raises(errors.Full, match="counts take .* bytes, and range 0's part may take"):
        shard.add(part(table_of(text), 0, 1, rid=0, count="c1"))
    assert sorted(shard.held) == ["c0"]  # the count that would not fit is dropped; the other kept


@pytest.mark.unit
def test_a_shard_opens_only_the_count_the_dispatcher_leases_for_its_holder():
    """Issue 54: counts had no owner the dispatcher vouched for, so a keyed peer could open four of its own on
    every shard first and make a client's count fail (Busy). A shard now opens the leased count only, with its
    secret, and drops a count the dispatcher no longer leases (one opened before the heartbeat was asked)."""
    lease = {"count": "c1", "owner": protocol.owner_digest("t0k")}
    shard = CountTables("shard-x", max_bytes=1 << 30,
                        granted=lambda count: lease["owner"] if count == lease["count"] else None)
    call = served(shard)
    with pytest.raises(errors.SessionClosed, match="leases no count 'mallory'.*open_count"):
        call("count_open", protocol.CountOpen(count="mallory", token="m4l", index=0, parts=1))
    with pytest.raises(errors.Forbidden, match="count_open"):  # the leased count, not its holder's secret
        call("count_open", protocol.CountOpen(count="c1", token="m4l", index=0, parts=1))
    assert not shard.held
    call("count_open", protocol.CountOpen(count="c1", token="t0k", index=0, parts=1))
    shard.keep_only("c1", time.monotonic())
    assert list(shard.held) == ["c1"]
    shard.keep_only(None, shard.held["c1"].opened - 1.0)  # a reply asked before c1 was opened: old news
    assert list(shard.held) == ["c1"]
    shard.keep_only(None, time.monotonic())  # the lease is gone: so is the count
    assert not shard.held


@pytest.mark.unit
def test_the_dispatcher_leases_one_count_at_a_time_and_tells_the_shards():
    """The dispatcher's count lease (dispatcher.counts): one count at a time, renewed and given back by its
    holder only (its secret), withdrawn after client_timeout of silence; a shard's heartbeat reply names it
    and a digest of its secret, and a shard's long poll answers when it changes."""
    from gensim_distw2v.dispatcher import Dispatcher

    dispatcher = Dispatcher(client_timeout=5.0)
    try:
        call = dispatcher.local().call
        secret = call("shard_hello", name=protocol.SHARD_PREFIX + "a", uri="PYRO:a@h:1", versions=versions())
        beat = protocol.Heartbeat(name=protocol.SHARD_PREFIX + "a", secret=secret, wait=0.0)
        assert call("shard_beat", beat).count is None
        call("open_count", protocol.CountRef(count="c1", token="t0k"))
        call("open_count", protocol.CountRef(count="c1", token="t0k"))  # the holder again: no error
        with pytest.raises(errors.Busy, match="another vocabulary count is running"):
            call("open_count", protocol.CountRef(count="c2", token="m4l"))
        with pytest.raises(errors.Forbidden):
            call("count_alive", protocol.CountRef(count="c1", token="m4l"))
        with pytest.raises(errors.Forbidden):
            call("close_count", protocol.CountRef(count="c1", token="m4l"))
        told = call("shard_beat", beat)
        assert (told.count, told.count_owner) == ("c1", protocol.owner_digest("t0k"))
        began = time.monotonic()  # what the shard knows: a long poll that waits, and one that answers at once
        assert call("shard_beat", dataclasses.replace(beat, known=None, count="c1", wait=0.5)).count == "c1"
        assert time.monotonic() - began >= 0.4
        call("count_alive", protocol.CountRef(count="c1", token="t0k"))
        with dispatcher.cluster.cond:
            dispatcher.counts.expire(time.monotonic() + 4.0)  # within client_timeout of the renewal: kept
            assert dispatcher.cluster.count is not None
            dispatcher.counts.expire(time.monotonic() + 6.0)  # silent for longer: withdrawn
            assert dispatcher.cluster.count is None
        with pytest.raises(errors.SessionClosed, match="no count 'c1' is leased"):
            call("count_alive", protocol.CountRef(count="c1", token="t0k"))
        call("open_count", protocol.CountRef(count="c2", token="t2"))
        call("close_count", protocol.CountRef(count="c2", token="t2"))
        call("close_count", protocol.CountRef(count="c2", token="t2"))  # closed already: no error
        assert call("shard_beat", beat).count is None
    finally:
        dispatcher.shutdown()


@pytest.mark.unit
def test_the_dispatcher_tells_the_workers_the_leased_count_its_corpus_and_shards():
    """Issue 54, item 7: a worker's heartbeat reply names the leased count with the corpus and the shards its
    client named (open_count), and a worker's long poll answers when the lease changes."""
    from gensim_distw2v.dispatcher import Dispatcher

    dispatcher = Dispatcher(client_timeout=5.0)
    try:
        call = dispatcher.local().call
        name = protocol.WORKER_PREFIX + "w"
        secret = call("hello", name=name, uri="PYRO:w@h:1", versions=versions(), threads=1)
        beat = protocol.Heartbeat(name=name, secret=secret, wait=0.0)
        assert call("heartbeat", beat).count is None
        shards = [[protocol.SHARD_PREFIX + "a", "PYRO:a@h:2"]]
        call("open_count", protocol.CountRef(count="c1", token="t0k", corpus="d1g", shards=shards))
        told = call("heartbeat", dataclasses.replace(beat, wait=0.5))  # news: answered at once
        assert (told.count, told.count_corpus, told.count_shards) == ("c1", "d1g", shards)
        began = time.monotonic()
        assert call("heartbeat", dataclasses.replace(beat, count="c1", wait=0.5)).count == "c1"
        assert time.monotonic() - began >= 0.4  # known already: the long poll waits
        call("close_count", protocol.CountRef(count="c1", token="t0k"))
        assert call("heartbeat", dataclasses.replace(beat, count="c1", wait=5.0)).count is None
    finally:
        dispatcher.shutdown()


@pytest.mark.unit
def test_a_worker_counts_for_the_leased_count_its_corpus_and_its_shards_only(tmp_path, monkeypatch):
    """Issue 54, item 7: any keyed caller could have a worker count any file it sees and send the words to
    shards of its choosing. A worker now counts for the count the dispatcher leases only, for the corpus and
    the shards its lease names (waiting a moment for the dispatcher's word), and says which it is not."""
    from gensim_distw2v.io.corpusfile import fingerprint
    from gensim_distw2v.worker import counting

    monkeypatch.setattr(constants, "GRANT_WAIT", 0.3)
    path = tmp_path / "corpus.txt"
    path.write_text("a b c\n")
    found = fingerprint(str(path))
    spec = protocol.CorpusFileSpec(path=str(path), size=found["size"], digest=found["digest"], range_bytes=6,
                                   total_words=3, start_alpha=0.025, end_alpha=0.0001)
    shards = [[protocol.SHARD_PREFIX + "a", "PYRO:a@127.0.0.1:1"]]
    request = protocol.CountRanges(count="c1", tokens=["t"], corpus=spec, ranges=[[0, 0, 6]], shards=shards)
    worker = types.SimpleNamespace(name=protocol.WORKER_PREFIX + "w", uri=None, threads=1, corpus_dirs=None,
                                   hmac_key=None, ns_conf={})
    count = counting.Counting(worker)
    server = types.SimpleNamespace(counting=count, guards=lambda: {"lease": count.check_lease})
    served_count = calls.Caller(tables.WORKER, calls.Handlers(
        calls.Table("worker", [tables.WORKER["count"]]), server).handle).call  # its table's guard, then its handler
    with pytest.raises(errors.SessionClosed, match="the dispatcher leases no count 'c1'"):
        served_count("count", request)
    count.lease("c2", protocol.corpus_digest(spec), shards)
    with pytest.raises(errors.SessionClosed, match="leases no count 'c1'"):
        served_count("count", request)
    count.lease("c1", protocol.corpus_digest(dataclasses.replace(spec, path="/etc/passwd")), shards)
    with pytest.raises(errors.Forbidden, match="not the corpus its lease names"):
        served_count("count", request)
    count.lease("c1", protocol.corpus_digest(spec), [[protocol.SHARD_PREFIX + "m", "PYRO:m@10.0.0.9:1"]])
    with pytest.raises(errors.Forbidden, match="not the shards its lease names"):
        served_count("count", request)
    count.lease(None, None, None)  # the dispatcher's word comes while the count waits: it goes on, to the shard
    threading.Timer(0.1, count.lease, ("c1", protocol.corpus_digest(spec), shards)).start()
    with pytest.raises(errors.ShardLost):  # (no shard listens there: past the lease's checks)
        served_count("count", request)


@pytest.mark.unit
def test_the_client_stops_taking_from_a_shard_that_answers_for_ever():
    """Issue 54, item 6: a shard claiming more words than the ranges held, or a total that moves, is an error,
    not an endless take loop."""
    table = table_of("a b c\n")
    w, o, c, f = table.arrays()

    class Held:
        shards = [["shard-evil", "PYRO:e@h:1"]]

        def __init__(self, totals):
            self.totals = iter(totals)

        def call(self, shard, op, request):
            return protocol.CountChunk(words=w[:1], offsets=o[:2], counts=c[:1], firsts=f[:1], total=next(self.totals),
                                       ranges=1, table_bytes=10)

        def each(self, fn):
            return [fn(0)]

    count = vocab.ClusterCount({})
    count.results = {0: [3, 1, 3]}
    for totals, said in (([10 ** 9], "1000000000 words in all"), ([3, 4], "with 4 words in all \\(before: 3")):
        with pytest.raises(errors.ClusterError, match=said):
            count._take(Held(totals), "c1", "t0k", 1)


@pytest.mark.unit
def test_words_come_back_in_first_occurrence_order_as_gensims_dict():
    table = table_of("zeta é 日本語 zeta\nalpha é\n")
    parts = table.split(2)
    words = np.concatenate([p[0] for p in parts])
    sizes = np.cumsum([0] + [len(p[0]) for p in parts])
    offsets = np.concatenate([[0]] + [p[1][1:] + base for p, base in zip(parts, sizes)])
    got = vocab._vocab(words, offsets, np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts]))
    assert isinstance(got, collections.defaultdict)
    assert list(got.items()) == [("zeta", 2), ("é", 2), ("日本語", 1), ("alpha", 1)]


@pytest.mark.unit
def test_ranges_and_pruning():
    assert vocab.range_bytes(10, 4) == vocab.MIN_RANGE_BYTES
    assert vocab.range_bytes(10 ** 12, 4) == vocab.MAX_RANGE_BYTES
    assert vocab.range_bytes(64 << 20, 2) == 8 << 20  # four ranges a thread
    counted = collections.defaultdict(int, {"a": 5, "b": 1, "c": 2, "d": 1, "e": 3})
    # gensim's first prune drops counts below 1 (none), the next below 2, and so on
    assert vocab.prune_like_gensim(counted, 3) == 2 and dict(counted) == {"a": 5, "c": 2, "e": 3}
    kept = collections.defaultdict(int, {"a": 5, "b": 1, "c": 2})
    assert vocab.prune_like_gensim(kept, 2, trim_rule=lambda w, c, m: utils.RULE_KEEP if w == "b" else
                                   utils.RULE_DEFAULT) == 3 and dict(kept) == {"a": 5, "b": 1}


# ---------------------------------------------------------------------------------------------- the cluster
@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, n_shards=2, worker_timeout=3.0) as started:
        yield started


@pytest.fixture(scope="module")
def awkward_file(tmp_path_factory, awkward_text):
    path = tmp_path_factory.mktemp("vocab") / "awkward.txt"
    path.write_text(awkward_text(random.Random(5), lines=600), encoding="utf8")
    return str(path)


def state(model):
    """What build_vocab leaves in a model: the words in order, their counts and sampling, the corpus counts."""
    return {"words": list(model.wv.index_to_key), "counts": model.wv.expandos["count"].tolist(),
            "sample_int": model.wv.expandos["sample_int"].tolist(), "corpus_count": model.corpus_count,
            "corpus_total_words": model.corpus_total_words, "min_count": model.effective_min_count,
            "cum_table": model.cum_table.tolist(),
            "events": [e["msg"] for e in model.lifecycle_events if e["event"] == "prepare_vocab"]}


def drop_e(word, count, min_count):
    return utils.RULE_DISCARD if "e" in word else utils.RULE_KEEP if count == 1 and len(word) > 3 else utils.RULE_DEFAULT


SETTINGS = [dict(min_count=1), dict(min_count=5, sample=1e-3), dict(min_count=2, max_final_vocab=300),
            dict(min_count=3, sample=0)]


@pytest.mark.parametrize("params", SETTINGS, ids=["min1", "min5", "max_final", "nosample"])
@pytest.mark.parametrize("corpus", ["lee", "awkward"])
@pytest.mark.cluster
def test_vocabulary_is_gensims(cluster, awkward_file, corpus, params, monkeypatch):
    path = LEE if corpus == "lee" else awkward_file
    monkeypatch.setattr(vocab, "MIN_RANGE_BYTES", 50_000)  # many ranges, cut mid-line, on two workers
    ours = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8, **params)
    ours.build_vocab(corpus_file=path)
    theirs = gensim.models.Word2Vec(vector_size=8, **params)
    theirs.build_vocab(corpus_file=path)
    assert state(ours) == state(theirs)
    stats = ours.vocab_stats
    assert stats["count_ranges"] == -(-os.path.getsize(path) // vocab.range_bytes(os.path.getsize(path), 2)) > 2
    assert stats["count_workers"] == 2 and stats["count_shards"] == 2 and stats["count_recounted"] == 0


@pytest.mark.cluster
def test_rare_words_stay_on_the_shards_unless_the_call_needs_them(cluster, awkward_file):
    """A fresh vocabulary with min_count alone: the shards send the client only the words it keeps, and the
    model (its lifecycle events included) is gensim's; with keep_raw_vocab, every word comes, as gensim keeps."""
    ours = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8, min_count=5)
    ours.build_vocab(corpus_file=LEE)
    theirs = gensim.models.Word2Vec(vector_size=8, min_count=5)
    theirs.build_vocab(corpus_file=LEE)
    assert state(ours) == state(theirs)
    stats = ours.vocab_stats
    assert stats["count_sent_distinct"] == len(theirs.wv) < stats["count_distinct"] == 10781
    assert not hasattr(ours, "_dropped") and not hasattr(ours, "_vocab_call")  # (never saved with the model)
    ours = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8, min_count=5)
    ours.build_vocab(corpus_file=awkward_file, keep_raw_vocab=True)
    theirs = gensim.models.Word2Vec(vector_size=8, min_count=5)
    theirs.build_vocab(corpus_file=awkward_file, keep_raw_vocab=True)
    assert state(ours) == state(theirs) and list(ours.raw_vocab.items()) == list(theirs.raw_vocab.items())
    assert ours.vocab_stats["count_sent_distinct"] == ours.vocab_stats["count_distinct"]


@pytest.mark.cluster
def test_trim_rule_and_the_iterables_the_workers_read(cluster, awkward_file, tmp_path, caplog):
    ours = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8, min_count=2)
    ours.build_vocab(corpus_file=awkward_file, trim_rule=drop_e)
    theirs = gensim.models.Word2Vec(vector_size=8, min_count=2)
    theirs.build_vocab(corpus_file=awkward_file, trim_rule=drop_e)
    assert state(ours) == state(theirs) and not any("e" in w for w in ours.wv.index_to_key)
    # a LineSentence and a PathLineSentences folder are counted by the workers too
    ours = Word2Vec(LineSentence(LEE), distributed=True, ns_conf=cluster.ns_conf, vector_size=8, epochs=1)
    theirs = gensim.models.Word2Vec(LineSentence(LEE), vector_size=8, epochs=1)
    assert state(ours) == state(theirs) and ours.vocab_stats["count_ranges"] >= 1
    folder = tmp_path / "parts"
    folder.mkdir()
    text = open(awkward_file, encoding="utf8").read().split("\n")
    for i in range(3):
        (folder / f"part{i}.txt").write_text("\n".join(text[i::3]), encoding="utf8")
    ours = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8)
    ours.build_vocab(PathLineSentences(str(folder)))
    theirs = gensim.models.Word2Vec(vector_size=8)
    theirs.build_vocab(PathLineSentences(str(folder)))
    assert state(ours) == state(theirs) and ours.vocab_stats["count_ranges"] >= 1
    # any other iterable is counted by the client, as gensim does, saying so
    with caplog.at_level(logging.INFO, logger="gensim_distw2v.model"):
        ours = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8)
        ours.build_vocab(list(LineSentence(LEE)))
    assert ours.vocab_stats == {} and any("counted on this machine" in r.getMessage() for r in caplog.records)


@pytest.mark.cluster
def test_max_vocab_size_prunes_the_exact_counts_and_says_so(cluster, caplog):
    with caplog.at_level(logging.WARNING, logger="gensim_distw2v.model"):
        ours = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8, min_count=1, max_vocab_size=2000)
        ours.build_vocab(corpus_file=LEE)
    assert any("max_vocab_size=2000: the cluster counts every word exactly" in r.getMessage() for r in caplog.records)
    exact = gensim.models.Word2Vec(vector_size=8, min_count=1)
    exact.build_vocab(corpus_file=LEE, keep_raw_vocab=True)
    expected = collections.defaultdict(int, exact.raw_vocab)
    assert vocab.prune_like_gensim(expected, 2000) > 0
    reference = gensim.models.Word2Vec(vector_size=8, min_count=1)
    reference.build_vocab_from_freq(expected)
    assert list(ours.wv.index_to_key) == list(reference.wv.index_to_key) and len(ours.wv) <= 2000
    assert all(ours.wv.get_vecattr(w, "count") == expected[w] for w in ours.wv.index_to_key)


@pytest.mark.cluster
def test_constructor_with_corpus_file_counts_on_the_cluster_and_trains(cluster, tmp_path):
    model = Word2Vec(corpus_file=LEE, distributed=True, ns_conf=cluster.ns_conf, vector_size=16, min_count=2,
                     epochs=1, seed=3)
    reference = gensim.models.Word2Vec(vector_size=16, min_count=2)
    reference.build_vocab(corpus_file=LEE)
    assert list(model.wv.index_to_key) == list(reference.wv.index_to_key)
    assert model.vocab_stats["count_ranges"] == 1 and model.cluster_stats["raw_words"] == reference.corpus_total_words
    model.save(str(tmp_path / "m"))
    loaded = gensim.models.Word2Vec.load(str(tmp_path / "m"))  # plain gensim; no count stats saved
    assert not hasattr(loaded, "vocab_stats") and len(loaded.wv) == len(reference.wv)


@pytest.mark.cluster
def test_bad_input_is_named_and_the_cluster_serves_on(cluster, tmp_path):
    bad = tmp_path / "binary.txt"
    bad.write_bytes(b"good words here\n" * 5000 + b"a line \xff\xfe of bytes\n" + b"more words\n" * 10)
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8)
    with pytest.raises(ValueError) as err:
        model.build_vocab(corpus_file=str(bad))
    message = str(err.value)
    assert str(bad) in message and "the line at byte 80000 is not valid UTF-8" in message
    assert re.search(r"worker gensim_distw2v\.worker\.\w+ on 127\.0\.0\.1", message), message
    with pytest.raises(UnicodeDecodeError):  # gensim refuses it too
        gensim.models.Word2Vec(vector_size=8).build_vocab(corpus_file=str(bad))
    with pytest.raises(TypeError, match="nowhere.txt"):  # (gensim's own check, before any count)
        model.build_vocab(corpus_file=str(tmp_path / "nowhere.txt"))
    model.build_vocab(corpus_file=LEE)  # the cluster serves on
    assert model.corpus_count == 300


@pytest.mark.cluster
def test_a_keyed_peer_cannot_hold_counts_on_the_shards_behind_the_dispatchers_back():
    """Issue 54: a peer with the cluster's key opened four counts of its own on every shard, and a client's
    build_vocab then failed (Busy) for 15 minutes. Now a shard refuses a count the dispatcher has not leased,
    so the peer's counts never open and the client's count runs; a peer holding the lease itself (one count at
    a time, as one session) is named to the client, who counts once it is given back."""
    from gensim_distw2v.client.links import find_dispatcher
    from gensim_distw2v.io import endpoints
    from gensim_distw2v.protocol import tables

    with LocalCluster(n_workers=1, threads_per_worker=1, n_shards=1, hmac_key="count insiders") as keyed:
        peer = find_dispatcher(keyed.ns_conf)
        try:
            (name, member), = peer.call("status").shards.items()
            shard = endpoints.link(member.uri, tables.SHARD, keyed.hmac_key, timeout=30.0)
            try:
                with pytest.raises(errors.SessionClosed, match="the dispatcher leases no count"):  # (after 10 s)
                    shard.call("count_open", protocol.CountOpen(count="mallory", token="m4l", index=0, parts=1))
                model = Word2Vec(distributed=True, ns_conf=keyed.ns_conf, vector_size=8)
                model.build_vocab(corpus_file=LEE)  # its count opens: none of the peer's is held
                assert model.corpus_count == 300
                peer.call("open_count", protocol.CountRef(count="mallory", token="m4l"))
                with pytest.raises(errors.Busy, match="another vocabulary count is running on this cluster"):
                    Word2Vec(distributed=True, ns_conf=keyed.ns_conf, vector_size=8).build_vocab(corpus_file=LEE)
                with pytest.raises(errors.Forbidden):  # the lease's count, opened with another secret
                    shard.call("count_open", protocol.CountOpen(count="mallory", token="guess", index=0, parts=1))
                peer.call("close_count", protocol.CountRef(count="mallory", token="m4l"))
                model.build_vocab(corpus_file=LEE)
                assert model.corpus_count == 300 and shard.call("status").session is None
            finally:
                shard.release()
        finally:
            peer.release()


@pytest.fixture
def big_file(tmp_path):
    """About 6 MB of text: 120 ranges of 50 kB."""
    rng = random.Random(9)
    words = [f"w{i}" for i in range(20_000)]
    path = tmp_path / "big.txt"
    with open(path, "w") as out:
        for _ in range(60_000):
            out.write(" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) + "\n")
    return str(path)


@pytest.mark.parametrize("fault", ["killed", "frozen"])
@pytest.mark.cluster
def test_a_worker_lost_while_counting_leaves_the_counts_exact(big_file, monkeypatch, fault):
    """A worker killed while it holds ranges fails its call at once; one frozen (a node cut off) is
    dropped by the dispatcher after worker_timeout: either way its ranges are counted by the other
    worker, and each range added once on the shards."""
    monkeypatch.setattr(vocab, "MIN_RANGE_BYTES", 50_000)
    with LocalCluster(n_workers=2, threads_per_worker=1, n_shards=2, worker_timeout=3.0) as lossy:
        process = sorted(lossy.workers())[0]
        victim, pid = lossy.names[process], lossy.processes[process].pid
        os.kill(pid, signal.SIGSTOP)
        counter = vocab.ClusterCount(lossy.ns_conf)
        result, failed = [], []

        def run():
            try:
                result.append(counter.count(big_file))
            except Exception as err:  # noqa: BLE001 - reported below
                failed.append(err)
        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 30
        while victim not in counter.out and time.monotonic() < deadline:
            time.sleep(0.01)
        assert victim in counter.out, "the frozen worker was handed ranges"
        if fault == "killed":
            os.kill(pid, signal.SIGKILL)
        thread.join(60)
        assert not thread.is_alive() and not failed, failed
        found = result[0]
        assert found.stats["count_recounted"] >= 1 and victim in counter.problems
        assert ("the dispatcher lost it" if fault == "frozen" else "lost") in counter.problems[victim]
        os.kill(pid, signal.SIGKILL)
    theirs = gensim.models.Word2Vec()
    theirs.build_vocab(corpus_file=big_file, keep_raw_vocab=True)
    assert list(found.raw_vocab.items()) == list(theirs.raw_vocab.items())
    assert (found.total_words, found.corpus_count) == (theirs.corpus_total_words, theirs.corpus_count)


@pytest.mark.cluster
def test_a_dispatcher_restarted_during_a_count_ends_it_naming_why(big_file, monkeypatch):
    """The count's lease dies with its dispatcher: the new one leases no count, so the shards drop it, and
    the count ends with each worker's reason (here a worker frozen while it held ranges, thawed after the
    restart, whose adds the shard refuses), within a minute, not a hang; build_vocab is called again."""
    monkeypatch.setattr(vocab, "MIN_RANGE_BYTES", 50_000)
    with LocalCluster(n_workers=1, threads_per_worker=1, n_shards=1) as cluster:
        process = sorted(cluster.workers())[0]
        victim, pid = cluster.names[process], cluster.processes[process].pid
        counter = vocab.ClusterCount(cluster.ns_conf)
        failed = []

        def run():
            try:
                counter.count(big_file)
            except Exception as err:  # noqa: BLE001 - checked below
                failed.append(err)
        os.kill(pid, signal.SIGSTOP)
        thread = threading.Thread(target=run)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while victim not in counter.out and time.monotonic() < deadline:
                time.sleep(0.01)
            assert victim in counter.out, "the frozen worker was handed ranges"
            cluster.processes["dispatcher"].kill()
            cluster.start_dispatcher()
            time.sleep(3.0)  # the shard's heartbeat reaches the new dispatcher, which leases no count
        finally:
            os.kill(pid, signal.SIGCONT)
        thread.join(60)
        assert not thread.is_alive(), "the count hangs after its dispatcher was restarted"
        assert failed and "no count" in str(failed[0]), failed
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, vector_size=8)
        model.build_vocab(corpus_file=LEE)  # called again: it counts
        assert model.corpus_count == 300


@pytest.mark.cluster
def test_a_shard_lost_before_the_count_is_named_and_nothing_hangs(tmp_path):
    """A shard killed just before a count. The dispatcher drops it once it sees its heartbeat connection
    close, which races the count's start: if the count still finds it listed, the count fails naming it;
    if not, the count goes on with the shard left. Either way within 30 s. Up to four kills (a shard
    started again between them), until the first case is seen (it is, three times in four)."""
    with LocalCluster(n_workers=1, threads_per_worker=1, n_shards=2, log_level="WARNING") as broken:
        named = False
        for _attempt in range(4):
            victim = max(n for n, p in broken.processes.items() if n.startswith("shard-") and p.alive())
            broken.processes[victim].kill()
            model = Word2Vec(distributed=True, ns_conf=broken.ns_conf, vector_size=8)
            began = time.monotonic()
            try:
                model.build_vocab(corpus_file=LEE)
            except errors.ShardLost as err:
                assert re.search(r"lost parameter shard gensim_distw2v\.shard\.\w+ at .*restart it", str(err)), err
                named = True
            else:
                assert len(model.wv) > 1000  # dropped first: counted on the shard left
            assert time.monotonic() - began < 30
            if named:
                break
            broken.add_shard()  # back to two listed shards
        assert named


NEEDS_UNSHARE = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a worker with another view of the filesystem needs Linux, root and unshare")  # (root: .ci/run's)


@NEEDS_UNSHARE
@pytest.mark.system
def test_a_worker_that_does_not_see_the_file_is_left_out_naming_it(tmp_path, start_namespaced_worker, caplog):
    shared = tmp_path / "shared"
    shared.mkdir()
    path = shared / "corpus.txt"
    shutil.copy(LEE, path)
    with LocalCluster(n_workers=0, n_shards=1) as alone:
        blind = start_namespaced_worker(alone, "worker-blind", f"mount -t tmpfs none {shared}")
        alone.processes["dispatcher"].wait_for(rf"worker {re.escape(blind)} registered", timeout=60)
        model = Word2Vec(distributed=True, ns_conf=alone.ns_conf, vector_size=8, cluster_timeout=5.0)
        with pytest.raises(errors.ClusterError) as err:  # the only worker cannot see it
            model.build_vocab(corpus_file=str(path))
        assert f"no worker could count the vocabulary of {path}" in str(err.value)
        assert f"{blind}: worker {blind} on 127.0.0.1: no file at {path}" in str(err.value)
        alone.add_worker()
        with caplog.at_level(logging.WARNING, logger="gensim_distw2v.client.vocab"):
            model.build_vocab(corpus_file=str(path))
        assert model.corpus_count == 300 and model.vocab_stats["count_workers"] == 2
        assert any(f"worker {blind} is out of the vocabulary count" in r.getMessage() and "no file at" in r.getMessage()
                   for r in caplog.records)


def peak_and_now(pid):
    """A process's peak resident bytes (VmHWM) and its resident bytes now (VmRSS), from /proc."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                fields[key] = int(value.split()[0]) * 1024
    return fields["VmHWM"], fields["VmRSS"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads a process's peak memory from /proc")
@pytest.mark.cluster
def test_ten_million_distinct_words_are_counted_in_the_memory_the_docs_state(tmp_path):
    """docs/corpus_file.rst: a counting thread holds one range at a time, at most about 4 x the range's
    bytes + 160 bytes a distinct word of the range; a shard about 160 bytes a distinct word of its part."""
    path = tmp_path / "distinct.txt"
    n = 10_000_000
    with open(path, "w") as out:  # every word distinct (the worst case for a table), 100 a line
        for start in range(0, n, 100):
            out.write(" ".join(f"w{i:07x}" for i in range(start, start + 100)) + "\n")
    with LocalCluster(n_workers=2, threads_per_worker=1, n_shards=2, log_level="WARNING") as big:
        pids = {name: proc.pid for name, proc in big.processes.items() if name.startswith(("worker-", "shard-"))}
        before = {name: peak_and_now(pid)[1] for name, pid in pids.items()}
        found = vocab.ClusterCount(big.ns_conf).count(str(path))
        grown = {name: peak_and_now(pid)[0] - before[name] for name, pid in pids.items()}
    stats = found.stats
    print(f"peak memory grown while counting, MB: {', '.join(f'{n} {g / 1e6:.0f}' for n, g in sorted(grown.items()))};"
          f" ranges of {stats['count_range_bytes'] / 1e6:.1f} MB, {stats['count_range_max_distinct']:,} distinct words "
          f"in the largest")  # (docs/corpus_file.rst quotes them: pytest -s -k ten_million)
    assert len(grown) == 4 and all(extra > 0 for extra in grown.values()), grown
    assert len(found.raw_vocab) == found.total_words == n and found.corpus_count == n // 100
    per_thread = 4 * stats["count_range_bytes"] + 160 * stats["count_range_max_distinct"]
    for name, extra in grown.items():
        limit = per_thread if name.startswith("worker-") else 160 * n / 2
        assert extra <= limit, f"{name} grew by {extra / 1e6:.0f} MB, beyond the {limit / 1e6:.0f} MB stated"
    assert list(found.raw_vocab)[:3] == ["w0000000", "w0000001", "w0000002"]


@pytest.mark.unit
def test_corpus_folders_keep_a_worker_to_its_files_without_saying_what_is_elsewhere(tmp_path):
    from gensim_distw2v.io import corpusfile

    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    shutil.copy(LEE, data / "lee.txt")
    shutil.copy(LEE, elsewhere / "lee.txt")
    os.symlink(elsewhere / "lee.txt", data / "escape.txt")
    folders = corpusfile.corpus_folders(f"{data}{os.pathsep}{tmp_path / 'data'}")
    assert folders == (os.path.realpath(data),) * 2
    found = corpusfile.fingerprint(str(data / "lee.txt"))
    assert corpusfile.check_files([(str(data / "lee.txt"), found["size"], found["digest"])], folders) is None
    said = {name: corpusfile.check_files([(str(path), found["size"], found["digest"])], folders) for name, path in [
        ("outside", elsewhere / "lee.txt"), ("missing", elsewhere / "none.txt"), ("symlink", data / "escape.txt"),
        ("dotdot", data / ".." / "elsewhere" / "lee.txt")]}
    for name, problem in said.items():  # the same answer whether the file exists or not, whatever its size
        assert problem.endswith("is not in a folder this worker reads corpora from (its --corpus-dir)"), name
    assert "bytes" not in said["outside"] and "no file" not in said["missing"]
    assert corpusfile.check_files([(str(elsewhere / "lee.txt"), found["size"], found["digest"])], None) is None
    with pytest.raises(ValueError, match=r"--corpus-dir: .*none is not a folder"):
        corpusfile.corpus_folders(str(tmp_path / "none"))


@pytest.mark.unit
def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused_when_the_file_is_opened(tmp_path):
    """The check of ``--corpus-dir`` looks at a path; a reader opens it later (at each range for a count, at
    the first range for training). A folder on the path replaced by a symlink out of the corpus folders in
    between (by anyone who may write in them) was read: the reader now checks the file it has open."""
    import dataclasses

    from gensim_distw2v.io import corpusfile
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    (data / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(LEE, data / "sub" / "lee.txt")
    shutil.copy(LEE, elsewhere / "lee.txt")
    folders = corpusfile.corpus_folders(str(data))
    found = corpusfile.fingerprint(str(data / "sub" / "lee.txt"))
    parts = [(str(data / "sub" / "lee.txt"), found["size"], found["digest"])]
    spec = protocol.CorpusFileSpec(path=parts[0][0], size=found["size"], digest=found["digest"], total_words=1,
                                   range_bytes=1 << 20, start_alpha=0.025, end_alpha=0.0001)
    assert corpusfile.check_files(parts, folders) is None
    with corpusfile.open_reader(spec, None, folders) as reader:  # as checked: read
        assert reader.count(0, 1 << 20, WordCounts())[0] > 0
    shutil.rmtree(data / "sub")
    os.symlink(elsewhere, data / "sub")  # now the same path leads out of the corpus folders
    for opened in (lambda: corpusfile.open_reader(spec, None, folders),
                   lambda: corpusfile.open_reader(dataclasses.replace(spec, files=[list(parts[0])]), None, folders)
                   .count(0, 10, WordCounts())):
        with pytest.raises(PermissionError, match="not in a folder this worker reads corpora from .* changed since"):
            opened()
    with corpusfile.open_reader(spec, None) as reader:  # no --corpus-dir: any file, as before
        assert reader.count(0, 1 << 20, WordCounts())[0] > 0


@pytest.mark.unit
def test_a_range_read_into_one_buffer_is_bounded():
    spec = dict(path="/c.txt", size=1 << 40, digest="d", range_bytes=1, total_words=1, start_alpha=0.025,
                end_alpha=0.0001)
    corpus = protocol.CorpusFileSpec(**spec)

    def ranges(hi):  # as a worker receives it: checked on arrival
        return protocol.CountRanges.from_wire(protocol.CountRanges(
            count="c", tokens=["t"], corpus=corpus, ranges=[[0, 0, hi]], shards=[["s", "u"]]).to_wire())
    with pytest.raises(ValueError, match=r"hi - lo <= 67108864"):
        ranges((64 << 20) + 1)
    assert ranges(64 << 20).ranges == [[0, 0, 64 << 20]]
    with pytest.raises(ValueError, match=r"range_bytes must be at most 67108864 .*lower range_words"):
        protocol.CorpusFileSpec.from_wire(protocol.CorpusFileSpec(**dict(spec, range_bytes=(64 << 20) + 1)).to_wire())


@pytest.mark.cluster
def test_a_worker_given_corpus_folders_counts_and_trains_only_files_in_them(tmp_path):
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    inside, outside = data / "lee.txt", elsewhere / "lee.txt"
    shutil.copy(LEE, inside)
    shutil.copy(LEE, outside)
    with LocalCluster(n_workers=1, n_shards=1, worker_args=["--corpus-dir", str(data)]) as kept:
        model = Word2Vec(distributed=True, ns_conf=kept.ns_conf, vector_size=8, min_count=2, epochs=1,
                         cluster_timeout=10.0)
        with pytest.raises(errors.ClusterError, match=rf"{re.escape(str(outside))} is not in a folder this "
                                                         rf"worker reads corpora from \(its --corpus-dir\)"):
            model.build_vocab(corpus_file=str(outside))
        model.build_vocab(corpus_file=str(inside))
        assert model.corpus_count == 300
        trained = model.train(corpus_file=str(inside), total_examples=model.corpus_count,
                              total_words=model.corpus_total_words, epochs=1)
        assert trained[1] == model.corpus_total_words
        with pytest.raises(Exception, match=r"is not in a folder this worker reads corpora from \(its --corpus-dir\)"):
            model.train(corpus_file=str(outside), total_examples=model.corpus_count,
                        total_words=model.corpus_total_words, epochs=1)
