"""How long K nodes of T threads would take to count a corpus's vocabulary, from per-word costs
(``benchmarks/vocab_cluster.py`` measures them; training's projection is :mod:`gensim_distw2v.projection`).

Pure functions: no cluster, no I/O.
"""
from gensim_distw2v.projection import efficiency

__all__ = ["COUNT_COSTS", "DISK_MB_S", "HEAPS_BETA", "count_projection", "distinct_words"]

#: the costs of counting a vocabulary that :func:`count_projection` reads (``benchmarks/vocab_cluster.py``
#: measures them): per raw word counted, the workers' CPU (reading, counting, splitting and sending
#: each range's words), the shards' CPU (adding the ranges' parts, one lock a shard) and the bytes the
#: workers send; per distinct word, the client's serial tail (taking the shards' words, ordering them,
#: gensim's own ``prepare_vocab`` and ``prepare_weights``); the corpus's bytes per word
COUNT_COSTS = ("count_worker_us", "count_shard_us", "count_bytes_per_word", "tail_us_per_distinct",
               "file_bytes_per_word")
#: Heaps' law exponent for the distinct words of a larger corpus, ``V(N) = V0 (N / N0)^beta``: 0.6 is at
#: the high end of what English web text shows (so the client's tail is not underestimated)
HEAPS_BETA = 0.6
#: what one node reads its share of the corpus at, MB/s (a local disk or a shared filesystem's share)
DISK_MB_S = 500.0


def distinct_words(words, measured_words, measured_distinct, beta=HEAPS_BETA):
    """Distinct words of a corpus of ``words`` by Heaps' law through the measured corpus."""
    return measured_distinct * (words / measured_words) ** beta


def count_projection(costs, words, distinct, k, threads, link_gbit, disk_mb_s=DISK_MB_S):
    """Seconds to count ``words`` words (``distinct`` of them distinct) on ``k`` nodes of ``threads``
    threads on links of ``link_gbit`` Gbit/s, from :data:`COUNT_COSTS`.

    The ranges are counted in parallel: a node's cores do its workers' and its shard's CPU (its share,
    ``words / k``, at the threading efficiency of :func:`efficiency`), its shard adds its part under one
    lock (one thread), its link carries its workers' parts out and its shard's in, its disk reads its share
    of the file; the slowest of those is the counting's time. Then the client's serial tail, per distinct
    word. Returns ``seconds``, ``limits`` (seconds per named limit) and ``bottleneck`` (the larger of the
    tail and the slowest of the others).
    """
    share = words / k
    parallel = {
        "node cores": share * (costs["count_worker_us"] + costs["count_shard_us"]) * 1e-6 / (
            threads * efficiency(threads)),
        "shard lock": share * costs["count_shard_us"] * 1e-6,
        "node link": share * costs["count_bytes_per_word"] * 8 * (k - 1) / k / (link_gbit * 1e9) if k > 1 else 0.0,
        "disk": share * costs["file_bytes_per_word"] / (disk_mb_s * 1e6),
    }
    slowest = max(parallel, key=parallel.get)
    tail = distinct * costs["tail_us_per_distinct"] * 1e-6
    return {"seconds": parallel[slowest] + tail, "limits": dict(parallel, **{"client tail": tail}),
            "bottleneck": "client tail" if tail > parallel[slowest] else slowest}
