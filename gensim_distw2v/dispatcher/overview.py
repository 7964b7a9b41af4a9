"""What the dispatcher shows of the cluster: the nodes' metrics of a session, and the status page's
snapshot (plain data, read-only; :mod:`gensim_distw2v.io.statuspage` serves it)."""
import time

from gensim_distw2v.protocol.constants import DISPATCHER_NAME, RUNNING
from gensim_distw2v.versions import versions

__all__ = ["nodes", "overview"]


def nodes(cluster, session, now):
    """``{name: NodeMetrics}`` of the session's workers and shards (as last reported) and of the
    dispatcher itself (the lock held)."""
    names = [name for name in cluster.workers if name in session.ranks] + list(cluster.shards)
    out = cluster.book.of_session(session.id, names, now)
    out[DISPATCHER_NAME] = cluster.meter.sample()
    return out


def overview(cluster):
    """The cluster and its session as the status page shows them (see
    :mod:`gensim_distw2v.io.statuspage` for the fields)."""
    now = time.monotonic()
    with cluster.cond:  # what is read of the cluster's state, under its lock; the rows are made after it
        session = cluster.session
        shown = {}
        if session is not None:
            shown = nodes(cluster, session, now)
        for name in list(cluster.workers) + list(cluster.shards):  # those outside the session: as last heard
            if name not in shown and name in cluster.book.latest:
                shown[name] = cluster.book.view(name, now)
        about = None if session is None else _session_overview(cluster, session, now)
        history = [] if cluster.history is None or session is None else list(cluster.history.points)
    return {"time": time.time(), "dispatcher": {"uri": cluster.uri, "versions": versions()}, "session": about,
            "nodes": [_node_overview(name, m) for name, m in sorted(shown.items())], "history": history}


def _session_overview(cluster, session, now):
    """The status page's ``session`` (the lock held)."""
    counts = session.counts.values()
    raw = sum(c.raw_words for c in counts)
    config = session.config
    total = config.total_words * config.epochs
    elapsed = 0.0 if session.started_at is None else now - session.started_at
    progress = min(1.0, raw / total) if total else None
    eta = elapsed * (1 - progress) / progress if progress and session.state == RUNNING else None
    points = cluster.history.points if cluster.history is not None else []
    return {"id": session.id, "state": session.state, "workers": len(session.ranks),
            "shards": len(session.shards), "epochs": config.epochs,
            "epoch": max((int(e) for e in session.epochs()), default=0),
            "progress": progress, "eta_seconds": eta, "elapsed": elapsed,
            "words": sum(c.effective_words for c in counts),
            "words_per_second": points[-1]["words_per_second"] if points else 0.0,
            "loss": float(session.loss) if config.compute_loss else None, "merges": session.merges}


def _node_overview(name, node):
    """One row of the status page's node table."""
    return {"name": name, "role": node.role, "words": node.words, "words_per_second": node.words_per_second,
            "cpu": {"kernel": node.kernel_cpu, "merge": node.merge_cpu, "other": node.other_cpu},
            "rss": node.rss, "peak_rss": node.peak_rss, "bytes_sent": node.bytes_sent,
            "bytes_received": node.bytes_received, "last_heard": node.silent,
            "threads": node.threads}
