"""A corpus that can be made as large as needed, with a known answer.

Writes gensim ``LineSentence`` text (lowercase ``[a-z]+`` tokens, one sentence a line) from a seeded
generative model whose statistics follow real text where they matter to this project, and a list of
word pairs with their true similarity (``word1<TAB>word2<TAB>score``, as ``wordsim353.tsv``) that
scores a trained model as ws353 does (:func:`score`):

* **Zipf frequencies**: half the tokens or so are function words (a Zipf law over a few thousand
  types, ``--function-share``), the rest topical words, each topic's words on a Zipf law of its own
  (``--zipf``) over ``--topic-words`` ranks, so the corpus's rank/frequency curve is Zipf's;
* **Heaps' law**: the topical tails are long, so the distinct words grow with the corpus
  (:func:`expected_distinct` computes how many; the defaults give 246 k distinct words at 12 M tokens,
  51 k of them at ``min_count=5`` (devmix: 124 k and 44 k), and 3.1 M at 1 G tokens, 665 k at
  ``min_count=5``: Heaps' exponent ~0.58);
* **sentence lengths**: log-normal, median ~15 tokens, 3 to 300 (devmix: mean 19);
* **topical co-occurrence**: ``--topics`` topics, grouped into ``--clusters`` clusters, each topic a
  point of a latent space (its cluster's centre plus noise); a document keeps a topic for a
  geometric number of lines, and each line talks about the document's topic or, with
  ``--drift``, about one of its nearest topics in that space; words of close topics share lines;
* **the known answer**: the true similarity of two words is the cosine of their topics' latent
  vectors (1 within a topic, high within a cluster, ~0 across), the structure the text was made
  from; pairs are drawn from words frequent enough to be in a ``min_count=5`` vocabulary, a third
  within a topic, a third within a cluster, a third at random.

``--order`` lays out the lines: ``shuffled`` (every line's document drawn anew: as devmix, whose
lines are shuffled), ``documents`` (documents one after another: as real corpora come) or
``topics`` (documents sorted by topic: the file ordered by subject, the hardest case for a
trainer that reads contiguous ranges).

Streams to disk a block of lines at a time, vectorised with numpy (tens of M tokens a minute):

    python benchmarks/synth_corpus.py --words 100000000 --seed 1 --out /tmp/synth100m.txt
    python benchmarks/synth_corpus.py --words 1e9 --expected-only    # distinct words, without writing
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

#: the letters of a word: ids written in bijective base 26, so frequent (small) ids are short words
ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
MAX_CHARS = 7  # 26 ** 7 > 8e9 ids


class Model:
    """The generative model: topics in a latent space, their words, and how lines are drawn.

    Parameters
    ----------
    seed : int
        Everything structural (topics, their vectors and neighbours) is drawn from it; the text from
        ``seed`` too, in its own stream.
    topics, clusters, dim : int
        Topics, clusters of topics, and the latent space's dimension.
    topic_words : int
        Ranks of each topic's Zipf law (its vocabulary; the tail is what grows with the corpus).
    zipf, offset : float
        Exponent and offset of each topic's Zipf-Mandelbrot law, ``p(r) ~ (r + offset)^-zipf``: the offset
        flattens the head (a topic's first word is not a third of its tokens), the exponent sets the tail.
    function_words : int
        Types of function words (shared by every topic).
    function_zipf : float
        Exponent of the function words' Zipf law.
    function_share : float
        Share of tokens that are function words.
    drift : float
        Share of lines that talk about a near topic rather than the document's own.
    neighbours : int
        How many near topics a line may drift to.
    doc_lines : float
        Mean lines a document (one topic) lasts, with ``order`` ``documents`` or ``topics``.
    spread : float
        A topic vector's distance from its cluster's centre (noise's scale; the centres are unit).
    roles, markers, role_focus, marker_rate : int, int, float, float
        A second, finer structure: a topic's words of rank ``r`` play role ``(r - 1) % roles`` (each role
        its own Zipf law over its share of the ranks); a line has a role, which ``role_focus`` of its
        topical words play (the rest any role), and ``marker_rate`` of its function words are replaced
        by one of the ``markers`` marker words of that role (as a syntactic context marks what a
        word does). A word is then its topic plus its role, so analogies hold between them
        (:meth:`analogies`: the first word of topic 1 role 1 is to topic 1 role 2 as topic 2 role 1
        is to topic 2 role 2), a finer known answer than the topics' similarity. ``roles=1``: none.
    """

    def __init__(self, seed=1, topics=200, clusters=20, dim=32, topic_words=200_000, zipf=1.7, offset=3.0,
                 function_words=3000, function_zipf=1.0, function_share=0.5, drift=0.35, neighbours=8, doc_lines=12.0,
                 spread=0.8, roles=1, markers=20, role_focus=0.7, marker_rate=0.25):
        if not (1 <= clusters <= topics and topic_words >= 100 and function_words >= 10 and 0 <= drift <= 1
                and 0 < function_share < 1 and zipf > 0 and function_zipf > 0 and neighbours >= 1):
            raise ValueError("synthetic corpus: topics >= clusters >= 1, topic_words >= 100, function_words >= 10, "
                             "0 < function_share < 1, 0 <= drift <= 1, zipf > 0, neighbours >= 1")
        self.seed, self.topics, self.clusters, self.dim = seed, topics, clusters, dim
        self.topic_words, self.zipf, self.function_words, self.function_zipf = topic_words, zipf, function_words, \
            function_zipf
        self.offset = offset
        self.function_share, self.drift, self.doc_lines, self.spread = function_share, drift, doc_lines, spread
        if roles < 1 or roles * markers >= function_words or not 0 <= role_focus <= 1 or not 0 <= marker_rate < 1:
            raise ValueError("synthetic corpus: roles >= 1, roles x markers < function_words, 0 <= role_focus <= 1, "
                             "0 <= marker_rate < 1")
        self.roles, self.markers, self.role_focus, self.marker_rate = roles, markers, role_focus, \
            marker_rate if roles > 1 else 0.0
        self.role_words = -(-topic_words // roles)  # the ranks of one role's Zipf law
        rng = np.random.default_rng([seed, 0])
        centres = rng.standard_normal((clusters, dim))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        self.cluster_of = np.arange(topics) % clusters
        vectors = centres[self.cluster_of] + spread / math.sqrt(dim) * rng.standard_normal((topics, dim))
        self.vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        sims = self.vectors @ self.vectors.T
        np.fill_diagonal(sims, -np.inf)
        self.near = np.argsort(-sims, axis=1)[:, :min(neighbours, topics - 1)] if topics > 1 else \
            np.zeros((1, 1), dtype=np.int64)
        # topics are not equally popular: a mild Zipf law over a random order
        weights = 1.0 / np.arange(1, topics + 1) ** 0.5
        self.topic_p = weights[rng.permutation(topics)] / weights.sum()

    def params(self):
        """The model's parameters (for the JSON sidecar)."""
        names = ("seed", "topics", "clusters", "dim", "topic_words", "zipf", "offset", "function_words",
                 "function_zipf", "function_share", "drift", "doc_lines", "spread", "roles", "markers", "role_focus",
                 "marker_rate")
        return {key: getattr(self, key) for key in names}

    # ------------------------------------------------------------------------------------- ids
    def topical_id(self, topic, rank):
        """The id of the word of ``rank`` (1-based) in ``topic``: after the function words, interleaved."""
        return self.function_words + (np.asarray(rank, dtype=np.int64) - 1) * self.topics + topic

    def topic_of(self, ids):
        """Each topical id's topic (-1 for function words)."""
        ids = np.asarray(ids, dtype=np.int64)
        return np.where(ids < self.function_words, -1, (ids - self.function_words) % self.topics)

    def rank_of(self, ids):
        """Each topical id's rank in its topic (0 for function words)."""
        ids = np.asarray(ids, dtype=np.int64)
        return np.where(ids < self.function_words, 0, (ids - self.function_words) // self.topics + 1)

    def role_of(self, ids):
        """Each topical id's role (and its rank within the role, from 1): ``(role, j)``."""
        rank = self.rank_of(ids)
        return (rank - 1) % self.roles, (rank - 1) // self.roles + 1

    def marker_ids(self, role):
        """The marker words of ``role``: the last function words' ids, ``markers`` a role."""
        first = self.function_words - self.roles * self.markers + role * self.markers
        return np.arange(first, first + self.markers) if self.marker_rate else np.array([], dtype=np.int64)

    # ------------------------------------------------------------------------------------- lines
    def lines(self, rng, n, order, state):
        """``n`` lines: ``(ids, lengths)``; ``state`` carries a document across blocks (``documents``)."""
        lengths = np.clip(np.rint(rng.lognormal(math.log(15.0), 0.65, n)), 3, 300).astype(np.int64)
        if order == "shuffled":
            docs = rng.choice(self.topics, size=n, p=self.topic_p)
        else:  # documents of geometric length, one after another; "topics" sorts them afterwards
            docs = np.empty(n, dtype=np.int64)
            at = 0
            while at < n:
                if state.get("left", 0) <= 0:
                    state["topic"] = int(rng.choice(self.topics, p=self.topic_p))
                    state["left"] = int(rng.geometric(1.0 / self.doc_lines))
                take = min(state["left"], n - at)
                docs[at:at + take] = state["topic"]
                at, state["left"] = at + take, state["left"] - take
        drifted = rng.random(n) < self.drift
        line_topic = np.where(drifted, self.near[docs, rng.integers(0, self.near.shape[1], n)], docs)
        if order == "topics":
            keep = np.argsort(docs, kind="stable")
            lengths, line_topic = lengths[keep], line_topic[keep]
        total = int(lengths.sum())
        topic = np.repeat(line_topic, lengths)
        if self.roles == 1:  # (the random stream of the corpora measured before roles existed)
            function = rng.random(total) < self.function_share
            ids = np.where(function, zipf_ranks(rng, total, self.function_words, self.function_zipf) - 1,
                           self.topical_id(topic, zipf_ranks(rng, total, self.topic_words, self.zipf, self.offset)))
            return ids, lengths
        line_role = np.repeat(rng.integers(0, self.roles, len(lengths)), lengths)
        role = np.where(rng.random(total) < self.role_focus, line_role, rng.integers(0, self.roles, total))
        rank = (zipf_ranks(rng, total, self.role_words, self.zipf, self.offset) - 1) * self.roles + role + 1
        rank = np.minimum(rank, self.topic_words)
        function = rng.random(total) < self.function_share
        words = zipf_ranks(rng, total, self.function_words, self.function_zipf) - 1
        if self.marker_rate:  # a share of the function words: a marker of the line's role instead
            marked = rng.random(total) < self.marker_rate
            first = self.function_words - self.roles * self.markers
            words = np.where(marked, first + line_role * self.markers + rng.integers(0, self.markers, total), words)
        ids = np.where(function, words, self.topical_id(topic, rank))
        return ids, lengths

    # ------------------------------------------------------------------------------------- the answer
    def similarity(self, a, b):
        """True similarity of two topical ids: the cosine of their topics' vectors."""
        return np.einsum("ij,ij->i", self.vectors[self.topic_of(a)], self.vectors[self.topic_of(b)])

    def pairs(self, n, min_rank, max_rank, seed):
        """``n`` pairs of topical ids of ranks ``min_rank..max_rank`` and their true similarity: a third in one
        topic, a third in one cluster (another topic), a third at random."""
        rng = np.random.default_rng([self.seed, 1, seed])
        thirds = [n // 3, n // 3, n - 2 * (n // 3)]
        t1 = rng.integers(0, self.topics, n)
        same_cluster = np.array([rng.choice(np.flatnonzero((self.cluster_of == self.cluster_of[t])
                                                           & (np.arange(self.topics) != t)))
                                 if self.topics > self.clusters else t for t in t1[thirds[0]:thirds[0] + thirds[1]]],
                                dtype=np.int64)
        t2 = np.concatenate([t1[:thirds[0]], same_cluster, rng.integers(0, self.topics, thirds[2])])
        r1, r2 = rng.integers(min_rank, max_rank + 1, n), rng.integers(min_rank, max_rank + 1, n)
        same = (t1 == t2) & (r1 == r2)
        r2[same] = np.where(r2[same] < max_rank, r2[same] + 1, r2[same] - 1)
        a, b = self.topical_id(t1, r1), self.topical_id(t2, r2)
        return a, b, self.similarity(a, b)

    def expected_count(self, ids, words):
        """Expected occurrences of each id in a corpus of ``words`` tokens."""
        ids = np.asarray(ids, dtype=np.int64)
        fn = ids < self.function_words
        out = np.empty(ids.shape, dtype=np.float64)
        out[fn] = words * self.function_share * (1 - self.marker_rate) * zipf_p(ids[fn] + 1, self.function_words,
                                                                               self.function_zipf)
        if self.marker_rate:
            first = self.function_words - self.roles * self.markers
            out[fn & (ids >= first)] += words * self.function_share * self.marker_rate / (self.roles * self.markers)
        topical = self.topic_of(ids[~fn])
        line_p = (1 - self.drift) * self.topic_p + self.drift * drift_p(self)
        _, j = self.role_of(ids[~fn])
        out[~fn] = words * (1 - self.function_share) * line_p[topical] / self.roles * \
            zipf_p(j, self.role_words, self.zipf, self.offset)
        return out

    def analogies(self, n, seed):
        """``n`` analogy questions ``(a, b, c, d)`` of topical ids: the first words of (topic 1, role 1), (topic 1,
        role 2), (topic 2, role 1), (topic 2, role 2), topics and roles drawn at random."""
        rng = np.random.default_rng([self.seed, 3, seed])
        t1, t2 = rng.integers(0, self.topics, n), rng.integers(0, self.topics, n)
        r1, r2 = rng.integers(0, self.roles, n), rng.integers(0, self.roles, n)
        keep = (t1 != t2) & (r1 != r2)
        t1, t2, r1, r2 = t1[keep], t2[keep], r1[keep], r2[keep]
        return [self.topical_id(t, r + 1) for t, r in ((t1, r1), (t1, r2), (t2, r1), (t2, r2))]


def drift_p(model):
    """Each topic's share of the drifted lines: the documents' topics' mass spread over their neighbours."""
    out = np.zeros(model.topics)
    np.add.at(out, model.near.ravel(), np.repeat(model.topic_p / model.near.shape[1], model.near.shape[1]))
    return out


def _harmonic(n, a, q=0.0):
    """``sum_{r=1..n} (r + q)^-a``, exact for the first 10,000 terms, by the integral beyond."""
    head = min(n, 10_000)
    total = float(np.sum((np.arange(1, head + 1, dtype=np.float64) + q) ** -a))
    if n > head:
        lo, hi = head + 0.5 + q, n + 0.5 + q
        total += math.log(hi / lo) if abs(a - 1) < 1e-12 else (hi ** (1 - a) - lo ** (1 - a)) / (1 - a)
    return total


def zipf_p(ranks, n, a, q=0.0):
    """Probability of each rank (1..n) under a Zipf-Mandelbrot law ``(r + q)^-a`` (the sampler's, nearly)."""
    return (np.asarray(ranks, dtype=np.float64) + q) ** -a / _harmonic(n, a, q)


def zipf_ranks(rng, size, n, a, q=0.0):
    """``size`` ranks in ``1..n``, P(r) ~ (r + q)^-a: the first ranks exactly (a table), the tail by
    inverting the continuous law's CDF; vectorised."""
    head = min(n, 1024)
    w = (np.arange(1, head + 1, dtype=np.float64) + q) ** -a
    total = _harmonic(n, a, q)
    head_mass = w.sum() / total
    u = rng.random(size)
    out = np.empty(size, dtype=np.int64)
    in_head = u < head_mass
    cdf = np.cumsum(w) / total
    out[in_head] = np.minimum(np.searchsorted(cdf, u[in_head], side="right") + 1, head)
    if n > head:  # the tail: r + q in (head + 0.5 + q, n + 0.5 + q] by the continuous CDF, rounded
        v = (u[~in_head] - head_mass) / max(1e-300, 1 - head_mass)
        lo, hi = head + 0.5 + q, n + 0.5 + q
        if abs(a - 1) < 1e-12:
            x = lo * (hi / lo) ** v
        else:
            x = (lo ** (1 - a) + v * (hi ** (1 - a) - lo ** (1 - a))) ** (1 / (1 - a))
        out[~in_head] = np.clip(np.rint(x - q), head + 1, n).astype(np.int64)
    else:
        out[~in_head] = n
    return out


def words_of(ids):
    """Each id's word: bijective base 26 (0 -> ``a``, 25 -> ``z``, 26 -> ``aa``, ...), as a list of str."""
    return [b.decode() for b in _spell(np.asarray(ids, dtype=np.int64))]


def _spell(ids):
    """Bytes of each id's word (see :func:`words_of`)."""
    chars, lengths = _letters(ids)
    return [bytes(chars[i, MAX_CHARS - n:]) for i, n in enumerate(lengths)]


def _letters(ids):
    """``(letters, lengths)``: each id's letters right-aligned in a ``(n, MAX_CHARS)`` uint8 array."""
    n = ids + 1
    chars = np.zeros((len(ids), MAX_CHARS), dtype=np.uint8)
    lengths = np.zeros(len(ids), dtype=np.int64)
    for pos in range(MAX_CHARS - 1, -1, -1):
        live = n > 0
        if not live.any():
            break
        n = np.where(live, n - 1, 0)
        chars[:, pos] = np.where(live, ALPHABET[n % 26], 0)
        lengths += live
        n //= 26
    return chars, lengths


def render(ids, lengths):
    """The lines' text as bytes: tokens separated by spaces, lines ended by newlines (vectorised)."""
    chars, word_len = _letters(ids)
    starts = np.zeros(len(ids), dtype=np.int64)
    np.cumsum(word_len[:-1] + 1, out=starts[1:])
    out = np.empty(int(word_len.sum() + len(ids)), dtype=np.uint8)
    for pos in range(MAX_CHARS):  # letter pos of every word at least that long (right-aligned in chars)
        has = word_len > pos
        out[starts[has] + pos] = chars[has, MAX_CHARS - word_len[has] + pos]
    ends = starts + word_len
    out[ends] = ord(" ")
    out[ends[np.cumsum(lengths) - 1]] = ord("\n")
    return out.tobytes()


def expected_seen(means, min_count=1):
    """How many of the words with these expected counts are seen at least ``min_count`` times (Poisson)."""
    if min_count <= 1:
        return float(np.sum(-np.expm1(-means)))
    # P(X >= m) for Poisson(mean): 1 - sum_{j<m} e^-mean mean^j / j!
    total = np.zeros_like(means)
    term = np.exp(-means)
    for j in range(min_count):
        total += term
        term = term * means / (j + 1)
    return float(np.sum(np.clip(1 - total, 0, 1)))


def expected_distinct(model, words, min_count=1):
    """Expected distinct words (``min_count=1``), or words seen at least ``min_count`` times (Poisson
    approximation), in a corpus of ``words`` tokens."""
    def seen(means):
        return expected_seen(means, min_count)
    ranks = np.arange(1, model.function_words + 1)
    out = seen(model.expected_count(ranks - 1, words))
    line_p = (1 - model.drift) * model.topic_p + model.drift * drift_p(model)
    step = 200_000
    for lo in range(1, model.role_words + 1, step):  # a role's ranks: every role alike
        rank_p = zipf_p(np.arange(lo, min(lo + step, model.role_words + 1)), model.role_words, model.zipf,
                        model.offset) / model.roles
        out += model.roles * seen(words * (1 - model.function_share) * np.outer(line_p, rank_p))
    return out


def write(model, path, words, order="shuffled", block_lines=50_000, progress=True, stream=2):
    """Write ``words`` tokens (whole lines: a little over) to ``path``, ``model.lines`` a block at a time, from the
    random stream ``[model.seed, stream, order]``; returns ``(tokens, lines, seconds)``."""
    rng = np.random.default_rng([model.seed, stream, {"shuffled": 0, "documents": 1, "topics": 2}[order]])
    state, tokens, lines, began, told = {}, 0, 0, time.perf_counter(), 0.0
    with open(path, "wb") as fout:
        while tokens < words:
            ids, lengths = model.lines(rng, block_lines, order, state)
            if tokens + len(ids) > words:  # the last block: just enough whole lines
                keep = int(np.searchsorted(np.cumsum(lengths), words - tokens) + 1)
                lengths = lengths[:keep]
                ids = ids[:int(lengths.sum())]
            fout.write(render(ids, lengths))
            tokens, lines = tokens + len(ids), lines + len(lengths)
            now = time.perf_counter()
            if progress and now - told > 10:
                told = now
                print(f"  {tokens / 1e6:.0f} M tokens, {tokens / (now - began) * 60 / 1e6:.0f} M a minute",
                      file=sys.stderr, flush=True)
    return tokens, lines, time.perf_counter() - began


def write_pairs(model, path, words, n=400, min_count=5, seed=1):
    """The truth list (``word1<TAB>word2<TAB>score``) for a corpus of ``words`` tokens: pairs of words
    whose expected count is at least 4 x ``min_count``; returns how many."""
    # the largest rank every topic's word is expected often enough at
    worst = model.topic_p.min() * (1 - model.drift)
    j = np.arange(1, model.role_words + 1)
    counts = words * (1 - model.function_share) * worst / model.roles * zipf_p(j, model.role_words, model.zipf,
                                                                              model.offset)
    max_rank = int(max(2, np.searchsorted(-counts, -4 * min_count) * model.roles))
    a, b, sim = model.pairs(n, 1, max_rank, seed)
    with open(path, "w", encoding="utf-8") as fout:
        fout.write("# synthetic truth: cosine of the topics' latent vectors\n")
        for x, y, s in zip(words_of(a), words_of(b), sim):
            fout.write(f"{x}\t{y}\t{10 * (s + 1) / 2:.4f}\n")
    return n, max_rank


def write_analogies(model, path, n=2000, seed=1):
    """The analogy questions (gensim's ``questions-words.txt`` format, one section); returns how many."""
    a, b, c, d = (words_of(x) for x in model.analogies(n, seed))
    with open(path, "w", encoding="utf-8") as fout:
        fout.write(": synthetic-topic-role\n")
        for row in zip(a, b, c, d):
            fout.write(" ".join(row) + "\n")
    return len(a)


def analogy_score(wv, path):
    """Accuracy on the analogy questions (as gensim's ``evaluate_word_analogies`` scores them)."""
    return wv.evaluate_word_analogies(path, restrict_vocab=10 ** 9)[0]


def truth_paths(corpus_path):
    """The truth list's and the analogies' paths beside a corpus written by this script."""
    base = os.path.splitext(corpus_path)[0]
    return base + ".pairs.tsv", base + ".analogies.txt"


def score(wv, pairs_path):
    """Spearman correlation of a model's cosine similarities with the truth list (as gensim's
    ``evaluate_word_pairs`` scores ws353); the pairs' words not in the model are left out."""
    return wv.evaluate_word_pairs(pairs_path, delimiter="\t", restrict_vocab=10 ** 9)[1][0]


def neighbour_precision(model, wv, n_words=300, topn=10, seed=1):
    """Of the top-``topn`` neighbours of ``n_words`` frequent topical words, the share in the word's own
    topic: a second, coarser score of the known structure."""
    rng = np.random.default_rng(seed)
    keys = [k for k in wv.index_to_key[:50_000]]
    ids = np.array([_parse(k) for k in keys], dtype=np.int64)
    topical = [(k, i) for k, i in zip(keys, ids) if i >= model.function_words]
    pick = rng.choice(len(topical), size=min(n_words, len(topical)), replace=False)
    hits = total = 0
    for j in pick:
        key, i = topical[j]
        near = [_parse(k) for k, _ in wv.most_similar(key, topn=topn, restrict_vocab=50_000)]
        hits += sum(1 for x in near if x >= model.function_words and model.topic_of([x])[0] == model.topic_of([i])[0])
        total += topn
    return hits / max(1, total)


def _parse(word):
    """A word's id (the inverse of :func:`words_of`)."""
    n = 0
    for ch in word:
        n = n * 26 + (ord(ch) - 96)
    return n - 1


def corpus_parser(doc):
    """An argument parser with the options every synthetic corpus's script takes (``--words``, ``--seed``,
    ``--out``, ``--order``, ``--pairs``, ``--expected-only``); :func:`checked` checks them once parsed."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--words", type=float, required=True, help="tokens to write (e.g. 1e8)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="the corpus file; its truth list (.pairs.tsv), analogies (.analogies.txt, if "
                                      "the model has them) and parameters (.json) are written beside it")
    parser.add_argument("--order", default="shuffled", choices=("shuffled", "documents", "topics"))
    parser.add_argument("--pairs", type=int, default=400, help="pairs in the truth list")
    parser.add_argument("--expected-only", action="store_true",
                        help="write nothing: print the expected distinct words (and at min_count 5)")
    return parser


def checked(parser, argv=None):
    """``parser``'s arguments, the common ones checked."""
    args = parser.parse_args(argv)
    if not args.expected_only and not args.out:
        parser.error("--out is required (unless --expected-only)")
    if args.words < 1000:
        parser.error("--words must be at least 1000")
    return args


def expected_only(model, words, expected=None):
    """The JSON line ``--expected-only`` prints: distinct words expected in ``words`` tokens, and at min_count 5
    (by ``expected``, a script's ``expected_distinct``; this one's by default)."""
    expected = expected or expected_distinct
    return json.dumps({"words": words, "distinct": expected(model, words), "min_count_5": expected(model, words, 5)})


def parse_args(argv=None):
    parser = corpus_parser(__doc__)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--topic-words", type=int, default=200_000, help="ranks of each topic's Zipf law")
    parser.add_argument("--zipf", type=float, default=1.7, help="exponent of each topic's Zipf law")
    parser.add_argument("--offset", type=float, default=3.0, help="offset of each topic's Zipf-Mandelbrot law")
    parser.add_argument("--function-share", type=float, default=0.5)
    parser.add_argument("--drift", type=float, default=0.35)
    parser.add_argument("--roles", type=int, default=1,
                        help="roles of a topic's words (default 1: none, no analogies; e.g. 8 with --zipf 2.0)")
    return checked(parser, argv)


def model_of(args):
    """The :class:`Model` of the command line."""
    return Model(seed=args.seed, topics=args.topics, clusters=args.clusters, topic_words=args.topic_words,
                 zipf=args.zipf, offset=args.offset, function_share=args.function_share, drift=args.drift,
                 roles=args.roles)


def main(argv=None):
    args = parse_args(argv)
    model = model_of(args)
    words = int(args.words)
    if args.expected_only:
        print(expected_only(model, words))
        return
    tokens, lines, seconds = write(model, args.out, words, args.order)
    base = os.path.splitext(args.out)[0]
    pairs_path, analogies_path = truth_paths(args.out)
    n, max_rank = write_pairs(model, pairs_path, tokens, args.pairs, seed=args.seed)
    questions = write_analogies(model, analogies_path, seed=args.seed) if model.roles > 1 else 0
    meta = {"tokens": tokens, "lines": lines, "seconds": seconds, "order": args.order, "pairs": n,
            "analogies": questions,
            "pair_max_rank": max_rank, "expected_distinct": expected_distinct(model, tokens),
            "expected_min_count_5": expected_distinct(model, tokens, 5), "model": model.params()}
    with open(base + ".json", "w", encoding="utf-8") as fout:
        json.dump(meta, fout, indent=1)
    print(f"wrote {args.out}: {tokens:,} tokens, {lines:,} lines in {seconds:.0f} s "
          f"({tokens / seconds * 60 / 1e6:.0f} M tokens a minute); expected distinct words "
          f"{meta['expected_distinct']:,.0f} ({meta['expected_min_count_5']:,.0f} at min_count 5); truth list "
          f"{pairs_path} ({n} pairs of ranks 1-{max_rank}); "
          + (f"analogies {analogies_path} ({questions})" if questions else "no analogies (--roles 1)"))


if __name__ == "__main__":
    main()
