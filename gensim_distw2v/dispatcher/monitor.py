"""The dispatcher's monitor: a thread that, twice a second, drops silent workers and shards,
aborts the session of a silent client, withdraws the count lease of a silent one, and watches the
running session (its history, workers left, the order of rounds, jobs' deadlines, checkpoints)."""
import logging
import threading
import time

from gensim_distw2v.protocol.constants import LIVE_STATES, RUNNING

logger = logging.getLogger(__name__)

__all__ = ["Monitor"]

TICK = 0.5  # seconds between looks
# a look this much later than due: the dispatcher itself did not run meanwhile (stopped, or starved of CPU), so
# the silence of its members and of the client in that time is its own (a chaos soak saw a dispatcher frozen for
# 14 s drop every worker and shard and abort the session at once when it ran again)
PAUSE = 2.0


class Monitor:
    """The monitor thread (started at once; :meth:`stop` ends it).

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    workers : gensim_distw2v.dispatcher.workers.WorkerCalls
    shards : gensim_distw2v.dispatcher.shards.ShardCalls
    checkpointing : gensim_distw2v.dispatcher.checkpointing.Checkpointing
    counts : gensim_distw2v.dispatcher.counts.CountLeases
    """

    def __init__(self, cluster, workers, shards, checkpointing, counts):
        self.cluster, self.workers, self.shards, self.checkpointing = cluster, workers, shards, checkpointing
        self.counts = counts
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="dispatcher-monitor", daemon=True)
        self.thread.start()

    def stop(self):
        """End the thread (within a tick)."""
        self.stopped.set()

    def _watch(self):
        last = time.monotonic()
        while not self.stopped.wait(TICK):
            now = time.monotonic()
            if now - last - TICK > PAUSE:
                self.excuse(now - last - TICK)
            last = now
            self.look(now)

    def excuse(self, seconds):
        """The dispatcher did not run for ``seconds``: the silence clocks (members' heartbeats, the client's
        calls, jobs held without a merge, a session without workers) do not count them. A member or client that
        is really gone is dropped that much later."""
        cluster = self.cluster
        with cluster.cond:
            logger.warning("the dispatcher did not run for %.1f s (stopped, or starved of CPU): silences are "
                           "counted without that time", seconds)
            self.workers.excuse(seconds)
            self.shards.excuse(seconds)
            self.counts.excuse(seconds)
            if cluster.session is not None:
                cluster.session.excuse(seconds)

    def look(self, now):
        """One look at the cluster (see the module's docstring)."""
        cluster = self.cluster
        with cluster.cond:
            self.workers.expire(now)
            self.shards.expire(now)
            self.counts.expire(now)
            session = cluster.session
            if session is None or session.state not in LIVE_STATES:
                return
            if now - session.client_seen > cluster.limits.client_timeout:
                logger.warning("session %s aborted: no word from its client for %.0f s", session.id,
                               now - session.client_seen)
                cluster.end_session()
            elif session.state == RUNNING:
                self._sample_history(session, now)
                cluster.workers_changed(now)  # may fail it: no worker left
                if session.state != RUNNING:
                    return
                self._check_order(session, now)
                self.workers.check_deadlines(session, now)
                self.checkpointing.watch(session, now)

    def _sample_history(self, session, now):
        """A point of the session's history (the lock held)."""
        if self.cluster.history is not None and session.started_at is not None:
            words = sum(counts.effective_words for counts in session.counts.values())
            self.cluster.history.add(now - session.started_at, words,
                                     session.loss if session.config.compute_loss else None)

    def _check_order(self, session, now):
        """``bsp``: a rank no worker claimed within ``cluster_timeout`` of the start ends the order
        of rounds (its jobs would wait for ever; the lock held)."""
        unclaimed = session.unclaimed()
        if unclaimed and now - session.started_at > session.config.settings.cluster_timeout:
            session.end_order()
            logger.warning("session %s: sync='bsp' for %i workers, but no worker joined as rank %s within %.0f s: "
                           "rounds are no longer taken in turn, the run goes on as with sync='ssp' (it will not be "
                           "reproducible)", session.id, session.config.workers, unclaimed,
                           session.config.settings.cluster_timeout)
            self.cluster.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake
