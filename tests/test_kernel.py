"""The job kernel: exact parity with gensim, Hogwild threads, and bad input."""
import threading

import gensim.models
import numpy as np
import pytest

from gensim_distw2v._inner import MAX_WORDS_IN_JOB, JobTrainer
from gensim_distw2v.core.jobs import iter_epoch_jobs
from gensim_distw2v.core.kernel import model_arrays, node_counts, reverse_tree, reverse_tree_order, train_jobs, train_like_gensim, trainer_for_model
from gensim_distw2v.core.schedule import damped_rows

pytestmark = pytest.mark.unit

VARIANTS = {
    "sg+neg": dict(sg=1, hs=0, negative=5),
    "sg+hs": dict(sg=1, hs=1, negative=0),
    "cbow+neg mean": dict(sg=0, hs=0, negative=5, cbow_mean=1),
    "cbow+neg sum": dict(sg=0, hs=0, negative=5, cbow_mean=0),
    "cbow+hs": dict(sg=0, hs=1, negative=0),
    "sg+hs+neg": dict(sg=1, hs=1, negative=3),
    "cbow+hs+neg sum": dict(sg=0, hs=1, negative=3, cbow_mean=0),
    "sg+neg fixed windows": dict(sg=1, hs=0, negative=5, shrink_windows=False),
    "cbow+neg no down-sampling": dict(sg=0, hs=0, negative=5, sample=0),
}


SMALL = dict(vector_size=24, min_count=2, seed=11, epochs=2, workers=1)


def built(corpus, **params):
    """A gensim model with its vocabulary built and its weights initialised, not trained."""
    model = gensim.models.Word2Vec(**{**SMALL, **params})
    model.build_vocab(corpus)
    return model


def twins(corpus, **params):
    """A model trained by gensim (1 thread) and an identical one with only its vocabulary built."""
    return gensim.models.Word2Vec(corpus, **{**SMALL, **params}), built(corpus, **params)


def max_differences(reference, ours):
    diffs = {"syn0": np.abs(reference.wv.vectors - ours.wv.vectors).max()}
    if reference.negative:
        diffs["syn1neg"] = np.abs(reference.syn1neg - ours.syn1neg).max()
    if reference.hs:
        diffs["syn1"] = np.abs(reference.syn1 - ours.syn1).max()
    return diffs


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_parity_with_gensim(lee_corpus, variant):
    reference, ours = twins(lee_corpus, **VARIANTS[variant])
    before = ours.wv.vectors.copy()
    effective, _ = train_like_gensim(ours, lee_corpus)
    assert np.abs(before - ours.wv.vectors).max() > 0.01, "the kernel trained nothing"
    for name, diff in max_differences(reference, ours).items():
        assert diff <= 1e-6, f"{variant}: {name} differs from gensim by {diff}"
    assert effective > 0.5 * sum(len(s) for s in lee_corpus) * ours.epochs * 0.5


@pytest.mark.parametrize("variant", ["sg+hs", "cbow+hs+neg sum"])
def test_reversed_tree_trains_gensims_model(lee_corpus, variant):
    """The cluster trains hs's tree numbered busiest node first: the same arithmetic on the same
    rows, stored in another order; reversed back, syn1 is gensim's to the bit."""
    reference, ours = twins(lee_corpus, **VARIANTS[variant])
    params, arrays = model_arrays(ours)
    reversed_arrays = reverse_tree(arrays)
    assert reversed_arrays["syn1"] is not arrays["syn1"] and reversed_arrays["points"] is not arrays["points"]
    trainer = JobTrainer(**params, **reversed_arrays)
    for epoch in range(ours.epochs):
        for job in iter_epoch_jobs(lee_corpus, ours.wv.key_to_index, batch_words=ours.batch_words, cur_epoch=epoch,
                                   epochs=ours.epochs, start_alpha=ours.alpha, end_alpha=ours.min_alpha,
                                   total_examples=ours.corpus_count):
            trainer.train_job(job.indices, job.offsets, job.alpha, ours.random, False)
    order = reverse_tree_order(len(ours.syn1))
    assert np.array_equal(order[order], np.arange(len(order)))  # its own inverse
    assert np.array_equal(reference.syn1, reversed_arrays["syn1"][order])
    assert np.array_equal(reference.wv.vectors, ours.wv.vectors)


def test_tree_nodes_counted_busiest_first(lee_corpus):
    """Reversed, the node counts decrease: the root (every word's path) is row 0, and the damp
    rule's prefix of syn1 is the busiest nodes."""
    model = built(lee_corpus, hs=1, negative=0)
    arrays = reverse_tree(model_arrays(model)[1])
    counts = model.wv.expandos["count"]
    nodes = node_counts(arrays["points"], arrays["code_offsets"], counts, len(model.wv))
    assert nodes[0] == counts.sum() and nodes[-1] == 0  # the root; the last row is no node
    assert np.all(np.diff(nodes[:-1]) <= 0)
    damp = damped_rows(counts, 2_000, tree_counts=nodes)
    expected = int(np.sum(nodes * 2_000 >= 1.5 * counts.sum()))
    assert damp["syn1"] == expected and 0 < expected < len(nodes)
    assert "syn1" not in damped_rows(counts, 2_000)


def test_parity_loss_and_word_count(lee_corpus):
    params = dict(vector_size=24, min_count=2, seed=3, epochs=2, workers=1, sg=1, negative=5, compute_loss=True)
    reference = gensim.models.Word2Vec(**params)
    reference.build_vocab(lee_corpus)
    trained, _raw = reference.train(lee_corpus, total_examples=reference.corpus_count, epochs=2, compute_loss=True)
    ours = gensim.models.Word2Vec(**params)
    ours.build_vocab(lee_corpus)
    effective, loss = train_like_gensim(ours, lee_corpus, compute_loss=True)
    assert effective == trained
    # gensim sums the whole run's loss in one float32 (its ulp is 0.125 at a million), the kernel
    # per job: the totals agree to float32 accumulation error, not bit for bit.
    assert loss == pytest.approx(reference.get_latest_training_loss(), rel=1e-3)
    assert loss > 0


def test_parity_long_sentence_is_capped_like_gensim(lee_corpus):
    # gensim trains at most 10,000 words of a job and silently drops the rest; so do we.
    long_sentence = [w for s in lee_corpus for w in s][:25000]
    corpus = lee_corpus[:50] + [long_sentence] + lee_corpus[50:100]
    reference, ours = twins(corpus, sg=0, negative=5)
    train_like_gensim(ours, corpus)
    for name, diff in max_differences(reference, ours).items():
        assert diff <= 1e-6, f"{name} differs from gensim by {diff}"


def test_cap_and_empty_job(lee_corpus):
    model = built(lee_corpus, sg=1, negative=5, sample=0)
    trainer = trainer_for_model(model)
    rng = np.random.RandomState(0)
    words = np.arange(MAX_WORDS_IN_JOB + 500, dtype=np.uint32) % len(model.wv)
    assert trainer.train_job(words, np.array([0, len(words)]), 0.025, rng)[0] == MAX_WORDS_IN_JOB
    empty = np.zeros(0, np.uint32)
    assert trainer.train_job(empty, np.array([0]), 0.025, rng) == (0, 0.0)
    assert trainer.train_job(empty, np.array([0, 0, 0]), 0.025, rng) == (0, 0.0)


def test_hogwild_threads_train_one_model(lee_corpus):
    model = built(lee_corpus * 4, sg=1, negative=5, epochs=3)
    trainer = trainer_for_model(model)
    jobs = [
        (job.indices, job.offsets, job.alpha)
        for epoch in range(3)
        for job in iter_epoch_jobs(lee_corpus * 4, model.wv.key_to_index, batch_words=2000, cur_epoch=epoch,
                                   epochs=3, start_alpha=0.025, end_alpha=0.0001, total_examples=1200)
    ]
    effective, _ = train_jobs(trainer, jobs, threads=2)
    assert effective > 100_000
    assert np.isfinite(model.wv.vectors).all() and np.isfinite(model.syn1neg).all()
    # the model learned something: words from the same documents end up closer than random pairs
    sims = [model.wv.similarity(a, b) for s in lee_corpus[:50] for a, b in zip(s, s[1:])
            if a in model.wv.key_to_index and b in model.wv.key_to_index]
    assert np.mean(sims) > 0.3


def test_gil_is_released_while_training(lee_corpus):
    """While a thread is inside train_job, another Python thread keeps running."""
    model = built(lee_corpus, sg=1, hs=1, negative=20, vector_size=300, window=10, sample=0)
    trainer = trainer_for_model(model)
    words = np.array([model.wv.key_to_index[w] for s in lee_corpus for w in s if w in model.wv.key_to_index][:10000],
                     dtype=np.uint32)
    inside = threading.Event()
    result = []

    def train():
        inside.set()
        for _ in range(5):
            result.append(trainer.train_job(words, np.array([0, len(words)]), 0.025, np.random.RandomState(1)))

    worker = threading.Thread(target=train)
    worker.start()
    inside.wait()
    spins = 0
    while worker.is_alive():
        spins += 1
    worker.join()
    assert len(result) == 5
    # Each job takes about 0.6 s. Holding the GIL through a job would leave this loop one
    # 5 ms switch interval between jobs (measured here: 30-70 k iterations for a GIL-holding
    # C call), so at most about 0.5 M for 5 jobs; releasing it leaves it about 10 M.
    assert spins > 1_500_000, f"main thread ran only {spins} iterations while the kernel trained"


def test_thread_error_is_reraised(lee_corpus):
    model = built(lee_corpus, sg=1, negative=5)
    trainer = trainer_for_model(model)
    good = (np.zeros(3, np.uint32), np.array([0, 3]), 0.025)
    bad = (np.zeros(3, np.int64), np.array([0, 3]), 0.025)
    with pytest.raises(ValueError, match="indices must have dtype uint32"):
        train_jobs(trainer, [good, bad, good, good], threads=2)


@pytest.fixture(scope="module")
def small_model(lee_corpus):
    model = gensim.models.Word2Vec(vector_size=8, min_count=2, seed=1, sg=1, hs=1, negative=5)
    model.build_vocab(lee_corpus)
    return model


@pytest.mark.parametrize("indices, offsets, message", [
    (np.zeros(4, np.int32), np.array([0, 4]), "indices must have dtype uint32, got int32"),
    (np.zeros(4, np.float32), np.array([0, 4]), "indices must have dtype uint32"),
    (np.zeros((2, 2), np.uint32), np.array([0, 4]), "indices must be 1-dimensional"),
    (np.zeros(8, np.uint32)[::2], np.array([0, 4]), "indices must be C-contiguous"),
    ([0, 1, 2], np.array([0, 3]), "indices must be a numpy array"),
    (np.array([0, 1, 10**6], np.uint32), np.array([0, 3]), "indices has an entry 1000000 >= vocab_size"),
    (np.zeros(4, np.uint32), np.array([0, 4], np.int32), "offsets must have dtype int64"),
    (np.zeros(4, np.uint32), np.zeros(0, np.int64), "offsets must run from 0 to len\\(indices\\)=4, got an empty"),
    (np.zeros(4, np.uint32), np.array([0, 5]), "offsets must run from 0 to len\\(indices\\)=4, got 0..5"),
    (np.zeros(4, np.uint32), np.array([1, 4]), "offsets must run from 0"),
    (np.zeros(4, np.uint32), np.array([0, 3, 1, 4]), "offsets must be non-decreasing"),
    (np.zeros(4, np.uint32), np.array([0, 10**6, 4]), "offsets must be non-decreasing"),
])
def test_bad_job_is_refused(small_model, indices, offsets, message):
    trainer = trainer_for_model(small_model)
    before = small_model.wv.vectors.copy()
    with pytest.raises(ValueError, match=message):
        trainer.train_job(indices, offsets, 0.025, np.random.RandomState(0))
    assert np.array_equal(before, small_model.wv.vectors), "a refused job must train nothing"


def test_bad_rng_is_refused(small_model):
    trainer = trainer_for_model(small_model)
    with pytest.raises(ValueError, match="rng must be a numpy.random.RandomState"):
        trainer.train_job(np.zeros(2, np.uint32), np.array([0, 2]), 0.025, 42)


def _bad(arrays, **changes):
    out = dict(arrays)
    out.update(changes)
    return out


@pytest.mark.parametrize("change, message", [
    (lambda a: _bad(a, syn0=a["syn0"].astype(np.float64)), "syn0 must have dtype float32, got float64"),
    (lambda a: _bad(a, syn0=a["syn0"].ravel()), "syn0 must be 2-dimensional"),
    (lambda a: _bad(a, syn0=np.asfortranarray(a["syn0"])), "syn0 must be C-contiguous"),
    (lambda a: _bad(a, syn1neg=a["syn1neg"][:-1]), "syn1neg must have syn0's shape"),
    (lambda a: _bad(a, syn1=a["syn1"][:, :4].copy()), "syn1 must have syn0's shape"),
    (lambda a: _bad(a, cum_table=a["cum_table"][:-1]), "cum_table must have"),
    (lambda a: _bad(a, cum_table=np.zeros_like(a["cum_table"])), "cum_table must be non-decreasing with a positive"),
    (lambda a: _bad(a, cum_table=a["cum_table"][::-1].copy()), "cum_table must be non-decreasing"),
    (lambda a: _bad(a, sample_int=a["sample_int"][:5]), "sample_int must have"),
    (lambda a: _bad(a, lockf=np.ones(0, np.float32)), "lockf must have at least one element"),
    (lambda a: _bad(a, points=a["points"] + np.uint32(10**6)), "points has an entry"),
    (lambda a: _bad(a, codes=a["codes"][:-1]), "all three must agree"),
    (lambda a: _bad(a, code_offsets=a["code_offsets"][:-1]), "code_offsets must have"),
    (lambda a: _bad(a, syn1neg=None), "negative > 0 needs syn1neg and cum_table"),
    (lambda a: _bad(a, syn1=None), "hs=1 needs syn1"),
])
def test_bad_model_arrays_are_refused(small_model, change, message):
    params, arrays = model_arrays(small_model)
    with pytest.raises(ValueError, match=message):
        JobTrainer(**params, **change(arrays))


def test_read_only_weights_are_refused(small_model):
    params, arrays = model_arrays(small_model)
    frozen = arrays["syn0"].copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="syn0 must be writeable"):
        JobTrainer(**_bad(params, **{}), **_bad(arrays, syn0=frozen))


@pytest.mark.parametrize("params, message", [
    (dict(sg=2), "sg must be 0 or 1"),
    (dict(hs=0, negative=0), "either hs=1 or negative > 0"),
    (dict(window=0), "window must be >= 1"),
    (dict(negative=-1), "negative must be >= 0"),
    (dict(cbow_mean=3), "cbow_mean must be 0 or 1"),
])
def test_bad_parameters_are_refused(small_model, params, message):
    base, arrays = model_arrays(small_model)
    with pytest.raises(ValueError, match=message):
        JobTrainer(**_bad(base, **params), **arrays)


def test_model_without_vocabulary_is_refused():
    with pytest.raises(RuntimeError, match="build vocabulary"):
        trainer_for_model(gensim.models.Word2Vec(vector_size=8))


def test_encoder_matches_dictionary_lookups():
    from gensim_distw2v.core.jobs import encode_sentences

    vocab = {"a": 0, "b": 7, "ü": 3, 5: 2}
    sentences = [["a", "x", "b"], [], ("ü", "a"), ["zz"], iter(["b", 5, "b"])]
    indices, offsets = encode_sentences(sentences, vocab)
    assert indices.dtype == np.uint32 and offsets.dtype == np.int64
    assert indices.tolist() == [0, 7, 3, 0, 7, 2, 7]
    assert offsets.tolist() == [0, 2, 2, 4, 4, 7]
    indices, offsets = encode_sentences([], vocab)
    assert indices.tolist() == [] and offsets.tolist() == [0]
    with pytest.raises(TypeError):
        encode_sentences([[["unhashable"]]], vocab)
