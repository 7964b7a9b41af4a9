"""The dispatcher's worker-facing part: membership (hello, heartbeat, leave) and a worker's session
work: join, get_jobs, begin_round, round_done, file_check, quit_session."""
import logging
import time

from gensim_distw2v import protocol
from gensim_distw2v.config.choices import SYNC
from gensim_distw2v.io import meter
from gensim_distw2v.dispatcher.membership import WORKER_ROLE, Membership
from gensim_distw2v.dispatcher.state import JOB_DEADLINE_ROUNDS
from gensim_distw2v.protocol.constants import RUNNING

logger = logging.getLogger(__name__)

__all__ = ["WorkerCalls"]


class WorkerCalls(Membership):
    """The calls of :data:`gensim_distw2v.protocol.tables.DISPATCHER` that workers make.

    Parameters
    ----------
    cluster : gensim_distw2v.dispatcher.state.Cluster
    """

    def __init__(self, cluster):
        super().__init__(cluster, WORKER_ROLE)

    # ------------------------------------------------------------------ membership
    def answer(self, name, request, final):
        """The session the worker should be in, and the vocabulary count it may count for
        (:mod:`~gensim_distw2v.dispatcher.counts`), once either differs from what it knows."""
        session, lease = self.cluster.session, self.cluster.count
        current = session.id if session is not None and session.state == RUNNING else None
        leased = lease.count if lease is not None else None
        if current != request.known or leased != request.count or final:
            count = {} if lease is None else {"count": lease.count, "count_corpus": lease.corpus,
                                              "count_shards": lease.shards}
            return protocol.Beat(session=current, hello=False, **count)
        return None

    def unknown(self):
        return protocol.Beat(session=None, hello=True)

    def dropped(self, member, reason):
        """Its unmerged jobs go back to the front of the queue."""
        session, name = self.cluster.session, member.name
        ordered = session is not None and session.ordered and name in session.ranks
        requeued = session.release(name) if session is not None else 0
        logger.warning("worker %s lost (%s); %i unmerged jobs go back to the queue; %i workers left",
                       name, reason, requeued, len(self.members))
        if ordered:
            logger.warning("session %s: sync='bsp' without worker %s: its rounds are no longer taken in turn, the "
                           "run goes on as with sync='ssp' (it will not be reproducible)", session.id, name)

    def check_deadlines(self, session, now):
        """Drop a worker that holds jobs without merging them for longer than the deadline: the
        larger of ``job_deadline`` and :data:`JOB_DEADLINE_ROUNDS` typical rounds (with
        ``sync='local'``, whose rounds are epochs, none until a round has been seen; the lock held)."""
        if session.round_gap is None and not SYNC[session.config.settings.sync].within_epoch:
            return
        limit = max(self.cluster.limits.job_deadline, JOB_DEADLINE_ROUNDS * (session.round_gap or 0.0))
        for name, jobs in list(session.in_flight.items()):
            held = now - session.last_round.get(name, now)
            if jobs and held > limit:
                self.drop(name, f"it held {len(jobs)} jobs for {held:.0f} s without merging them (the deadline: "
                                f"{limit:.0f} s, the larger of --job-deadline and {JOB_DEADLINE_ROUNDS} rounds)")

    # ------------------------------------------------------------------ session work
    def join(self, request):
        """A worker joins the running session: a :class:`~gensim_distw2v.protocol.Joined` (the session
        config, its rank: rank 0 continues the client's random stream, and the session's shards)."""
        name, sid = request.name, request.session
        with self.cluster.cond:
            session = self.cluster.session_of(sid)
            member = self.cluster.worker(name)
            requeued = session.release(name)  # joining again: what it had not merged goes back to the queue
            if requeued:
                logger.info("worker %s joins session %s again; its %i unmerged jobs go back to the queue", name, sid,
                            requeued)
            if member.session_id != sid:  # its counters are per session (a re-join keeps them)
                member.count_session(sid)
            rank = session.join(name)
            session.last_round[name] = time.monotonic()  # its jobs' deadline runs from here
            logger.info("worker %s joined session %s as rank %i", name, sid, rank)
            return protocol.Joined(config=session.config, rank=rank, shards=session.shards, token=session.token)

    def get_jobs(self, request):
        """Up to ``max_jobs`` jobs for a worker, waiting up to ``wait`` seconds while there are none
        (and the worker knows every drained epoch): a :class:`~gensim_distw2v.protocol.JobBatch`
        (``drained``: the last epoch the client closed when nothing is left: time to flush)."""
        name, sid, cluster = request.name, request.session, self.cluster
        with cluster.cond:
            session = cluster.session_of(sid)
            cluster.worker(name, sid)
            deadline = time.monotonic() + request.wait
            # a long poll: until there is work, or a drained epoch the worker has not been told of; the
            # condition wakes for every round report and heartbeat of any worker, so one wake is no answer
            while not session.has_work(name) and session.closed_epoch <= request.drained:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                cluster.cond.wait(left)
                session = cluster.session_of(sid)
                cluster.worker(name, sid)
            out, drained = session.hand_out(name, request.max_jobs)
            if out:
                cluster.cond.notify_all()  # jobs and rounds only: the heartbeats need not wake
            else:  # a poll that found no work (a session's start, an epoch's tail): not a cost of the words
                meter.CALLS.name("get_jobs_idle")
            return protocol.JobBatch(jobs=out, drained=drained)

    def begin_round(self, request):
        """Whether a worker may merge its round ``turn`` now; waits up to ``wait`` seconds for its turn.
        Always true unless the session takes rounds in turn (``sync="bsp"``)."""
        name, sid, cluster = request.name, request.session, self.cluster
        deadline = time.monotonic() + request.wait
        with cluster.cond:
            while True:
                session = cluster.session_of(sid)
                cluster.worker(name, sid)
                if session.may_merge(name, request.turn):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                cluster.cond.wait(left)

    def round_done(self, request):
        """A worker's merge round is folded into every shard: the jobs it carried count as trained."""
        name, sid, report, cluster = request.name, request.session, request.report, self.cluster
        with cluster.cond:
            session = cluster.session_of(sid)
            member = cluster.worker(name, sid)
            member.counts.add(report, session.round_done(name, report))
            now = time.monotonic()
            if report.node is not None and report.node.session == sid:
                cluster.book.update(name, report.node, now)
            if name in session.last_round:
                gap = now - session.last_round[name]
                session.round_gap = gap if session.round_gap is None else 0.9 * session.round_gap + 0.1 * gap
            session.last_round[name] = now
            cluster.cond.notify_all()

    def file_check(self, request):
        """A worker's verdict on the session's corpus file (``problem``: None if it sees the client's
        file). A worker that does not leaves the session; the session fails if none sees it."""
        name, sid, problem, cluster = request.name, request.session, request.problem, self.cluster
        with cluster.cond:
            session = cluster.session_of(sid)
            cluster.worker(name, sid)
            session.check_file(name, problem)
            if problem:
                logger.warning("worker %s cannot train session %s: %s", name, sid, problem)
            cluster.workers_changed()
            cluster.wake()

    def quit_session(self, request):
        """The session failed on a worker (it logged why): it leaves the session for good, its
        unmerged jobs go back to the queue; the session fails once no worker is left to train it.
        The worker stays registered for later sessions."""
        name, sid, reason, cluster = request.name, request.session, request.reason, self.cluster
        with cluster.cond:
            session = cluster.session_of(sid)
            cluster.worker(name)
            requeued = session.quit_worker(name, reason, request.code)
            logger.warning("worker %s quit session %s (%s); %i unmerged jobs go back to the queue", name, sid,
                           reason, requeued)
            cluster.workers_changed()
            cluster.wake()
