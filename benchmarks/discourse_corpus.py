"""A corpus with a known answer at the words' grain: text drawn from a drifting discourse vector.

``synth_corpus.py``'s answer is coarse (two words are alike as far as their topics are), and a model
keeps topics apart long after it has lost the finer geometry that analogies read, so on it the merge
interval cost nothing measurable where on devmix it cost points. This generator follows the
log-linear "random walk on discourse" model of text (Arora, Li, Liang, Ma, Risteski, TACL 2016,
"A latent variable model approach to PMI-based word embeddings"), under which word2vec's objective
recovers the words' latent vectors (PMI of two words ~ their vectors' inner product):

* every word of the head (the ``--head`` most frequent ranks) has its **own latent vector**
  ``v_w`` in ``--dim`` dimensions; the first ``--function-words`` ranks have short vectors
  (they go with every context, as function words do);
* a line is spoken from a **discourse vector** ``c`` (a unit vector); a word of the head is drawn
  with ``P(w | c) ~ f(w) exp(beta <v_w, c>)``, ``f`` the base frequency; ``beta`` is set so that a
  word's log-odds across discourses have the standard deviation ``--contrast``. Discourses are
  ``--anchors`` points of the sphere (the sampler's tables); a line's discourse is one of them,
  drawn afresh for every line (``--order shuffled``, as devmix's lines are shuffled), or a
  document's discourse drifts line by line (``documents``: a random walk on the sphere, each line at
  its nearest anchor) and documents come one after another, or sorted by their first discourse
  (``topics``: the file ordered by subject);
* **analogies are built in**: ``--families`` families of ``--concepts`` concepts in ``--forms``
  forms (as countries and capitals, or a verb's tenses); word ``(family, concept, form)`` has the
  vector ``u(family, concept) + t(family, form)``, so ``a:b :: c:d`` holds exactly in the latent
  space between the forms of two concepts. The family's words sit at ranks spread log-uniformly
  over ``--analogy-ranks`` (real analogy words are mid-frequency words);
* the **tail** beyond the head (words too rare to have a usable vector) follows a steeper Zipf law
  of the base law, unconditioned by the discourse: the base law is Zipf's (exponent 1) to rank
  ``knee`` and steeper beyond, which makes the vocabulary grow with the corpus as Heaps' law says
  (:func:`expected_distinct`);
* sentence lengths as ``synth_corpus.py``'s (log-normal, median 15).

(``head``, ``anchors``, ``forms``, ``analogy_ranks``, ``function_words``: parameters of
:class:`Discourse`; the command line sets ``--dim``, ``--contrast``, ``--families``, ``--concepts``,
``--tail-zipf``.) Limits: the sampler's tables are float32, so an (anchor, word) cell below about
1e-7 of its anchor's mass is never drawn; with ``documents`` or ``topics`` the anchors are not
equally likely (each takes the share of the sphere nearest it), which :meth:`Discourse.expected_count`
leaves out.

Beside the corpus it writes the analogy questions (``.analogies.txt``, gensim's
``questions-words.txt`` format) and a truth list of word pairs (``.pairs.tsv``: the cosine of the
two words' latent vectors; a third of the pairs among a word's 10 nearest, a third among its 100
nearest, a third at random), so ``clustersim.py --pairs`` and ``quality_law.py --generator discourse``
score a model on them as on real benchmarks. Streams a block of lines at a time, vectorised:

    python benchmarks/discourse_corpus.py --words 12e6 --seed 1 --out /tmp/disc/synth-12000000.txt
    python benchmarks/discourse_corpus.py --words 1e9 --expected-only
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synth_corpus  # noqa: E402 - a sibling module
from synth_corpus import expected_seen, truth_paths, words_of  # noqa: E402

ORDERS = ("shuffled", "documents", "topics")


class Discourse:
    """The generative model: the words' latent vectors, the discourses, the base frequencies.

    Parameters
    ----------
    seed : int
        The model's structure (vectors, anchors, which ranks are analogy words) and, in a stream of its
        own, the text.
    dim : int
        Dimension of the latent space.
    head : int
        Ranks whose words have latent vectors (the rest: the tail).
    ranks : int
        Ranks in all (the vocabulary's bound).
    zipf, offset : float
        The Zipf-Mandelbrot law ``(r + offset)^-zipf`` of the ranks up to ``knee``.
    knee, tail_zipf : int, float
        Beyond rank ``knee`` the law is a steeper power, ``tail_zipf`` (continuous at the knee): with the
        defaults, Heaps' law as ``synth_corpus.py``'s.
    function_words : int
        The first ranks: short latent vectors (``function_norm``).
    function_norm : float
        Their vectors' length relative to a content word's.
    contrast : float
        Standard deviation of a content word's log-odds across discourses (``beta`` follows from it).
    anchors : int
        Discourses the sampler has tables for.
    families, concepts, forms : int
        The analogy words' structure.
    analogy_ranks : tuple of int
        Ranks ``(lo, hi)`` the analogy words are spread over (log-uniformly).
    step : float
        A document's discourse moves by ``step`` (a random unit vector's share) from line to line.
    doc_lines : float
        Mean lines of a document (``documents``, ``topics``).
    """

    def __init__(self, seed=1, dim=30, head=20_000, ranks=80_000_000, zipf=1.0, offset=2.7, knee=3000, tail_zipf=1.7,
                 function_words=150, function_norm=0.25, contrast=1.6, anchors=1024, families=12, concepts=40,
                 forms=2, analogy_ranks=(300, 12_000), step=0.35, doc_lines=12.0):
        lo, hi = analogy_ranks
        if not (2 <= dim and 100 <= head < ranks and 1 <= knee <= head and function_words < lo < hi <= head
                and anchors >= 2
                and families * concepts * forms <= (hi - lo) // 2 and forms >= 2 and concepts >= 2 and contrast > 0
                and zipf > 0 and tail_zipf > 1 and 0 <= step and doc_lines >= 1):
            raise ValueError("discourse corpus: dim >= 2, 100 <= head < ranks, function_words < analogy ranks <= head, "
                             "families x concepts x forms <= half the analogy ranks, forms >= 2, concepts >= 2, "
                             "contrast > 0, tail_zipf > 1")
        self.seed, self.dim, self.head, self.ranks = seed, dim, head, ranks
        self.zipf, self.offset, self.knee, self.tail_zipf = zipf, offset, knee, tail_zipf
        self.function_words, self.function_norm, self.contrast = function_words, function_norm, contrast
        self.n_anchors, self.families, self.concepts, self.forms = anchors, families, concepts, forms
        self.analogy_ranks, self.step, self.doc_lines = (lo, hi), step, doc_lines
        rng = np.random.default_rng([seed, 10])
        # the head's latent vectors: content words ~ N(0, I/dim) (length ~1), function words shorter
        vectors = rng.standard_normal((head, dim)) / math.sqrt(dim)
        vectors[:function_words] *= function_norm
        # the analogy words: u(family, concept) + t(family, form), each part of length ~1/sqrt(2)
        n = families * concepts * forms
        picks = np.unique(np.rint(np.exp(rng.uniform(math.log(lo), math.log(hi), 4 * n))).astype(np.int64))
        picks = rng.permutation(picks)[:n]
        if len(picks) < n:
            raise ValueError("discourse corpus: too few distinct ranks for the analogy words; widen analogy_ranks")
        self.analogy_ids = picks.reshape(families, concepts, forms) - 1  # ids: rank - 1
        u = rng.standard_normal((families, concepts, 1, dim)) / math.sqrt(2 * dim)
        t = rng.standard_normal((families, 1, forms, dim)) / math.sqrt(2 * dim)
        vectors[self.analogy_ids] = u + t
        self.vectors = vectors
        anchor = rng.standard_normal((anchors, dim))
        self.anchors = anchor / np.linalg.norm(anchor, axis=1, keepdims=True)
        # beta: a content word's log-odds <v, c> beta has standard deviation ~ beta / sqrt(dim)
        self.beta = contrast * math.sqrt(dim)
        self.base = self.frequencies(np.arange(1, head + 1))
        logits = self.beta * (self.anchors @ vectors.T) + np.log(self.base)[None, :]
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        self.head_given_anchor = p  # P(head word | anchor, head)
        self.cdf = np.cumsum(p, axis=1).astype(np.float32)
        self.cdf[:, -1] = 1.0
        total = self._tail_mass() + self.base.sum()
        self.head_mass = float(self.base.sum() / total)
        self._norm = total

    # ------------------------------------------------------------------------------------- frequencies
    def frequencies(self, ranks):
        """Unnormalised base frequency of each rank: Zipf-Mandelbrot to the knee, a steeper power beyond."""
        r = np.asarray(ranks, dtype=np.float64)
        at = (self.knee + self.offset) ** -self.zipf
        return np.where(r <= self.knee, (r + self.offset) ** -self.zipf,
                        at * ((r + self.offset) / (self.knee + self.offset)) ** -self.tail_zipf)

    def _tail_mass(self):
        """The tail's unnormalised mass (ranks ``head + 1 .. ranks``, by the integral)."""
        a, q = self.tail_zipf, self.offset
        at = (self.knee + q) ** -self.zipf * (self.knee + q) ** a
        lo, hi = self.head + 0.5 + q, self.ranks + 0.5 + q
        return at * (lo ** (1 - a) - hi ** (1 - a)) / (a - 1)

    def tail_ranks(self, rng, size):
        """``size`` ranks of the tail, by inverting its continuous law."""
        a, q = self.tail_zipf, self.offset
        lo, hi = self.head + 0.5 + q, self.ranks + 0.5 + q
        x = (lo ** (1 - a) + rng.random(size) * (hi ** (1 - a) - lo ** (1 - a))) ** (1 / (1 - a))
        return np.clip(np.rint(x - q), self.head + 1, self.ranks).astype(np.int64)

    def expected_count(self, ids, words):
        """Expected occurrences of each id in a corpus of ``words`` tokens (every anchor alike)."""
        ids = np.asarray(ids, dtype=np.int64)
        out = words * self.frequencies(ids + 1) / self._norm
        head = ids < self.head
        out[head] = words * self.head_mass * self.head_given_anchor[:, ids[head]].mean(axis=0)
        return out

    def params(self):
        """The model's parameters (for the JSON sidecar)."""
        names = ("seed", "dim", "head", "ranks", "zipf", "offset", "knee", "tail_zipf", "function_words",
                 "function_norm", "contrast", "n_anchors", "families", "concepts", "forms", "analogy_ranks", "step",
                 "doc_lines", "beta", "head_mass")
        return {key: getattr(self, key) for key in names}

    # ------------------------------------------------------------------------------------- lines
    def discourses(self, rng, n, order, state):
        """Each of ``n`` lines' anchor; ``state`` carries a document across blocks."""
        if order == "shuffled":
            return rng.integers(0, self.n_anchors, n)
        out = np.empty(n, dtype=np.int64)
        first = np.empty(n, dtype=np.int64)  # a document's first anchor (``topics`` sorts by it)
        at = 0
        while at < n:
            if state.get("left", 0) <= 0:
                c = rng.standard_normal(self.dim)
                state.update(c=c / np.linalg.norm(c), left=int(rng.geometric(1.0 / self.doc_lines)), first=None)
            take = min(state["left"], n - at)
            # the walk: c += step * (a random unit vector), renormalised, line by line
            noise = rng.standard_normal((take, self.dim))
            noise *= self.step / np.linalg.norm(noise, axis=1, keepdims=True)
            c = state["c"]
            walk = np.empty((take, self.dim))
            for i in range(take):
                c = c + noise[i]
                c /= np.linalg.norm(c)
                walk[i] = c
            state["c"] = c
            out[at:at + take] = np.argmax(walk @ self.anchors.T, axis=1)
            if state["first"] is None:
                state["first"] = int(out[at])
            first[at:at + take] = state["first"]
            at, state["left"] = at + take, state["left"] - take
        if order == "topics":
            state["sort_key"] = first
        return out

    def lines(self, rng, n, order, state):
        """``n`` lines: ``(ids, lengths)``."""
        lengths = np.clip(np.rint(rng.lognormal(math.log(15.0), 0.65, n)), 3, 300).astype(np.int64)
        anchor = self.discourses(rng, n, order, state)
        if order == "topics":
            keep = np.argsort(state.pop("sort_key"), kind="stable")
            lengths, anchor = lengths[keep], anchor[keep]
        total = int(lengths.sum())
        token_anchor = np.repeat(anchor, lengths)
        ids = np.empty(total, dtype=np.int64)
        in_head = rng.random(total) < self.head_mass
        tail = ~in_head
        ids[tail] = self.tail_ranks(rng, int(tail.sum())) - 1
        where = np.flatnonzero(in_head)
        by_anchor = token_anchor[where]
        order_ = np.argsort(by_anchor, kind="stable")
        where, by_anchor = where[order_], by_anchor[order_]
        bounds = np.searchsorted(by_anchor, np.arange(self.n_anchors + 1))
        u = rng.random(len(where)).astype(np.float32)  # (rounds to 1.0 once in ~3e7: clipped below)
        for j in range(self.n_anchors):
            lo, hi = bounds[j], bounds[j + 1]
            if hi > lo:
                ids[where[lo:hi]] = np.minimum(np.searchsorted(self.cdf[j], u[lo:hi], side="right"), self.head - 1)
        np.minimum(ids, self.ranks - 1, out=ids)
        return ids, lengths

    # ------------------------------------------------------------------------------------- the answer
    def similarity(self, a, b):
        """True similarity of two head ids: the cosine of their latent vectors."""
        va, vb = self.vectors[a], self.vectors[b]
        return np.einsum("ij,ij->i", va, vb) / (np.linalg.norm(va, axis=1) * np.linalg.norm(vb, axis=1))

    def analogies(self, n, seed):
        """Questions ``(a, b, c, d)``: forms ``i, j`` of concepts ``x, y`` of a family, from ``n`` draws (those of one
        concept or one form twice left out: about half)."""
        rng = np.random.default_rng([self.seed, 13, seed])
        f = rng.integers(0, self.families, n)
        x, y = rng.integers(0, self.concepts, n), rng.integers(0, self.concepts, n)
        i, j = rng.integers(0, self.forms, n), rng.integers(0, self.forms, n)
        keep = (x != y) & (i != j)
        f, x, y, i, j = f[keep], x[keep], y[keep], i[keep], j[keep]
        ids = self.analogy_ids
        return ids[f, x, i], ids[f, x, j], ids[f, y, i], ids[f, y, j]

    def pairs(self, n, max_id, seed):
        """``n`` pairs of content ids below ``max_id`` and their true similarity: a third among a word's 10
        nearest (in the latent space, of the ids below ``max_id``), a third among its 100 nearest, a third at
        random."""
        rng = np.random.default_rng([self.seed, 11, seed])
        pool = np.arange(self.function_words, max_id)
        a = rng.choice(pool, size=n, replace=False if n <= len(pool) else True)
        unit = self.vectors[pool] / np.linalg.norm(self.vectors[pool], axis=1, keepdims=True)
        sims = unit[a - self.function_words] @ unit.T
        sims[np.arange(n), a - self.function_words] = -np.inf
        near = np.argsort(-sims, axis=1)[:, :100]
        third = n // 3
        rows = np.arange(2 * third)
        pick = near[rows, np.where(rows < third, rng.integers(0, 10, 2 * third), rng.integers(0, 100, 2 * third))]
        b = np.concatenate([pool[pick], rng.choice(pool, size=n - 2 * third)])
        same = a == b
        b[same] = np.where(b[same] + 1 < max_id, b[same] + 1, b[same] - 1)
        return a, b, self.similarity(a, b)


def expected_distinct(model, words, min_count=1):
    """Expected distinct words (``min_count=1``), or words seen at least ``min_count`` times (Poisson
    approximation), in a corpus of ``words`` tokens."""
    out, step = 0.0, 1_000_000
    for lo in range(0, model.ranks, step):
        means = model.expected_count(np.arange(lo, min(lo + step, model.ranks)), words)
        out += expected_seen(means, min_count)
        if means[0] < 1e-9:
            break
    return out


def write(model, path, words, order="shuffled", block_lines=50_000, progress=True):
    """Write ``words`` tokens (whole lines: a little over) to ``path``; returns ``(tokens, lines, seconds)``."""
    return synth_corpus.write(model, path, words, order, block_lines, progress, stream=12)


def write_truth(model, corpus_path, words, pairs=400, questions=4000, min_count=5, seed=1):
    """The truth list and the analogies beside ``corpus_path`` for a corpus of ``words`` tokens: pairs of
    words expected at least 4 x ``min_count`` times; questions whose four words are expected that often.
    Returns ``(pairs, questions, max_id)``."""
    counts = model.expected_count(np.arange(model.head), words)
    often = counts >= 4 * min_count
    max_id = int(np.argmin(often)) if not often.all() else model.head
    max_id = max(max_id, model.function_words + 200)
    a, b, sim = model.pairs(pairs, max_id, seed)
    pairs_path, analogies_path = truth_paths(corpus_path)
    with open(pairs_path, "w", encoding="utf-8") as fout:
        fout.write("# synthetic truth: cosine of the words' latent vectors (discourse_corpus.py)\n")
        for x, y, s in zip(words_of(a), words_of(b), sim):
            fout.write(f"{x}\t{y}\t{10 * (s + 1) / 2:.4f}\n")
    qa, qb, qc, qd = model.analogies(questions, seed)
    keep = often[qa] & often[qb] & often[qc] & often[qd]
    rows = list(zip(*(words_of(x[keep]) for x in (qa, qb, qc, qd))))
    with open(analogies_path, "w", encoding="utf-8") as fout:
        fout.write(": synthetic-discourse-forms\n")
        for row in rows:
            fout.write(" ".join(row) + "\n")
    return pairs, len(rows), max_id


def parse_args(argv=None):
    parser = synth_corpus.corpus_parser(__doc__)
    parser.add_argument("--dim", type=int, default=30)
    parser.add_argument("--contrast", type=float, default=1.6, help="std of a word's log-odds across discourses")
    parser.add_argument("--families", type=int, default=12)
    parser.add_argument("--concepts", type=int, default=40)
    parser.add_argument("--tail-zipf", type=float, default=1.7)
    return synth_corpus.checked(parser, argv)


def model_of(args):
    """The :class:`Discourse` of the command line."""
    return Discourse(seed=args.seed, dim=args.dim, contrast=args.contrast, families=args.families,
                     concepts=args.concepts, tail_zipf=args.tail_zipf)


def main(argv=None):
    args = parse_args(argv)
    model = model_of(args)
    words = int(args.words)
    if args.expected_only:
        print(synth_corpus.expected_only(model, words, expected_distinct))
        return
    tokens, lines, seconds = write(model, args.out, words, args.order)
    n, questions, max_id = write_truth(model, args.out, tokens, args.pairs, seed=args.seed)
    meta = {"generator": "discourse", "tokens": tokens, "lines": lines, "seconds": seconds, "order": args.order,
            "pairs": n, "analogies": questions, "pair_max_id": max_id,
            "expected_distinct": expected_distinct(model, tokens),
            "expected_min_count_5": expected_distinct(model, tokens, 5), "model": model.params()}
    with open(os.path.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as fout:
        json.dump(meta, fout, indent=1)
    print(f"wrote {args.out}: {tokens:,} tokens, {lines:,} lines in {seconds:.0f} s "
          f"({tokens / seconds * 60 / 1e6:.0f} M tokens a minute); expected distinct words "
          f"{meta['expected_distinct']:,.0f} ({meta['expected_min_count_5']:,.0f} at min_count 5); "
          f"{n} pairs of ids below {max_id}, {questions} analogy questions")


if __name__ == "__main__":
    main()
