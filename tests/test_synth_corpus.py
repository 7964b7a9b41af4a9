"""The synthetic corpus (``benchmarks/synth_corpus.py``): LineSentence text of the asked size, Zipf's and
Heaps' laws as its model says, the same text for the same seed, its orders, and a truth list that a
model trained on the text scores well on (and a model of shuffled words does not)."""
from collections import Counter

import numpy as np
import pytest

from .benchmark_modules import load
from .corpus_checks import assert_frequencies_follow, assert_linesentence

pytestmark = pytest.mark.system  # (a benchmark's corpus generator, and models trained on its text)

synth_corpus = load("synth_corpus")


def written(tmp_path, words=300_000, order="shuffled", seed=1, **params):
    model = synth_corpus.Model(seed=seed, **params)
    path = str(tmp_path / f"synth-{order}-{seed}.txt")
    tokens, lines, _ = synth_corpus.write(model, path, words, order, block_lines=4000, progress=False)
    return model, path, tokens, lines


def test_words_are_spelled_and_parsed_back():
    ids = np.array([0, 25, 26, 27, 701, 702, 123456789])
    words = synth_corpus.words_of(ids)
    assert words[:6] == ["a", "z", "aa", "ab", "zz", "aaa"]
    assert [synth_corpus._parse(w) for w in words] == ids.tolist()


def test_text_is_linesentence_of_the_asked_size_and_its_lengths(tmp_path):
    model, path, tokens, lines = written(tmp_path)
    assert_linesentence(path, tokens, lines, 300_000)


def test_frequencies_follow_the_model_zipf_and_heaps(tmp_path):
    model, path, tokens, _ = written(tmp_path, words=400_000)
    # distinct words and the most frequent words' counts as the model expects them (Heaps' law comes from the same
    # sum); rank/frequency a power law over the ranks 10..1000 (slope near -1, as text's)
    assert_frequencies_follow(model, path, tokens, synth_corpus.expected_distinct)
    # Heaps: the distinct words grow as a power of the corpus below 1
    small, large = synth_corpus.expected_distinct(model, 1e7), synth_corpus.expected_distinct(model, 1e9)
    beta = np.log(large / small) / np.log(100)
    assert 0.45 < beta < 0.75 and large > 2e6


def test_same_seed_same_text_and_another_seed_another(tmp_path):
    a = open(written(tmp_path, 50_000, seed=3)[1], "rb").read()
    b = open(written(tmp_path / "..", 50_000, seed=3)[1], "rb").read()
    c = open(written(tmp_path, 50_000, seed=4)[1], "rb").read()
    assert a == b and a != c


def test_orders_keep_documents_together(tmp_path):
    """``documents``: a line's topic is mostly its neighbour's; ``topics``: the file runs topic by topic;
    ``shuffled``: neither."""
    def same_topic_share(order):
        model, path, _, _ = written(tmp_path, 100_000, order)
        topics = []
        for line in open(path, encoding="ascii"):
            ids = np.array([synth_corpus._parse(w) for w in line.split()])
            topical = model.topic_of(ids[ids >= model.function_words])
            topics.append(Counter(topical.tolist()).most_common(1)[0][0] if len(topical) else -1)
        topics = np.array(topics)
        return float(np.mean(topics[1:] == topics[:-1])), topics
    shuffled, _ = same_topic_share("shuffled")
    documents, _ = same_topic_share("documents")
    by_topic, topics = same_topic_share("topics")
    assert shuffled < 0.15 and documents > 0.4 and by_topic > 0.4
    # sorted by the documents' topics: the first half of the file holds mostly the lower topics
    half = len(topics) // 2
    assert np.median(topics[:half]) < np.median(topics[half:])


def test_truth_pairs_are_frequent_words_graded_by_their_topics(tmp_path):
    model = synth_corpus.Model(seed=1)
    path = str(tmp_path / "pairs.tsv")
    n, max_rank = synth_corpus.write_pairs(model, path, 12_000_000, n=300)
    rows = [line.split("\t") for line in open(path, encoding="utf-8") if not line.startswith("#")]
    assert len(rows) == n == 300 and max_rank >= 10
    ids = [(synth_corpus._parse(a), synth_corpus._parse(b)) for a, b, _ in rows]
    assert all(a >= model.function_words and b >= model.function_words and a != b for a, b in ids)
    scores = np.array([float(s) for _, _, s in rows])
    assert np.all((scores >= 0) & (scores <= 10))
    # a third in one topic (10), a third in one cluster (high), a third at random (mostly low)
    assert np.all(scores[:100] == pytest.approx(10.0)) and np.mean(scores[100:200]) > np.mean(scores[200:]) + 1.5
    # every word of the list is expected at least 4 x min_count times in that corpus
    assert model.expected_count(np.ravel(ids), 12_000_000).min() >= 20


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_model_trained_on_the_text_finds_the_known_structure(tmp_path):
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    model, path, tokens, _ = written(tmp_path, words=1_000_000)
    pairs = str(tmp_path / "pairs.tsv")
    synth_corpus.write_pairs(model, pairs, tokens, n=300)
    trained = Word2Vec(LineSentence(path), vector_size=32, window=5, min_count=5, sg=0, epochs=2, workers=1, seed=1)
    rho = synth_corpus.score(trained.wv, pairs)
    assert rho > 0.4
    assert synth_corpus.neighbour_precision(model, trained.wv, n_words=50) > 0.1  # chance: 1 in 200 topics
    # the same words with their lines' words shuffled across the corpus: no structure left to find
    words = open(path, encoding="ascii").read().split()
    np.random.default_rng(0).shuffle(words)
    noise = Word2Vec([words[i:i + 15] for i in range(0, len(words), 15)], vector_size=32, window=5, min_count=5,
                     sg=0, epochs=2, workers=1, seed=1)
    assert synth_corpus.score(noise.wv, pairs) < rho - 0.25


def test_roles_mark_lines_and_make_analogies(tmp_path):
    """With roles, a topic's words of rank r play role (r - 1) % roles, lines carry their role's markers,
    the counts follow the model, and the analogy questions are the first words of two topics' two roles."""
    model, path, tokens, _ = written(tmp_path, words=300_000, roles=4, zipf=2.0)
    counts = Counter(open(path, encoding="ascii").read().split())
    markers = [w for role in range(4) for w in synth_corpus.words_of(model.marker_ids(role))]
    assert len(markers) == 4 * model.markers and all(counts[w] > 0 for w in markers)
    expected = model.expected_count([synth_corpus._parse(w) for w in markers], tokens)
    assert sum(counts[w] for w in markers) == pytest.approx(expected.sum(), rel=0.05)
    assert len(counts) == pytest.approx(synth_corpus.expected_distinct(model, tokens), rel=0.05)
    top = [w for w, _ in counts.most_common(30)]
    assert np.array([counts[w] for w in top]) == pytest.approx(
        model.expected_count([synth_corpus._parse(w) for w in top], tokens), rel=0.15)
    # a line's topical words mostly play the line's role, which its markers name
    first_marker = model.function_words - 4 * model.markers
    agree = total = 0
    for line in open(path, encoding="ascii"):
        ids = np.array([synth_corpus._parse(w) for w in line.split()])
        marks = ids[(ids >= first_marker) & (ids < model.function_words)]
        topical = ids[ids >= model.function_words]
        if len(marks) and len(topical):
            role = (marks[0] - first_marker) // model.markers
            agree += int(np.sum(model.role_of(topical)[0] == role))
            total += len(topical)
    assert agree / total > 0.6  # role_focus 0.7, and 0.3 x 1/4 by chance
    a, b, c, d = model.analogies(200, seed=1)
    assert np.all(model.topic_of(a) == model.topic_of(b)) and np.all(model.topic_of(c) == model.topic_of(d))
    assert np.all(model.role_of(a)[0] == model.role_of(c)[0]) and np.all(model.role_of(b)[0] == model.role_of(d)[0])
    assert np.all(model.topic_of(a) != model.topic_of(c)) and np.all(model.role_of(a)[1] == 1)
    path = str(tmp_path / "analogies.txt")
    n = synth_corpus.write_analogies(model, path, n=100)
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[0].startswith(": ") and len(lines) == n + 1 and all(len(x.split()) == 4 for x in lines[1:])
