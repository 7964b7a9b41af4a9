"""The discourse corpus (``benchmarks/discourse_corpus.py``): LineSentence text of the asked size whose
frequencies and vocabulary growth are what its model says, analogies that hold exactly in its latent
space, orders that keep a document's discourse, and a known answer that a model trained on the text
finds (and a model of the same words shuffled does not)."""

import numpy as np
import pytest

from .benchmark_modules import load
from .corpus_checks import assert_frequencies_follow, assert_linesentence

pytestmark = pytest.mark.system  # (a benchmark's corpus generator, and models trained on its text)

discourse_corpus = load("discourse_corpus")
synth_corpus = load("synth_corpus")

SMALL = dict(head=4000, knee=1500, anchors=256, families=4, concepts=12, analogy_ranks=(160, 1200))


def written(tmp_path, words=300_000, order="shuffled", seed=1, **params):
    model = discourse_corpus.Discourse(seed=seed, **{**SMALL, **params})
    path = str(tmp_path / f"disc-{order}-{seed}.txt")
    tokens, lines, _ = discourse_corpus.write(model, path, words, order, block_lines=4000, progress=False)
    return model, path, tokens, lines


def test_text_is_linesentence_of_the_asked_size(tmp_path):
    model, path, tokens, lines = written(tmp_path)
    assert_linesentence(path, tokens, lines, 300_000)


def test_frequencies_and_vocabulary_follow_the_model(tmp_path):
    model, path, tokens, _ = written(tmp_path, words=400_000)
    assert_frequencies_follow(model, path, tokens, discourse_corpus.expected_distinct)


def test_defaults_grow_the_vocabulary_as_heaps_law_says():
    model = discourse_corpus.Discourse(seed=1)
    small, large = discourse_corpus.expected_distinct(model, 1e7), discourse_corpus.expected_distinct(model, 1e9)
    beta = np.log(large / small) / np.log(100)
    assert 0.45 < beta < 0.75 and large > 2e6
    # devmix-sized text: a vocabulary at min_count 5 of devmix's order (44 k)
    assert 30_000 < discourse_corpus.expected_distinct(model, 12e6, 5) < 80_000


def test_analogies_hold_exactly_in_the_latent_space_and_are_frequent_words(tmp_path):
    model = discourse_corpus.Discourse(seed=2, **SMALL)
    a, b, c, d = model.analogies(200, seed=1)
    assert len(a) > 60  # draws of one concept or one form twice are left out
    v = model.vectors
    np.testing.assert_allclose(v[b] - v[a], v[d] - v[c], atol=1e-12)
    assert np.all(a != c) and np.all(a != b)
    path = str(tmp_path / "x.txt")
    open(path, "w").close()
    pairs, questions, max_id = discourse_corpus.write_truth(model, path, 2_000_000, pairs=90, questions=500)
    rows = [line.split() for line in open(tmp_path / "x.analogies.txt") if not line.startswith(":")]
    assert len(rows) == questions > 50
    ids = np.array([[synth_corpus._parse(w) for w in row] for row in rows])
    assert model.expected_count(ids.ravel(), 2_000_000).min() >= 20
    scores = np.array([float(line.split("\t")[2]) for line in open(tmp_path / "x.pairs.tsv") if line[0] != "#"])
    # a third among the 10 nearest, a third among the 100 nearest, a third at random: graded similarity
    assert len(scores) == 90 and scores[:30].mean() > scores[30:60].mean() > scores[60:].mean()


def test_same_seed_same_text_and_another_seed_another(tmp_path):
    a = open(written(tmp_path, 50_000, seed=3)[1], "rb").read()
    b = open(written(tmp_path / "..", 50_000, seed=3)[1], "rb").read()
    c = open(written(tmp_path, 50_000, seed=4)[1], "rb").read()
    assert a == b and a != c


def test_documents_keep_their_discourse_from_line_to_line(tmp_path):
    def neighbour_cosine(order):
        model, path, _, _ = written(tmp_path, 100_000, order)
        unit = model.vectors / np.linalg.norm(model.vectors, axis=1, keepdims=True)
        means = []
        for line in open(path, encoding="ascii"):
            ids = np.array([synth_corpus._parse(w) for w in line.split()])
            ids = ids[(ids >= model.function_words) & (ids < model.head)]
            mean = unit[ids].sum(axis=0)
            means.append(mean / (np.linalg.norm(mean) or 1))
        means = np.array(means)
        return float(np.mean(np.einsum("ij,ij->i", means[1:], means[:-1])))
    shuffled, documents, topics = (neighbour_cosine(order) for order in discourse_corpus.ORDERS)
    assert documents > shuffled + 0.1 and topics > shuffled + 0.1


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="analogy ranks"):
        discourse_corpus.Discourse(analogy_ranks=(10, 50))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_model_trained_on_the_text_finds_the_known_answer(tmp_path):
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    model, path, tokens, _ = written(tmp_path, words=3_000_000)
    discourse_corpus.write_truth(model, path, tokens, pairs=300, questions=1000)
    pairs, analogies = synth_corpus.truth_paths(path)
    trained = Word2Vec(LineSentence(path), vector_size=32, window=5, min_count=5, sg=0, epochs=3, workers=1, seed=1)
    rho, accuracy = synth_corpus.score(trained.wv, pairs), synth_corpus.analogy_score(trained.wv, analogies)
    assert rho > 0.1 and accuracy > 0.2
    # the same words shuffled across the corpus: no answer left to find
    words = open(path, encoding="ascii").read().split()
    np.random.default_rng(0).shuffle(words)
    shuffled = [words[i:i + 15] for i in range(0, len(words), 15)]
    blind = Word2Vec(shuffled, vector_size=32, window=5, min_count=5, sg=0, epochs=3, workers=1, seed=1)
    assert abs(synth_corpus.score(blind.wv, pairs)) < 0.15
    assert synth_corpus.analogy_score(blind.wv, analogies) < accuracy / 3
