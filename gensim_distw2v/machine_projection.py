"""The projection's model of the machine its costs were measured on: every process on its few cores, on
loopback or between network namespaces behind shaped links (``benchmarks/validate_projection.py``,
``benchmarks/scaling.py``'s check), next to the words/s measured there. Pure functions, as
:mod:`gensim_distw2v.projection`, whose limits it applies with this machine's cores and links.
"""
from gensim_distw2v.projection import DEFAULT_ROUND_TRIPS, LOOPBACK_RTT_MS, combine, default_rtt_ms, limits, round_time

__all__ = ["serial_seconds", "this_machine"]


def serial_seconds(costs, words, k, link_gbit, shards=None, model_bytes=0):
    """Seconds of a run of ``words`` raw words that its links spend outside training (0 on loopback):
    the session's transfers (the client uploads the ``model_bytes`` of rows to the shards and
    downloads them at the end, one after the other through the head node's link; every worker
    downloads them when it joins, the nodes at once) and the epochs' flushes (every changed row,
    float32, up then down, once an epoch and worker, ``flush_bytes_per_word``: each node's share
    over its link, less what stays on it). Training waits for them; a long corpus makes them small
    per word (:func:`~gensim_distw2v.projection.at_corpus`), a short one on a slow link does not
    (``benchmarks/validate_projection.py``'s bandwidth case)."""
    if link_gbit is None or not words:
        return 0.0
    shards = k if shards is None else shards
    link = link_gbit * 1e9 / 8
    crossing = (k - 1) / k if shards == k else 1.0
    session = (2 + crossing) * model_bytes / link
    flush = costs.get("flush_bytes_per_word", 0.0) * words / k * crossing / link
    return session + flush


def this_machine(run, cores=2, link_gbit=None, words=None, model_bytes=0, link_ns_per_byte=0.0, host_ns_per_byte=0.0,
                 **options):
    """The model of the host ``run`` was measured on (all of its processes on ``cores`` cores;
    loopback, or with ``link_gbit`` each "node" in a network namespace of its own behind a link of
    that rate, as ``benchmarks/validate_projection.py`` runs them), next to the words/s it measured.

    ``run`` is a measured run's costs with ``K``, ``threads`` (trainer threads per worker, default 1),
    ``shards``, ``corpus_file`` and ``raw_wps``; with a link, ``words`` (the run's raw words) and
    ``model_bytes`` add the time its links spend outside training (:func:`serial_seconds`).

    A round's CPU on this machine waits for a share of its cores. With ``round_ms`` (a round's mean
    wall time measured on loopback at this K, where the runs keep the cores busy) its CPU terms take
    ``S`` times their CPU time, ``S`` such that at loopback's round trip the round takes that long;
    when the cluster leaves the cores idle part of the time (waiting for its links) a round waits
    less: ``1 + (S - 1) u``, ``u`` the share of the cores the predicted words/s keep busy, solved
    with the words/s (:func:`~gensim_distw2v.projection.limits`' ``round_stretch``). Measured through a delaying relay (K=2 x
    2, 2026-11-28, ``docs/measurements/validate-projection-explore-2026-11-28.txt``): a round's CPU
    part took about 1.9, 2.0 and 1.6 times its CPU at cores about 70, 61 and 49% busy, where
    loopback's took 2.3 times.

    Between namespaces a byte costs this machine more CPU than on loopback, where the costs were
    measured (a tbf that cuts segments into packets, a relay in Python): measured beforehand as a
    round sends its parts (``benchmarks/netlab.py``), the two ends' CPU beyond loopback's
    (``link_ns_per_byte``) is added for every byte that crosses a link, half to the workers' merges and
    half to the shards (their sends and receives), and the rest of the machine's (``host_ns_per_byte``:
    a relay's, other processes' packet work) to the host's cores only, not to a round.

    Returns ``K``, ``threads``, ``model_wps``, ``measured_wps``, ``ratio`` (model / measured),
    ``bottleneck``, ``limits``, ``serial_seconds`` and :func:`~gensim_distw2v.projection.limits`' details.
    """
    k, threads = int(run["K"]), int(run.get("threads", 1))
    shards = int(run.get("shards", k))
    options.setdefault("kernel_threads", threads)
    options.setdefault("rtt_ms", LOOPBACK_RTT_MS if link_gbit is None else default_rtt_ms(link_gbit))
    full = options.pop("round_stretch", None)
    if full is None and run.get("round_ms"):  # the round's CPU as it waited for the busy cores here
        _, terms, _ = round_time(run, k, shards, None, LOOPBACK_RTT_MS, options.get("round_trips", DEFAULT_ROUND_TRIPS),
                                 options.get("mergers", 1), options.get("fold_threads", 1),
                                 run.get("worker_gil_share", 1.0), run.get("shard_gil_share", 1.0), None)
        cpu = sum(terms.values()) - terms["round_trips"]  # (its CPU terms, less what pieces in flight overlap)
        full = max(1.0, (run["round_ms"] * 1e-3 - terms["round_trips"]) / cpu) if cpu > 0 else 1.0
    full, busy = full or 1.0, 1.0
    crossed = 1e-3 * (run["bytes_up_per_word"] + run["bytes_down_per_word"]) * ((k - 1) / k if shards == k else 1.0)
    if link_ns_per_byte:  # the links' CPU per byte beyond loopback's, at both ends of what crosses them
        extra = link_ns_per_byte * crossed
        run = dict(run, worker_merge_us=run["worker_merge_us"] + extra / 2, shard_us=run["shard_us"] + extra / 2)
    options["host_us"] = host_ns_per_byte * crossed
    for _ in range(50):  # the words/s and the cores' load, solved together (a damped fixed point)
        named, details = limits(run, k, threads, link_gbit, shards, machine_cores=cores,
                                corpus_file=bool(run.get("corpus_file", False)),
                                round_stretch=1.0 + (full - 1.0) * busy, **options)
        model, bottleneck = combine(named, details, k, options.get("sync", "ssp"))
        load = min(1.0, model * details["node_cpu_us_per_word"] * 1e-6 / cores)
        if abs(load - busy) < 1e-4:
            break
        busy = (busy + load) / 2
    serial = serial_seconds(run, words, k, link_gbit, shards, model_bytes)
    if serial:
        model = words / (words / model + serial)
    measured = run.get("raw_wps")
    return {"K": k, "threads": threads, "shards": shards, "cores": cores, "model_wps": model,
            "measured_wps": measured, "ratio": model / measured if measured else None, "bottleneck": bottleneck,
            "limits": named, "serial_seconds": serial, "cores_busy": busy, **details}
