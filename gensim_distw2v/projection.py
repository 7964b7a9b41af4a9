"""What K nodes of T threads would train, one limit per serial resource, from per-word costs (how long
they would take to count the vocabulary: :mod:`gensim_distw2v.count_projection`).

Pure functions: no cluster, no I/O. ``benchmarks/scaling.py`` measures the per-word costs on this machine and
calls :func:`project` (K real nodes on real links); :mod:`gensim_distw2v.machine_projection` models the
machine the costs were measured on, to check the model against the words/s measured there.
``docs/scaling.rst`` states the model; every formula below is there too.

The costs (per trained raw word, summed over the cluster's processes of a role and divided by the
words the cluster trained; the keys of ``benchmarks/scaling.py``'s ``costs``):

``kernel_us``           trainer threads' CPU in jobs, measured with ``kernel_threads`` threads a worker
``worker_merge_us``     the workers' CPU in merge rounds
``worker_other_us``     the rest of the workers' process CPU (fetching and decoding jobs, heartbeats, Pyro4's
                        threads): Python, so GIL-held (absent from older runs: :data:`DEFAULT_JOB_PYTHON_US`)
``shard_us``            all shards' process CPU, summed over them
``dispatcher_us``       the dispatcher's process CPU
``client_us``           the client's CPU (its corpus encoding in iterable mode)
``bytes_up_per_word``, ``bytes_down_per_word``  a worker's merge traffic per word it trains
``rounds_per_word``     merge rounds per word (``1 / rounds_per_word``: the interval a round really carried)
``dispatcher_word_us``  of ``dispatcher_us``, the part that grows with the words (its jobs:
                        :func:`dispatcher_split`; ``dispatcher_session_us``, its set-up, joining
                        and transfers, is spread over the corpus by :func:`at_corpus`); optional
``dispatcher_member_cpu`` the rest: CPU seconds per second of each member (heartbeats, round reports, polls)
``worker_member_cpu``, ``shard_member_cpu``  a worker's and a shard's threads that work by the clock
                        whatever the speed (:data:`PER_SECOND_GROUPS`: heartbeats, Pyro4's
                        housekeeping and accepting, a worker's status calls): CPU seconds per second of
                        each, not in ``worker_other_us`` and ``shard_us``; optional
"""
import math

from gensim_distw2v.config.choices import SYNC
from gensim_distw2v.protocol import tables

__all__ = ["LIMITS", "COSTS", "PER_SECOND_CALLS", "PER_SECOND_GROUPS", "SESSION_CALLS", "efficiency", "default_rtt_ms",
           "dispatcher_split", "pipelined", "in_flight", "merge_speedup", "fold_speedup", "dispatcher_limit", "costs_at",
           "at_corpus", "placed", "limits", "round_time", "combine", "concurrent_threads", "single_node", "lag_share",
           "project"]

#: every limit a projected point lists, by name, in this order (``None``: not a limit there)
LIMITS = ("trainer threads", "merger threads", "worker GIL", "shard fold threads", "shard GIL", "dispatcher CPU",
          "client CPU", "node link", "worker link", "shard link", "core budget", "round latency")
#: the per-word costs the model reads
COSTS = ("kernel_us", "worker_merge_us", "worker_other_us", "shard_us", "dispatcher_us", "client_us",
         "bytes_up_per_word", "bytes_down_per_word", "rounds_per_word", "dispatcher_word_us", "dispatcher_member_cpu",
         "worker_member_cpu", "shard_member_cpu", "worker_gil_share", "shard_gil_share",
         "flush_bytes_per_word", "round_ms",
         # the workers' joining (per session; not in worker_other_us until at_corpus spreads it): a million
         # rows' download is ~1 us a word of a 40 M-word run at K=4-5 (left out, K=5 was over-predicted by 31%)
         "worker_setup_us",
         # of worker_merge_us, the routine rounds' taking of their pieces, and the pieces a round went in
         # (round_pieces): a piece's taking overlaps the piece before in flight (absent: one piece, serial)
         "worker_take_us", "round_pieces",
         # a worker's rounds under way at once (rounds_in_flight; absent: 1, a round's steps one after another)
         "rounds_in_flight")
#: a node's thread groups (gensim_distw2v.io.meter.THREAD_GROUPS) that work by the clock, whatever the
#: speed: per role, their CPU is a share of a core per node, not a cost per word (a worker's Pyro4 threads
#: serve status calls only; a shard's serve the merges, so they are not among these)
PER_SECOND_GROUPS = {"worker": ("heartbeat", "housekeeping", "main", "serving"),
                     "shard": ("heartbeat", "housekeeping", "main")}
#: the dispatcher's calls that come a few times a second from each member whatever its speed (a
#: heartbeat a second, round reports batched every 0.5 s, the client's progress polls); its other
#: calls come per job, per epoch or per session: they grow with the words
PER_SECOND_CALLS = tuple(tables.DISPATCHER.ops(cadence="second"))
#: a shard's calls that come once or a few times a session: the weights' upload and downloads, a
#: worker's lookup of the shard's channel and its connection's hello there (``channel_hello``)
SESSION_CALLS = tuple(tables.SHARD.ops(cadence="session")) + ("channel_hello",)  # (the channel's own: no table call)
#: the dispatcher's calls that come once a session (or once a worker and session): its set-up, the
#: workers' joining and their checks of the corpus file, the static arrays' transfers, the end
DISPATCHER_SESSION_CALLS = tuple(tables.DISPATCHER.ops(cadence=("session", "epoch"))) + (
    # a worker's polls for jobs that found none (the meter's name for them): at a session's start and an
    # epoch's tail (while ranges are left, a poll finds one; from an iterable, also while the client is
    # the cap, which its own limit shows)
    "get_jobs_idle",)
#: costs that are not functions of K (a word's kernel, the client's encoding, the schedule's
#: rounds per word, the GIL-held shares): held at the nearest measured K, never fitted
HELD = ("kernel_us", "client_us", "rounds_per_word", "worker_gil_share", "shard_gil_share", "round_pieces",
        "rounds_in_flight")
#: per-job Python of a worker (µs per word) where no run measured it: ~100 µs a 10,000-word job
DEFAULT_JOB_PYTHON_US = 0.01
#: a round trip on loopback (this machine), ms
LOOPBACK_RTT_MS = 0.03
#: calls a routine round waits for in turn: one ``merge`` to every shard at once (``round_done`` goes a
#: few times a second, not per round). Measured through a delaying relay (K=2 x 2, 2,500 words a round,
#: 2026-11-28, docs/measurements/validate-projection-explore-2026-11-28.txt): a round took 7.0, 9.4,
#: 10.7 and 13.9 ms at round trips of 0.05, 2.5, 4.4 and 8.6 ms, 0.8-1 round trip more per round trip added
DEFAULT_ROUND_TRIPS = 1


#: a worker's merge threads (``--merge-threads``): how many times faster M threads take and apply a
#: round's rows than one (their compiled work), measured in process at 1.07 M rows of 100 values on
#: this machine (``benchmarks/merge_threads.py``, 2026-11-28): 1.34 at M=2 over five routine rounds
#: and an every-row round (1.67 and 1.24 apart: the every-row scan is memory-bound). M above 2 was not
#: measured (two cores): held at M=2's
MERGE_THREAD_SPEEDUP = {1: 1.0, 2: 1.34}
#: a shard's folds at once (each worker's link has a thread of its own; a part holds only its rows, and
#: the workers' pieces in flight keep their parts on different rows, so at most ``round_pieces`` parts
#: fold at once): how many times faster F threads fold a round of eight workers than one, measured in
#: process (134 k rows, 6,250 hot, 4 pieces; ``benchmarks/fold_threads.py``, 2026-11-29): 1.68 at F=2
#: (9.8 against 16.5 ms; one lock for every part: 0.93). F above 2 was not measured (two cores): held
FOLD_THREAD_SPEEDUP = {1: 1.0, 2: 1.68}


def merge_speedup(mergers):
    """How many times faster ``mergers`` merge threads do a round's compiled work than one
    (:data:`MERGE_THREAD_SPEEDUP`, held beyond the largest measured)."""
    return MERGE_THREAD_SPEEDUP[max(m for m in MERGE_THREAD_SPEEDUP if m <= max(1, int(mergers)))]


def fold_speedup(folders, pieces=None):
    """How many times faster a shard folds with ``folders`` parts at once than one at a time
    (:data:`FOLD_THREAD_SPEEDUP`, held beyond the largest measured); with ``pieces`` (the runs'
    ``round_pieces``), at most that many: with one piece a round every worker's part covers the same
    hot rows, so they fold in turn (measured x1.07)."""
    folders = max(1, int(folders)) if pieces is None else max(1, min(int(folders), int(pieces)))
    return FOLD_THREAD_SPEEDUP[max(f for f in FOLD_THREAD_SPEEDUP if f <= folders)]


#: the threading efficiency curve's slope: ``e(T) = 1 - EFFICIENCY_SLOPE log2 T`` (gensim's own benchmarks)
EFFICIENCY_SLOPE = 0.08


def efficiency(threads):
    """Threading efficiency of word2vec on one node, ``e(T) = 1 - 0.08 log2 T``: 1 at one thread,
    0.68 at 16, 0.6 at 32 (gensim's own benchmarks), never below 0.1. The cluster's trainer threads and
    plain gensim's go through the same curve (:func:`single_node`)."""
    return max(0.1, 1.0 - EFFICIENCY_SLOPE * math.log2(max(1, threads)))


def default_rtt_ms(link_gbit):
    """An application round trip on a link of ``link_gbit`` Gbit/s: 0.1 ms on 10 GbE or faster, 0.2 ms
    on slower Ethernet; :data:`LOOPBACK_RTT_MS` on loopback (``link_gbit`` None)."""
    if link_gbit is None:
        return LOOPBACK_RTT_MS
    return 0.1 if link_gbit >= 10 else 0.2


def _rate(capacity, cost):
    """``capacity / cost`` words/s, None when the cost is nil (no limit)."""
    return capacity / cost if cost and cost > 0 else None


def _power(k, k0, c0, k1, c1, clip):
    """``c(k) = c0 (k / k0)^b`` through ``(k0, c0)`` and ``(k1, c1)``; ``clip``: a falling cost is held at ``c1``."""
    if c0 <= 0 or c1 <= 0:  # a nil cost: the straight line through the two (held above the larger)
        slope = (c1 - c0) / (k1 - k0)
        return max(c0 + slope * (k - k0), max(c0, c1) if clip else 0.0)
    b = math.log(c1 / c0) / math.log(k1 / k0)
    if clip and b < 0:  # measured to fall with K: held at the larger K's
        return c1
    return c0 * (k / k0) ** b


def dispatcher_split(calls, cpu, words, members, seconds):
    """The dispatcher's CPU of a run, split into what grows with the words and what each member
    costs per second.

    Parameters
    ----------
    calls : dict
        ``{op: [calls, CPU seconds handling them(, CPU seconds in the whole calls)]}`` (the dispatcher's
        node metrics' ``calls``; the whole calls' CPU, transport included, where measured).
    cpu : float
        The dispatcher's process CPU seconds in the run (its calls, Pyro4's work around them, its
        own threads).
    words : int
        Raw words trained.
    members : int
        Workers, shards and the client.
    seconds : float
        The run's wall time.

    Returns
    -------
    dict
        ``dispatcher_word_us`` (µs per word: its jobs), ``dispatcher_session_us`` (µs per word of
        the calls of :data:`DISPATCHER_SESSION_CALLS`, a cost per session or epoch that a longer
        corpus spreads thinner: :func:`at_corpus`), ``dispatcher_member_cpu`` (CPU seconds per member and
        second), ``dispatcher_calls_per_member_s`` and ``dispatcher_overhead_us_per_call`` (CPU
        beyond the calls, spread evenly over all of them: the dispatcher's own threads, Pyro4's
        accepting; with older runs, beyond the handlers, so Pyro4's per-call work too).
    """
    whole = all(len(c) > 2 for c in calls.values()) and any(c[2] > 0 for c in calls.values())
    cost = {op: c[2] if whole else c[1] for op, c in calls.items()}  # the whole calls' CPU where measured
    n_all = sum(c[0] for c in calls.values()) or 1
    overhead = max(0.0, cpu - sum(cost.values())) / n_all
    n_sec = sum(calls[op][0] for op in PER_SECOND_CALLS if op in calls)
    cpu_sec = sum(cost[op] for op in PER_SECOND_CALLS if op in calls) + overhead * n_sec
    once = [op for op in DISPATCHER_SESSION_CALLS if op in calls and op not in PER_SECOND_CALLS]
    cpu_once = sum(cost[op] + overhead * calls[op][0] for op in once)
    member_seconds = max(1e-9, members * seconds)
    return {"dispatcher_word_us": max(0.0, cpu - cpu_sec - cpu_once) * 1e6 / max(1, words),
            "dispatcher_session_us": cpu_once * 1e6 / max(1, words),
            "dispatcher_member_cpu": cpu_sec / member_seconds,
            "dispatcher_calls_per_member_s": n_sec / member_seconds,
            "dispatcher_overhead_us_per_call": overhead * 1e6}


def dispatcher_limit(costs, members):
    """Words/s the dispatcher's one process allows: with the split (:func:`dispatcher_split`), what
    is left of its core after ``members`` members' per-second calls, over its CPU per word;
    without it (older runs), one core over ``dispatcher_us``. Returns words/s (None: no limit)."""
    if "dispatcher_word_us" in costs and "dispatcher_member_cpu" in costs:
        left = 1.0 - members * costs["dispatcher_member_cpu"]
        if left <= 0:
            return 0.0
        return _rate(left * 1e6, costs["dispatcher_word_us"])
    return _rate(1e6, costs["dispatcher_us"])


def costs_at(runs, k, method="fit"):
    """The per-word costs at ``k`` nodes from runs measured at other Ks, and how they were had.

    Parameters
    ----------
    runs : list of dict
        Measured runs, each with ``"K"`` and the :data:`COSTS` (``worker_other_us`` optional).
    k : int
        The node count projected.
    method : {"fit", "hold"}
        Beyond the largest measured K: ``fit`` extends each K-dependent cost as a power of K,
        ``c(K) = c(Ka) (K / Ka)^b``, through the two largest measured Ks ``Ka < Kb`` (b clipped
        at 0: no cost is projected to fall as K grows); ``hold`` keeps the costs of the largest.

    Returns
    -------
    (dict, str)
        The costs, and a label: ``measured K=8``, ``interpolated between K=4 and K=8``,
        ``extrapolated: power of K through K=8 and K=16``, ``held at K=8`` (beyond, with ``hold``, or
        below the smallest measured K). :data:`HELD` costs are always the nearest measured K's.
    """
    if method not in ("fit", "hold"):
        raise ValueError(f"method must be 'fit' or 'hold', got {method!r}")
    by_k = {int(r["K"]): r for r in runs}
    ks = sorted(by_k)
    keys = [key for key in COSTS if all(key in r for r in runs)]
    if k in by_k:
        return {key: by_k[k][key] for key in keys}, f"measured K={k}"
    if k < ks[0] or len(ks) == 1 or (k > ks[-1] and method == "hold"):
        near = ks[0] if k < ks[0] else ks[-1]
        return {key: by_k[near][key] for key in keys}, f"held at K={near}"
    if k > ks[-1]:
        k0, k1, clip = ks[-2], ks[-1], True
        label = f"extrapolated: power of K through K={k0} and K={k1}"
    else:
        k0, k1, clip = max(m for m in ks if m < k), min(m for m in ks if m > k), False
        label = f"interpolated between K={k0} and K={k1}"
    near = k1 if abs(math.log(k1 / k)) <= abs(math.log(k / k0)) else k0
    out = {}
    for key in keys:
        c0, c1 = by_k[k0][key], by_k[k1][key]
        out[key] = by_k[near][key] if key in HELD else _power(k, k0, c0, k1, c1, clip)
    return out, label


def at_corpus(run, epoch_words, transport_ns_per_byte=None):
    """A measured run's per-word costs as they would be on a corpus of ``epoch_words`` raw words per
    epoch: an epoch's flush (every row, float32, once per epoch and worker) costs the same whatever
    the corpus, so its share per word shrinks as the epoch grows, and so do the workers' joining
    (``worker_setup_us``, per session; added to ``worker_other_us``, which excludes it) and the
    shards' serving of the session's transfers and of the flushes: their calls' whole CPU,
    transport included, where the run measured it (``shard_setup_call_us``, ``shard_flush_call_us``);
    in older runs the handlers' CPU (``shard_setup_us``, ``shard_flush_us``) and, with
    ``transport_ns_per_byte`` (the shards' transport CPU per byte moved, ``transport_cost.py``), the
    transport of the flushes' bytes and of the session's (``shard_session_bytes_per_word``) estimated;
    everything else (the routine rounds, per interval) stays per word. Runs without the flush split
    (older JSONs) keep their flushes, labelled so.

    Returns
    -------
    (dict, str)
        The costs, and how they were had (``"flushes scaled to 1e+09 words an epoch (x0.0119)"``).
    """
    needed = ("worker_flush_us", "shard_flush_us", "flush_bytes_per_word", "epoch_words_per_worker")
    out = dict(run)
    scaled = bool(epoch_words) and all(key in run for key in needed)
    ratio = min(1.0, run["epoch_words_per_worker"] * run["K"] / float(epoch_words)) if scaled else 1.0
    # the workers' joining (per session, measured apart since 2026-11-27): what is left of it per
    # word, counted with the rest of their Python (GIL-held)
    if "worker_other_us" in run:
        out["worker_other_us"] = run["worker_other_us"] + out.pop("worker_setup_us", 0.0) * ratio  # (counted once)
    if "dispatcher_word_us" in run:  # the dispatcher's per-session calls, likewise
        out["dispatcher_word_us"] = run["dispatcher_word_us"] + run.get("dispatcher_session_us", 0.0) * ratio
    if not scaled:
        return out, "flushes as measured"
    out["worker_merge_us"] = run["worker_merge_us"] - run["worker_flush_us"] * (1 - ratio)
    if "shard_flush_call_us" in run:  # the flushes' and the session's calls as they cost, transport included
        out["shard_us"] = run["shard_us"] - (run["shard_flush_call_us"] + run["shard_setup_call_us"]) * (1 - ratio)
        for way in ("bytes_up_per_word", "bytes_down_per_word"):
            out[way] = max(0.0, run[way] - run["flush_bytes_per_word"] / 2 * (1 - ratio))
        return out, f"flushes scaled to {epoch_words:.3g} words an epoch (x{ratio:.3g}), the shards' calls as measured"
    out["shard_us"] = run["shard_us"] - (run["shard_flush_us"] + run.get("shard_setup_us", 0.0)) * (1 - ratio)
    if transport_ns_per_byte:  # and their bytes' transport (the handlers' CPU above excludes it)
        moved = run["flush_bytes_per_word"] + run.get("shard_session_bytes_per_word", 0.0)
        out["shard_us"] -= moved * transport_ns_per_byte * 1e-3 * (1 - ratio)
    # the flush's bytes: half up, half down (every row each way)
    for way in ("bytes_up_per_word", "bytes_down_per_word"):
        out[way] = max(0.0, run[way] - run["flush_bytes_per_word"] / 2 * (1 - ratio))
    how = f"flushes scaled to {epoch_words:.3g} words an epoch (x{ratio:.3g})"
    return out, how + (f", with the shards' transport at {transport_ns_per_byte:g} ns a byte" if transport_ns_per_byte
                       else "")


def round_time(costs, k, shards, link_gbit, rtt_ms, round_trips, mergers, fold_threads, gil_share, shard_gil_share,
               sync_words, stretch=1.0, local=None):
    """One routine merge round of one worker: ``(seconds, its terms, words it carries)``; its CPU
    terms take ``stretch`` times their CPU time (waiting for a share of a host's cores); ``local``:
    the shards run on the worker nodes (default: when there are K)."""
    words = sync_words or (1.0 / costs["rounds_per_word"] if costs.get("rounds_per_word") else 0.0)
    local = shards == k if local is None else local
    crossing = (k - 1) / k if local else 1.0  # the part for the node's own shards stays on it
    wire = 0.0 if link_gbit is None else \
        (costs["bytes_up_per_word"] + costs["bytes_down_per_word"]) * words * crossing / (link_gbit * 1e9 / 8)
    merge = stretch * costs["worker_merge_us"] * 1e-6 * words * (gil_share + (1 - gil_share) / merge_speedup(mergers))
    fold = stretch * costs["shard_us"] * 1e-6 * words / shards * (
        shard_gil_share + (1 - shard_gil_share) / fold_speedup(fold_threads, costs.get("round_pieces", 1)))
    trip = round_trips * rtt_ms * 1e-3
    terms = {"round_trips": trip, "wire": wire, "merge_cpu": merge, "shard_cpu": fold}
    pieces = max(1, int(costs.get("round_pieces", 1)))
    if int(costs.get("rounds_in_flight", 1)) > 1 and costs.get("worker_take_us"):  # the next round taken meanwhile
        take = merge * min(1.0, costs["worker_take_us"] / max(1e-12, costs["worker_merge_us"]))
        terms["rounds_overlap"] = in_flight(take, merge - take, wire + fold + trip) - sum(terms.values())
    elif pieces > 1 and costs.get("worker_take_us"):  # taking piece i + 1 while piece i is in flight
        take = merge * min(1.0, costs["worker_take_us"] / max(1e-12, costs["worker_merge_us"]))
        terms["pieces_overlap"] = pipelined(take, merge - take, wire + fold, trip, pieces) - sum(terms.values())
    return sum(terms.values()), terms, words


def in_flight(take, take_in, flight):
    """Seconds between a worker's rounds with the next one taken while the last is in flight
    (``rounds_in_flight=2``; not modelled with pieces): each round the merge thread takes one (``take``)
    and takes in the last's replies (``take_in``), which come ``flight`` after it went: ``take_in + max(take, flight)``."""
    return take_in + max(take, flight)


def pipelined(take, take_in, flight, trip, pieces):
    """Seconds of a round of ``pieces`` equal pieces, each taken (``take`` seconds in all) while the piece
    before is in flight (``flight``: on the wire and the shards, and a round ``trip`` a piece), then its
    reply taken in (``take_in``): the first piece's taking, then per piece the longer of the next one's
    taking and its own flight, and its taking in; one piece: their sum."""
    n = float(pieces)
    between = max(take / n, flight / n + trip) if pieces > 1 else 0.0
    return take / n + (n - 1) * (between + take_in / n) + flight / n + trip + take_in / n


def placed(k, shards=None, shards_per_node=None):
    """``(P, local)``: the shards and whether they run on the K worker nodes. ``shards_per_node`` m puts
    m K there; else P shards (default K) are on the nodes when P = K, on hosts of their own otherwise."""
    if shards_per_node:
        return k * int(shards_per_node), True
    shards = k if shards is None else shards
    return shards, shards == k


def limits(costs, k, threads, link_gbit, shards=None, *, corpus_file=False, machine_cores=None, cores=None,
           kernel_threads=1, mergers=1, fold_threads=1, gil_share=None, shard_gil_share=None, job_python_us=None,
           rtt_ms=None, round_trips=DEFAULT_ROUND_TRIPS, sync="ssp", sync_words=None, round_stretch=1.0, host_us=0.0,
           shards_per_node=None):
    """Every limit (words/s of the whole cluster) of K nodes of ``threads`` trainer threads.

    Parameters
    ----------
    costs : dict
        Per-word costs (:data:`COSTS`).
    k, threads : int
        Nodes (one worker each) and trainer threads per worker.
    link_gbit : float or None
        Each node's link (full duplex); None: loopback, one host (no link limit, no wire time).
    shards : int, optional
        P shard processes (default K: one per node, beside its worker); P != K puts them on hosts
        of their own.
    corpus_file : bool
        Corpus_file mode: no client limit (the workers read the corpus).
    machine_cores : int, optional
        All processes on one host of this many cores
        (:func:`~gensim_distw2v.machine_projection.this_machine`): the core budget is the
        host's, and counts the dispatcher's and the client's CPU too.
    cores : int, optional
        Cores of a node (default ``threads``), shared by its trainers, merger and shard.
    kernel_threads : int
        Trainer threads per worker of the runs that measured ``kernel_us``.
    mergers, fold_threads : int
        M merge threads per worker (as fast as :func:`merge_speedup` says), F parts a shard folds at
        once (as fast as :func:`fold_speedup` says; at most the runs' ``round_pieces``, 1 if absent).
    gil_share, shard_gil_share : float, optional
        Share of a worker's merge CPU, and of a shard's CPU, that holds the GIL (default: as the run
        measured it, ``worker_gil_share`` and ``shard_gil_share``: all but the routine rounds'
        compiled calls; else 1, all of it).
    job_python_us : float, optional
        A worker's GIL-held CPU per word besides its merges (default: the measured
        ``worker_other_us``, else :data:`DEFAULT_JOB_PYTHON_US`).
    rtt_ms : float, optional
        A round trip (default :func:`default_rtt_ms`).
    round_trips : int
        Round trips a round waits for in turn.
    sync : {"ssp", "bsp", "asp", "local"}
        ``ssp`` (bounded staleness): a round's latency caps a node at ``sync_words / round``;
        ``bsp``: rounds are serial with training (combined in :func:`project`); ``asp``,
        ``local``: no latency limit.
    sync_words : float, optional
        The interval (default ``1 / rounds_per_word``, what the measured rounds carried).
    round_stretch : float
        Wall seconds a round's CPU second takes (1: a core of its own;
        :func:`~gensim_distw2v.machine_projection.this_machine` measures it
        where every process shares two cores).
    host_us : float
        With ``machine_cores``: the host's CPU per word outside every role (the links of
        :func:`~gensim_distw2v.machine_projection.this_machine`).
    shards_per_node : int, optional
        m shard processes on each worker node (P = m K, ``shards`` ignored): m fold threads and m GILs
        a node, each shard folding 1/P of the rows.

    Returns
    -------
    (dict, dict)
        ``{limit name: words/s or None}`` for every name of :data:`LIMITS`, and the details: the
        round's seconds and terms, the interval's words, each node's CPU µs per word.
    """
    shards, local = placed(k, shards, shards_per_node)
    cores = threads if cores is None else cores
    rtt_ms = default_rtt_ms(link_gbit) if rtt_ms is None else rtt_ms
    gil_share = costs.get("worker_gil_share", 1.0) if gil_share is None else gil_share
    shard_gil_share = costs.get("shard_gil_share", 1.0) if shard_gil_share is None else shard_gil_share
    job_py = job_python_us if job_python_us is not None else costs.get("worker_other_us", DEFAULT_JOB_PYTHON_US)
    kernel = costs["kernel_us"] * efficiency(kernel_threads) / efficiency(threads)  # CPU per word at T threads
    merge = costs["worker_merge_us"]
    # what each worker's and shard's clock-driven threads take of a core (and of the GIL), whatever the speed
    w_clock, s_clock = costs.get("worker_member_cpu", 0.0), costs.get("shard_member_cpu", 0.0)
    out = dict.fromkeys(LIMITS)
    out["trainer threads"] = _rate(k * threads * 1e6, kernel)
    out["merger threads"] = _rate(k * merge_speedup(mergers) * 1e6, merge)
    out["worker GIL"] = _rate(k * max(0.0, 1.0 - w_clock) * 1e6, gil_share * merge + job_py)
    out["shard fold threads"] = _rate(shards * fold_speedup(fold_threads, costs.get("round_pieces", 1)) * 1e6,
                                      costs["shard_us"])
    out["shard GIL"] = _rate(shards * max(0.0, 1.0 - s_clock) * 1e6, shard_gil_share * costs["shard_us"])
    members = k + shards + 1  # its workers, shards and the client
    out["dispatcher CPU"] = dispatcher_limit(costs, members)
    out["client CPU"] = None if corpus_file else _rate(1e6, costs["client_us"])
    up, down = costs["bytes_up_per_word"], costs["bytes_down_per_word"]
    if link_gbit is not None:
        link = link_gbit * 1e9 / 8
        if local:  # each direction: its worker's traffic and its shards', less what stays on the node
            out["node link"] = _rate(k * link, (up + down) * (k - 1) / k)
        else:
            out["worker link"] = _rate(k * link, max(up, down))
            out["shard link"] = _rate(shards * link, max(up, down))
    if machine_cores is not None:  # one host: every role's CPU on its cores
        cpu = kernel + merge + job_py + costs["shard_us"] + costs["dispatcher_us"] + costs["client_us"] \
            + costs.get("worker_setup_us", 0.0) + host_us  # (the workers' joining, the links: this host's too)
        out["core budget"] = _rate(max(0.0, machine_cores - k * w_clock - shards * s_clock) * 1e6, cpu)
    else:  # a node: its trainers, merger, other worker threads and (P = K) its shard, on its cores
        cpu = kernel + merge + job_py + (costs["shard_us"] if local else 0.0)
        out["core budget"] = _rate(k * max(0.0, cores - w_clock - (s_clock * shards / k if local else 0.0)) * 1e6, cpu)
    seconds, terms, words = round_time(costs, k, shards, link_gbit, rtt_ms, round_trips, mergers, fold_threads,
                                       gil_share, shard_gil_share, sync_words, round_stretch, local)
    if SYNC[sync].bounded and words > 0:
        out["round latency"] = _rate(k * words, seconds)
    details = {"round_seconds": seconds, "round_terms": terms, "sync_words": words, "rtt_ms": rtt_ms,
               "gil_shares": {"merges": gil_share, "shards": shard_gil_share},
               "round_trips": round_trips, "round_stretch": round_stretch, "node_cpu_us_per_word": cpu, "kernel_us_at_threads": kernel,
               "job_python_us": job_py, "job_python_assumed": job_python_us is None and "worker_other_us" not in costs}
    return out, details


def combine(named, details, k, sync):
    """The cluster's words/s and its bottleneck: the least limit (``bsp``: the others' rate with each
    round's latency added to each interval's training time)."""
    given = {name: value for name, value in named.items() if value is not None}
    latency = given.pop("round latency", None)
    bottleneck = min(given, key=given.get)
    rate = given[bottleneck]
    if latency is not None and SYNC[sync].in_turn:  # per node: an interval's training, then its round
        per_node = 1.0 / (k / rate + details["round_seconds"] / details["sync_words"])
        if details["round_seconds"] / details["sync_words"] > k / rate:
            bottleneck = "round latency"
        return k * per_node, bottleneck
    if latency is not None and latency < rate:
        return latency, "round latency"
    return rate, bottleneck


def concurrent_threads(threads, processes=1, cores=None):
    """How many of one process's ``threads`` trainer threads ran at once on the machine that measured them:
    its threads, no more than its share of the ``cores`` (``processes`` of them shared those cores; None:
    a machine of its own). Eight workers of two threads on two cores ran a quarter of a thread each: their
    threads met no other thread of their replica, so their CPU per word is a one-thread cost; gensim's
    ``workers=4`` on two cores ran two threads at once. The efficiency credited to a measured CPU per word
    (:func:`single_node`, :func:`limits`' ``kernel_threads``) is that of this many threads, on both sides."""
    if cores is None:
        return max(1, int(threads))
    return max(1, min(int(threads), int(cores) // max(1, int(processes))))


def single_node(gensim_us, threads, gensim_threads=1):
    """Words/s of one ``threads``-thread node of plain gensim, credited as the cluster's trainer threads are.

    ``gensim_us`` is gensim's CPU per raw word (its whole process: trainer threads, and in iterable mode
    its job producer) measured with ``gensim_threads`` threads, the same kind of time as the cluster's
    ``kernel_us``; both sides go through the same efficiency curve (:func:`efficiency`): a word's CPU at
    ``T`` threads is the measured one times ``e(T_m) / e(T)``, so ``T e(T) 1e6 / (gensim_us e(T_m))``.
    """
    return threads * efficiency(threads) * 1e6 / (gensim_us * efficiency(gensim_threads))


def lag_share(round_seconds, cluster_wps, k, sync_words):
    """A round's lag in intervals: the words a worker trains while its round is on its way (``round_seconds``
    at the cluster's rate, ``cluster_wps / k`` a worker) over the words a round carries. Interval and lag
    together are what a replica misses of the others (``settings.lag_limit`` bounds them): 1 where the round's
    latency binds with rounds in flight (a round lands as the next is due)."""
    return round_seconds * cluster_wps / k / sync_words if sync_words and k else 0.0


def project(costs, gensim_us, k, threads, link_gbit, shards=None, gensim_threads=1, **options):
    """K nodes of ``threads`` threads on ``link_gbit`` links, against one node of plain gensim.

    ``gensim_us`` is plain gensim's CPU per raw word measured with ``gensim_threads`` threads
    (:func:`single_node`: the same kind of time and the same efficiency curve as the cluster's kernel);
    ``options`` are :func:`limits`'s. Returns a record: ``K``, ``threads``, ``link_gbit``,
    ``shards``, ``nodes`` (K worker nodes and the head node: name server, dispatcher, client),
    ``cluster_wps`` (the least limit), ``bottleneck`` (its name), ``limits`` (every
    name of :data:`LIMITS`, None where it does not apply), ``single_node_wps``,
    ``speedup``, ``speedup_per_node`` (over ``nodes``), ``above_linear`` (the speed-up above K: an
    error unless a measured mechanism is named, since the cluster's threads run gensim's kernel),
    ``merges_per_worker_per_s``, the round (``round_seconds``, its ``round_terms``,
    ``interval_seconds``: the interval's training time at the rate of the other limits; the round
    stalls the trainers when it is the longer), its lag in intervals (:func:`lag_share`) and the
    parameters used.
    """
    shards, local = placed(k, shards, options.get("shards_per_node"))
    sync = options.get("sync", "ssp")
    named, details = limits(costs, k, threads, link_gbit, shards, **options)
    cluster, bottleneck = combine(named, details, k, sync)
    others = min(v for name, v in named.items() if v is not None and name != "round latency")
    single = single_node(gensim_us, threads, gensim_threads)
    words = details["sync_words"]
    interval = words * k / others if words else 0.0
    params = {key: value for key, value in options.items()}
    params.setdefault("cores", threads)
    params.update(gensim_us=gensim_us, gensim_threads=gensim_threads)
    dispatcher_us = costs["dispatcher_us"]  # its CPU per word at the projected rate (split: per second spread)
    if "dispatcher_word_us" in costs and "dispatcher_member_cpu" in costs and cluster > 0:
        dispatcher_us = costs["dispatcher_word_us"] + (k + shards + 1) * costs["dispatcher_member_cpu"] * 1e6 / cluster
    nodes = k + 1 + (0 if local else shards)  # the head node, and shard hosts of their own
    return {"K": k, "threads": threads, "link_gbit": link_gbit, "shards": shards, "nodes": nodes,
            "cluster_wps": cluster, "dispatcher_us_at_rate": dispatcher_us,
            "single_node_wps": single, "speedup": cluster / single, "speedup_per_node": cluster / single / nodes,
            "above_linear": cluster / single > k * (1 + 1e-9), "bottleneck": bottleneck, "limits": named,
            "merges_per_worker_per_s": cluster / k / words if words else 0.0,
            "interval_seconds": interval, "round_stalls": details["round_seconds"] > interval,
            "lag_share": lag_share(details["round_seconds"], cluster, k, words),
            **details, "params": params}
