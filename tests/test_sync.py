"""The sync modes through a real cluster: a name server, a dispatcher, two shards and two workers of
one thread each, as processes.

``bsp`` trains the same model twice (bit for bit) from the same seed, as gensim's ``workers=1`` does
(gensim's own ``test_r_n_g`` is run on the cluster); ``asp`` never waits for a round; ``local``
merges only at epoch ends. (Losing a worker under ``bsp``: ``test_failures.py``.)"""
import dataclasses
import time

import gensim.models
import numpy as np
import pytest
from gensim.test.utils import common_texts

from gensim_distw2v import LocalCluster, Word2Vec

SMALL = dict(vector_size=24, min_count=2, seed=11, epochs=2, workers=1, sg=1, negative=5)


@pytest.fixture(scope="module")
def two_workers():
    with LocalCluster(n_workers=2, threads_per_worker=1, n_shards=2) as cluster:
        yield cluster


def train(cluster, corpus, **params):
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **{"sync_words": 2000, **SMALL, **params})
    model.build_vocab(corpus)
    model.train(corpus, total_examples=model.corpus_count, epochs=model.epochs)
    return model


def assert_identical(one, two):
    assert np.array_equal(one.wv.vectors, two.wv.vectors)
    for name in ("syn1neg", "syn1"):
        if hasattr(one, name):
            assert np.array_equal(getattr(one, name), getattr(two, name)), name


@pytest.mark.parametrize("variant", [dict(sg=1, hs=0, negative=5), dict(sg=0, hs=1, negative=0, sample=1e-3)],
                         ids=["sg+neg", "cbow+hs+sample"])
@pytest.mark.cluster
def test_bsp_trains_the_same_model_twice_from_the_same_seed(two_workers, lee_corpus, variant):
    first, second = (train(two_workers, lee_corpus, sync="bsp", **variant) for _ in range(2))
    assert_identical(first, second)
    stats = first.cluster_stats
    words = [worker["words"] for worker in stats["workers"].values()]
    assert len(words) == 2 and min(words) > 0.4 * sum(words)  # the jobs dealt half and half
    assert stats["merges"] >= 2 * 2 * 10, stats["merges"]  # about 15 rounds per worker and epoch, in turn
    other = train(two_workers, lee_corpus, sync="bsp", **{**variant, "seed": 12})
    assert not np.array_equal(first.wv.vectors, other.wv.vectors)  # the seed decides, not the timing


@pytest.mark.cluster
def test_a_round_in_pieces_trains_the_model_a_round_in_one_part_trains(two_workers, lee_corpus):
    """Pieces in flight change when a worker takes a piece's rows (while the piece before is on its
    way), not what goes: under bsp with nothing held back, rounds of up to 8 pieces train the model
    that rounds of one part train, bit for bit, and the shards fold more parts."""
    one, pieces = (train(two_workers, lee_corpus, sync="bsp", hold_back=0.0, round_pieces=n) for n in (1, 8))
    assert_identical(one, pieces)
    parts = [sum(shard["merges"] for shard in model.cluster_stats["shards"].values()) for model in (one, pieces)]
    assert parts[1] > parts[0] and one.cluster_stats["merges"] == pieces.cluster_stats["merges"], parts
    assert pieces.cluster_stats["take_cpu"] > 0


@pytest.mark.cluster
def test_rounds_in_flight_overlap_and_train_as_rounds_in_turn(two_workers, lee_corpus):
    """``rounds_in_flight=2`` at an interval shorter than a round (300 words): rounds are taken while the
    round before is still in flight (none with one round under way), every job is reported, and the
    model learns the corpus as gensim and one round under way do (adjacent words' similarity)."""
    params = dict(sg=0, epochs=5, vector_size=32)
    one, two = (train(two_workers, lee_corpus, rounds_in_flight=n, sync_words=300, lag_limit=None, **params)
                for n in (1, 2))
    assert one.cluster_stats["overlapped"] == 0
    assert two.cluster_stats["overlapped"] > 0.1 * two.cluster_stats["merges"], two.cluster_stats["merges"]
    # the lag (words trained between a round's take and its replies taken in) is counted either way, and
    # a round landed by the next one lags by about an interval (at least: but for rounds made for want of jobs)
    lags = [m.cluster_stats["lag_words"] for m in (one, two)]
    assert lags[0] > 0 and lags[1] >= 150 * two.cluster_stats["overlapped"], (lags, two.cluster_stats["overlapped"])
    assert two.cluster_stats["raw_words"] == 5 * sum(len(s) for s in lee_corpus)
    plain = {**SMALL, **params}
    reference, untrained = gensim.models.Word2Vec(lee_corpus, **plain), gensim.models.Word2Vec(**plain)
    untrained.build_vocab(lee_corpus)
    scores = [_adjacent(m, lee_corpus) for m in (untrained, reference, one, two)]
    assert scores[3] > scores[0] + 0.2 and abs(scores[3] - scores[2]) < 0.05 and abs(scores[3] - scores[1]) < 0.05, \
        scores
    assert np.isfinite(two.wv.vectors).all() and np.isfinite(two.syn1neg).all()


def _per_round(model):
    """Raw words and lag (words trained before its replies came) a merge round, over the workers."""
    stats = model.cluster_stats
    rounds = sum(w["merges"] for w in stats["workers"].values())
    return stats["raw_words"] / rounds, stats["lag_words"] / rounds


@pytest.mark.cluster
def test_a_lag_beyond_the_limit_shortens_eight_workers_intervals(lee_corpus):
    """Eight workers (on two cores) whose rounds lag beyond ``lag_limit`` (1: any lag): with it they shorten
    their intervals (more rounds, fewer words a round), and interval and lag together come down; without it a
    round carries the interval asked for. Every word is trained."""
    params = dict(sg=0, epochs=20, vector_size=32, rounds_in_flight=2, sync_words=3_000)
    with LocalCluster(n_workers=8, threads_per_worker=1, n_shards=2) as cluster:
        free, steered = (train(cluster, lee_corpus, lag_limit=limit, **params) for limit in (None, 1.0))
    (free_words, free_lag), (words, lag) = _per_round(free), _per_round(steered)
    assert free_lag > 0.1 * free_words, (free_words, free_lag)  # (so the limit binds)
    # (means over every round, those made for want of jobs and the epochs' flushes too: the floor is unit-tested)
    assert 0.4 * free_words < words < 0.95 * free_words and words + lag < free_words + free_lag, \
        (free_words, free_lag, words, lag)
    assert steered.cluster_stats["raw_words"] == 20 * sum(len(s) for s in lee_corpus)


@pytest.mark.cluster
def test_fewer_than_eight_workers_keep_the_interval_asked_whatever_their_lag(two_workers, lee_corpus):
    """Below eight workers the intervals were chosen through the cluster, lag included: not steered."""
    params = dict(sg=0, epochs=5, vector_size=32, rounds_in_flight=2, sync_words=3_000)
    free, limited = (train(two_workers, lee_corpus, lag_limit=limit, **params) for limit in (None, 1.0))
    (free_words, free_lag), (words, _) = _per_round(free), _per_round(limited)
    assert free_lag > 0 and abs(words / free_words - 1) < 0.1, (free_words, words)


def _adjacent(model, corpus):
    """Mean similarity of adjacent in-vocabulary words of the first 100 sentences."""
    pairs = [(a, b) for s in corpus[:100] for a, b in zip(s, s[1:])
             if a in model.wv.key_to_index and b in model.wv.key_to_index and a != b]
    return float(np.mean([model.wv.similarity(a, b) for a, b in pairs]))


class SlowCorpus:
    """A restartable corpus that pauses every 10 sentences: workers run out of jobs within the epoch."""

    def __init__(self, sentences):
        self.sentences = sentences

    def __iter__(self):
        for i, sentence in enumerate(self.sentences):
            if i % 10 == 0:
                time.sleep(0.02)
            yield sentence


@pytest.mark.cluster
def test_bsp_is_reproducible_when_the_client_is_slow(two_workers, lee_corpus):
    """Jobs of 1,000 words put 8 at a time, with pauses: workers wait for jobs within epochs (what a
    round carries, and when an epoch's flush comes, must not depend on it)."""
    corpus = SlowCorpus(lee_corpus)
    first, second = (train(two_workers, corpus, sync="bsp", batch_words=1000) for _ in range(2))
    assert_identical(first, second)
    assert first.cluster_stats["raw_words"] == 2 * sum(map(len, lee_corpus))


@pytest.mark.cluster
def test_gensims_same_seed_same_model_test_holds_on_the_cluster_with_bsp(two_workers):
    """gensim's ``test_word2vec.TestWord2VecModel.test_r_n_g`` (5 epochs of CBOW on its small corpus,
    ``seed=42, workers=1``), on two workers."""
    sentences = common_texts * 50  # gensim's test corpus, long enough for rounds within an epoch
    models = [Word2Vec(sentences, min_count=2, seed=42, workers=1, distributed=True, ns_conf=two_workers.ns_conf,
                       sync="bsp", sync_words=300) for _ in range(2)]
    assert models[0].cluster_stats["merges"] > 2 * 5  # rounds within the epochs, not only flushes
    assert len(models[0].wv) == len(models[1].wv)
    assert_identical(*models)
    plain = gensim.models.Word2Vec(sentences, min_count=2, seed=42, workers=1)
    assert not np.array_equal(plain.wv.vectors, models[0].wv.vectors)  # two workers are not one


@pytest.mark.cluster
def test_asp_never_waits_and_local_merges_only_at_epoch_ends(two_workers, lee_corpus):
    asp = train(two_workers, lee_corpus, sync="asp")
    assert asp.cluster_stats["stall_seconds"] == 0.0  # trainers never waited for a round
    assert asp.cluster_stats["merges"] > 2 * 2 * 2  # rounds within the epochs, as many as the merge thread
    # makes (fewer than one per 2,000 words when it is slow: on 2 busy cores, 35 against bsp's 60)
    local = train(two_workers, lee_corpus, sync="local", epochs=3)
    stats = local.cluster_stats
    assert stats["merges"] == 2 * 3, stats["merges"]  # one flush per worker and epoch, nothing between
    assert stats["stall_seconds"] == 0.0 and stats["raw_words"] == 3 * sum(map(len, lee_corpus))
    for model in (asp, local):
        assert np.isfinite(model.wv.vectors).all()
        assert model.wv.most_similar("government", topn=10)  # trained: a usable model
    two_workers.processes["worker-0"].wait_for(r"merging every \d+ words \(sync=local\)", timeout=5)


@pytest.mark.unit
def test_each_sync_mode_is_one_record_of_what_it_changes():
    from gensim_distw2v.config.choices import SYNC, SYNC_MODES
    from gensim_distw2v.config.settings import Settings

    assert SYNC_MODES == tuple(SYNC) == ("ssp", "bsp", "asp", "local")
    flags = {name: (m.in_turn, m.bounded, m.within_epoch, m.overlapped) for name, m in SYNC.items()}
    assert flags == {"ssp": (False, True, True, True), "bsp": (True, True, True, False),
                     "asp": (False, False, True, True), "local": (False, False, False, False)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        SYNC["ssp"].bounded = False
    for name in SYNC:  # every mode the table holds is a valid setting
        assert Settings(sync=name).sync == name


@pytest.mark.unit
def test_a_bad_sync_mode_is_refused_before_anything_moves():
    with pytest.raises(ValueError, match=r"unknown sync mode 'barrier'; choose one of \('ssp', 'bsp', 'asp', "
                                         r"'local'\)"):
        Word2Vec(distributed=True, sync="barrier")
    model = Word2Vec(distributed=True)
    assert model.sync == "ssp"
    with pytest.raises(ValueError, match="unknown sync mode"):
        model.sync = "BSP"
