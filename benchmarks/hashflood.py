"""Hash flooding of the word tables: words written to share one slot chain, against as many random words.

An unkeyed hash lets anyone who can put text into a corpus choose words that collide. FNV-1a's low
``b`` bits after a byte depend only on its state's low ``b`` bits, so two blocks that collide in the
low 32 bits from one state collide after any common suffix, and ``k`` such pairs chained give ``2^k``
distinct words with the same low 32 bits: one probe chain in any table of up to 2^32 slots, inserts and
lookups quadratic in the words. :func:`colliding_words` builds them (a birthday search per block, numpy).
The tables now keep FNV-1a until an insert looks along more than 100 slots, or the slots looked at
average more than 8 a word, then rebuild themselves on SipHash-1-3 under a per-process key
(``cython/tokens.pxi``, ``cython/siphash.h``), against which these are ordinary words.

Measured here, in one process, medians of ``--repeats``: counting (``WordCounts.count_lines``) and
encoding (``VocabTable`` built from the words, then ``encode_lines``) ``2^k`` colliding words against
as many random words of the same length, and devmix-like text (``--corpus``) counted by the installed
tables, to show the keyed hash costs real text nothing. With ``--cluster``, the cluster's
``build_vocab`` of a file of the colliding words against gensim's, side by side::

    python benchmarks/hashflood.py --bits 16 --repeats 3 --corpus /tmp/devmix.txt --cluster --json

``--groups G`` floods with many short chains instead (G families of ``2^bits`` words, each family
its own chain), among ``--plain`` random words and repeated ``--repeat-words`` times: few enough
families that no chain grows to 100 slots, so that only the mean-probe check rebuilds the table,
and every token of them pays its chain on lookup::

    python benchmarks/hashflood.py --bits 5 --groups 32 --plain 4000 --repeat-words 200 --repeats 3 --json
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from provenance import provenance  # (benchmarks/ is on sys.path when this file is run)

FNV_OFFSET, FNV_PRIME = 14695981039346656037, 1099511628211
ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
LOW32 = np.uint64(0xFFFFFFFF)


def fnv1a(data, state=FNV_OFFSET):
    """FNV-1a (64 bits) of ``data`` from ``state``: the hash the tables used before they were keyed."""
    for byte in data:
        state = ((state ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return state


def _colliding_pair(state, length, rng, batch=1 << 17):
    """Two distinct blocks of ``length`` letters whose FNV-1a from ``state`` agree in the low 32 bits."""
    low = np.uint64(state & 0xFFFFFFFF)
    seen = {}
    while True:
        blocks = ALPHABET[rng.integers(0, len(ALPHABET), size=(batch, length))]
        h = np.full(batch, low, dtype=np.uint64)
        for j in range(length):  # only the low 32 bits matter, and they need only the state's low bits
            h = ((h ^ blocks[:, j].astype(np.uint64)) * np.uint64(FNV_PRIME)) & LOW32
        order = np.argsort(h, kind="stable")
        hs = h[order]
        same = np.flatnonzero(hs[1:] == hs[:-1])
        for i in same:
            a, b = bytes(blocks[order[i]]), bytes(blocks[order[i + 1]])
            if a != b:
                return a, b
        for i, value in enumerate(h.tolist()):  # across batches
            block = bytes(blocks[i])
            other = seen.setdefault(value, block)
            if other != block:
                return other, block


def colliding_words(bits, length=5, seed=1):
    """``2^bits`` distinct words of ``bits * length`` letters whose FNV-1a hashes share their low 32 bits.

    Returns
    -------
    list of bytes
    """
    rng = np.random.default_rng(seed)
    pairs, state = [], FNV_OFFSET
    for _ in range(bits):
        a, b = _colliding_pair(state, length, rng)
        pairs.append((a, b))
        state = fnv1a(a, state)  # b's full state differs, its low 32 bits do not: all that the next needs
    words = [b""]
    for a, b in pairs:
        words = [w + a for w in words] + [w + b for w in words]
    return words


def colliding_groups(bits, groups, length=5, seed=1):
    """``groups`` families of ``2^bits`` colliding words, each family with its own three-letter suffix.

    A family shares its low 32 bits of FNV-1a (its suffix keeps them shared); the families differ from
    one another. With ``2^bits`` below the tables' longest chain and few families (many run into each
    other and grow one long chain), no insert looks along that many slots, but every token of them
    along many: the attack a table that checks only its longest chain misses.

    Returns
    -------
    list of bytes
    """
    family = colliding_words(bits, length, seed)
    rng = np.random.default_rng(seed + 3)
    suffixes = set()
    while len(suffixes) < groups:
        suffixes.update(bytes(r) for r in ALPHABET[rng.integers(0, len(ALPHABET), size=(groups, 3))])
    return [w + suffix for suffix in sorted(suffixes)[:groups] for w in family]


def random_words(n, length, seed=2):
    """``n`` distinct random words of ``length`` letters."""
    rng = np.random.default_rng(seed)
    out = set()
    while len(out) < n:
        out.update(bytes(r) for r in ALPHABET[rng.integers(0, len(ALPHABET), size=(n, length))])
    return sorted(out)[:n]


def _median_seconds(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def table_costs(words, repeats, repeat_words=1):
    """Seconds (medians) to count ``words`` (one line each, the list ``repeat_words`` times over) and to build a
    VocabTable of them and encode them."""
    from gensim_distw2v._counts import WordCounts
    from gensim_distw2v._lines import VocabTable, encode_lines

    text = (b"\n".join(words) + b"\n") * repeat_words
    data = np.frombuffer(b"".join(words), dtype=np.uint8)
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in words], out=offsets[1:])
    probes, keyed = [], []

    def count():
        table = WordCounts()
        table.count_lines(text, 0, len(text))
        probes.append(getattr(table, "probes", float("nan")))  # (a build before the keyed hash has none)
        keyed.append(getattr(table, "keyed", None))

    def encode():
        vocab = VocabTable(data, offsets)
        encode_lines(text, 0, len(text), vocab)
    return {"count_s": _median_seconds(count, repeats), "encode_s": _median_seconds(encode, repeats),
            "probes_per_word": probes[-1] / (len(words) * repeat_words), "keyed": keyed[-1]}


def corpus_cost(path, max_bytes, repeats):
    """Seconds (median) and words/s to count the first ``max_bytes`` of a real text file's whole lines."""
    from gensim_distw2v._counts import WordCounts

    with open(path, "rb") as fin:
        buf = fin.read(max_bytes)
    buf = buf[:buf.rfind(b"\n") + 1]
    raw = []

    def count():
        table = WordCounts()
        raw.append(table.count_lines(buf, 0, len(buf))[0])
    seconds = _median_seconds(count, repeats)
    return {"count_s": seconds, "words": raw[-1], "words_per_s": raw[-1] / seconds}


def cluster_vs_gensim(words, repeats):
    """The cluster's ``build_vocab`` (one worker, one shard) of a file of ``words`` (shuffled, 20 a line,
    each five times) against gensim's scan of the same file: medians of seconds."""
    import gensim.models
    from gensim.models.word2vec import LineSentence

    from gensim_distw2v import LocalCluster, Word2Vec

    rng = np.random.default_rng(3)
    tokens = np.array([w.decode() for w in words] * 5, dtype=object)
    rng.shuffle(tokens)
    with tempfile.TemporaryDirectory(prefix="hashflood_") as tmp:
        path = os.path.join(tmp, "flood.txt")
        with open(path, "w") as fout:
            for start in range(0, len(tokens), 20):
                fout.write(" ".join(tokens[start:start + 20]) + "\n")
        times = {"gensim": [], "cluster": []}
        with LocalCluster(n_workers=1, n_shards=1) as cluster:
            for _ in range(repeats):
                start = time.perf_counter()
                gensim.models.Word2Vec(min_count=1).build_vocab(LineSentence(path))
                times["gensim"].append(time.perf_counter() - start)
                model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, min_count=1)
                start = time.perf_counter()
                model.build_vocab(corpus_file=path)
                times["cluster"].append(time.perf_counter() - start)
                if len(model.wv) != len(words):
                    raise AssertionError(f"the cluster counted {len(model.wv)} words of {len(words)}")
    return {role: statistics.median(values) for role, values in times.items()}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bits", type=int, default=16, help="2^bits colliding words")
    parser.add_argument("--length", type=int, default=5, help="letters per colliding block")
    parser.add_argument("--groups", type=int, default=0,
                        help="many short chains instead of one: this many families of 2^bits colliding words, "
                             "each with its own suffix (e.g. --bits 5 --groups 32 --plain 4000 --repeat-words 200)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain", type=int, default=0,
                        help="random words put among the colliding ones (the count's table then holds both)")
    parser.add_argument("--repeat-words", type=int, default=1,
                        help="the text lists its words this many times (lookups: every token of a chain pays it)")
    parser.add_argument("--corpus", help="real text to count as well (its first --corpus-bytes)")
    parser.add_argument("--corpus-bytes", type=int, default=50_000_000)
    parser.add_argument("--cluster", action="store_true", help="also the cluster's build_vocab against gensim's")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    flood = colliding_groups(args.bits, args.groups, args.length) if args.groups \
        else colliding_words(args.bits, args.length)
    low = {fnv1a(w) & 0xFFFFFFFF for w in flood}
    print(f"{len(flood)} words of {len(flood[0])} bytes, {len(low)} distinct low 32 bits of FNV-1a "
          f"(built in {time.perf_counter() - start:.1f} s)", flush=True)
    filler = random_words(args.plain, len(flood[0]), seed=4) if args.plain else []
    plain = random_words(len(flood) + len(filler), len(flood[0]))
    result = {"provenance": provenance(), "args": vars(args), "words": len(flood), "word_bytes": len(flood[0]),
              "fnv_low32_distinct": len(low), "colliding": table_costs(filler + flood, args.repeats, args.repeat_words),
              "random": table_costs(plain, args.repeats, args.repeat_words)}
    for what in ("count_s", "encode_s"):
        result[what.replace("_s", "_ratio")] = result["colliding"][what] / result["random"][what]
    print(f"count: colliding {result['colliding']['count_s'] * 1e3:.1f} ms, random "
          f"{result['random']['count_s'] * 1e3:.1f} ms ({result['count_ratio']:.2f}x); encode: colliding "
          f"{result['colliding']['encode_s'] * 1e3:.1f} ms, random {result['random']['encode_s'] * 1e3:.1f} ms "
          f"({result['encode_ratio']:.2f}x); probes a word {result['colliding']['probes_per_word']:.2f} "
          f"against {result['random']['probes_per_word']:.2f}", flush=True)
    if args.corpus:
        result["corpus"] = corpus_cost(args.corpus, args.corpus_bytes, args.repeats)
        print(f"real text: {result['corpus']['words']:,} words counted at {result['corpus']['words_per_s'] / 1e6:.1f} M "
              "words/s", flush=True)
    if args.cluster:
        result["build_vocab"] = cluster_vs_gensim(flood, args.repeats)
        result["build_vocab_ratio"] = result["build_vocab"]["cluster"] / result["build_vocab"]["gensim"]
        print(f"build_vocab of the colliding words: cluster {result['build_vocab']['cluster']:.2f} s, gensim "
              f"{result['build_vocab']['gensim']:.2f} s ({result['build_vocab_ratio']:.2f}x)", flush=True)
    if args.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
