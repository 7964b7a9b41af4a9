"""The command line's closing summary: what was trained, where, how long, what each role spent per
trained word, and what those costs project to on a real cluster (an estimate, said so).

:func:`costs` turns a run's ``model.cluster_stats`` into the per-word costs of
:mod:`gensim_distw2v.projection` (as ``benchmarks/scaling.py`` does from its measured runs, with
the figures a single run has); :func:`lines` writes the summary.
"""
from gensim_distw2v import projection
from gensim_distw2v.core.schedule import SYNC_WORDS, shortest_interval

__all__ = ["costs", "lines", "PROJECTED"]

PROJECTED = (8, 16, 10.0)  # the cluster the summary projects to: nodes, threads a node, Gbit/s links


def costs(stats, client_cpu=0.0):
    """Per trained raw word, the run's costs by role (:data:`gensim_distw2v.projection.COSTS`' keys, and
    ``worker_setup_us``): from ``cluster_stats`` and the client's CPU seconds in ``train()``."""
    raw = max(1, stats["raw_words"])
    us = 1e6 / raw
    by_role = {}
    for node in stats.get("nodes", {}).values():
        by_role[node["role"]] = by_role.get(node["role"], 0.0) + node["cpu"]
    kernel, merge = stats["kernel_cpu"] * us, stats["merge_cpu"]["workers"] * us
    setup = stats.get("setup_cpu", 0.0) * us
    return {"kernel_us": kernel, "worker_merge_us": merge, "worker_setup_us": setup,
            "worker_other_us": max(0.0, by_role.get("worker", 0.0) * us - kernel - merge - setup),
            "shard_us": by_role.get("shard", 0.0) * us, "dispatcher_us": by_role.get("dispatcher", 0.0) * us,
            "client_us": client_cpu * us, "bytes_up_per_word": stats["bytes_up"] / raw,
            "bytes_down_per_word": stats["bytes_down"] / raw, "rounds_per_word": stats["merges"] / raw}


def lines(stats, where, threads, corpus_file, client_cpu=0.0, gensim_us=None, gensim_threads=None, cores=None,
          local=True):
    """The summary's lines (after the "trained ..." line the command line prints).

    Parameters
    ----------
    stats : dict
        ``model.cluster_stats``.
    where : str
        Where it trained (for the message).
    threads : int
        Trainer threads of each worker.
    corpus_file : bool
        Whether the workers read the corpus (else the client encoded it).
    client_cpu : float
        The client's CPU seconds in ``train()``.
    gensim_us, gensim_threads : float and int, optional
        Plain gensim's CPU per raw word (its process, every thread) on this machine with that many threads
        (``--compare-gensim``): the reference the projection compares with, its threads credited as the
        workers' are (:func:`gensim_distw2v.projection.single_node`).
    cores : int, optional
        This machine's cores.
    local : bool
        Whether the cluster ran on this machine (then the closing line says why it is slower than
        gensim here).
    """
    cost = costs(stats, client_cpu)
    out = [f"per trained word: workers' kernels {cost['kernel_us']:.3f} us, their merges {cost['worker_merge_us']:.3f} "
           f"us, the rest of the workers {cost['worker_other_us'] + cost['worker_setup_us']:.3f} us, shards "
           f"{cost['shard_us']:.3f} us, dispatcher {cost['dispatcher_us']:.3f} us, client {cost['client_us']:.3f} "
           f"us; {cost['bytes_up_per_word']:.1f} bytes up and {cost['bytes_down_per_word']:.1f} down a word; a merge "
           f"every {1 / max(cost['rounds_per_word'], 1e-12):,.0f} words"]
    if gensim_us:
        k, node_threads, link = PROJECTED
        # each side credited for the threads that ran at once (a local cluster's workers share this machine's
        # cores; gensim ran alone on them): the same curve for both (projection.single_node)
        workers = len(stats.get("workers") or {}) or 1
        at_once = projection.concurrent_threads(threads, workers, cores if local else None)
        point = projection.project(cost, gensim_us, k, node_threads, link,
                                   gensim_threads=projection.concurrent_threads(gensim_threads, 1, cores),
                                   kernel_threads=at_once, corpus_file=corpus_file, sync_words=stats["sync_words"])
        out.append(f"at scale (an estimate from these costs, gensim_distw2v/projection.py; docs/scaling.rst): {k} "
                   f"nodes of {node_threads} threads (and a head node) on {link:g} Gbit/s would train this corpus "
                   f"with these settings "
                   f"at {point['cluster_wps'] / 1e6:.1f} M words/s, {point['speedup']:.1f}x one {node_threads}-thread "
                   f"gensim node ({point['single_node_wps'] / 1e6:.1f} M words/s); bound by {point['bottleneck']}"
                   + _lag_note(point, stats.get("lag_limit"), stats["sync_words"]))
    if not local:
        return out
    out.append(f"why slower here than gensim: {where} shares {cores or 'these'} cores among its workers, shards, "
               f"dispatcher and this client, and every worker merges its updates with the shards, where gensim's "
               f"threads share one copy of the weights in one process; the cluster gains where one machine's "
               f"cores are the limit, at corpora of billions of words")
    return out


def _lag_note(point, limit, sync_words):
    """The projected point's interval and lag (:func:`gensim_distw2v.projection.lag_share`) against the
    run's ``lag_limit``: beyond it the workers would shorten their intervals, and train slower than this
    (not an interval at the schedule's floor, :data:`gensim_distw2v.core.schedule.SYNC_WORDS`, or below)."""
    stale = 1 + point["lag_share"]
    if limit is None or stale <= limit:
        return f"; interval and lag {stale:.2f} intervals"
    if sync_words is not None and shortest_interval(sync_words) >= sync_words:
        return f"; interval and lag {stale:.2f} intervals (at the {SYNC_WORDS:,}-word floor: not shortened)"
    return (f"; interval and lag {stale:.2f} intervals, beyond lag_limit {limit:g}: its workers would shorten "
            f"their intervals, so slower than this (benchmarks/scaling.py projects it)")
