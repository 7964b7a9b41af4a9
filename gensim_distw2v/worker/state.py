"""What a session's threads share on a worker: the jobs held, the merge interval's words, the
counts, under one lock.

:class:`~gensim_distw2v.worker.training._Training` makes one :class:`WorkState` per session and
hands it to its trainer threads, its fetch loop and its merger
(:class:`~gensim_distw2v.worker.merger.MergeRounds`): every field they share is set up here, so a
reader finds the state of a session's work in one place. The trainers claim the interval's words
and wait for a round once it is used up; the merger takes the jobs done and restarts the interval.
"""
import queue
import threading
import time

__all__ = ["WorkState"]


class WorkState:
    """The state of one session's work on a worker, shared by its threads (the fields are read and
    changed under :attr:`lock`, a condition every change the others act on notifies).

    Parameters
    ----------
    sid : str
        The session.
    mode : gensim_distw2v.config.choices.SyncMode or None
        The session's sync mode (set once joined).

    Attributes
    ----------
    stop : threading.Event
        Set when the session ends here (ended, failed, or replaced).
    jobs : queue.Queue
        ``(job, data, rows)`` fetched and not yet trained (a job counts as held until its ``task_done``).
    done : list
        ``[job id, effective words(, raw words, examples)]`` trained since the last merge round.
    done_epoch : int
        The latest epoch of those jobs.
    words_since_merge : int
        Raw words trained (or claimed) since the merge round began.
    words_before : int
        Raw words trained in intervals before the current one (the lag's clock).
    claimed : int
        ``sync="bsp"``: raw words claimed by pieces in training (counted once trained).
    sync_words : int
        The interval trained to (the merger shortens it from the one asked as the rounds' lag grows).
    loss : float
        The training loss since the last merge round.
    train_cpu : float
        CPU seconds of the trainer threads' kernel calls (and of reading ranges).
    stalled : float
        Seconds trainer threads waited for a merge round (the staleness bound).
    trained_words : int
        Raw words trained in the session.
    error : Exception or None
        The first failure of a thread; the fetch loop raises it.
    drained : int or None
        The epoch the dispatcher says is fully handed out, once the queue is empty.
    flushed : int
        The last epoch this worker flushed (sent everything, exactly).
    want : numpy.ndarray or None
        Per row, how many of the jobs held use it (a routine round asks for these rows back; None
        under ``bsp``, where every row comes back).
    want_held : bool
        Jobs' rows are wanted from their fetch on (else while they train).
    rank, token
        The worker's rank in the session and the session's token (set once joined).
    """

    def __init__(self, sid, mode=None):
        self.sid, self.mode = sid, mode
        self.stop = threading.Event()
        self.jobs = queue.Queue()
        self.lock = threading.Condition()
        self.done, self.done_epoch = [], -1
        self.words_since_merge = self.words_before = self.claimed = 0
        self.sync_words = 0
        self.loss = self.train_cpu = self.stalled = 0.0
        self.trained_words = 0
        self.error = None
        self.drained, self.flushed = None, -1
        self.want, self.want_held = None, False
        self.rank, self.token = None, None

    def fail(self, err):
        """A thread failed: the session ends here, the fetch loop raises ``err``."""
        self.error = err
        self.stop.set()

    def room(self):
        """Raw words left in this interval for a new piece: ``sync_words`` less the words trained since
        the round began and those claimed by pieces in training (the lock held)."""
        return self.sync_words - self.words_since_merge - self.claimed

    def wait_for_round(self):
        """Bounded staleness: once ``sync_words`` words are trained since the last merge round
        began (``bsp``: ended), wait for the next round to begin (to end); otherwise slow merges
        would stretch the real merge interval, and summed deltas blow up beyond it (``asp`` and
        ``local`` never wait). True when training may go on; False after waiting a while (the
        caller checks ``stop`` and calls again)."""
        with self.lock:
            if self.room() > 0 or not self.mode.bounded:
                return True
            waited = time.perf_counter()
            self.lock.wait(0.05)
            self.stalled += time.perf_counter() - waited
            return self.room() > 0

    def words_trained(self):
        """Raw words the trainers have trained in the session so far (the lag's clock; the lock held)."""
        return self.words_before + self.words_since_merge

    def restart_interval(self):
        """The interval's word count back to 0 (the lock held), its words kept on the lag's clock."""
        self.words_before += self.words_since_merge
        self.words_since_merge = 0

    def take_done(self):
        """The jobs trained since the last round and their loss, ``(jobs, loss)``, from now on the
        round's (the lock held)."""
        jobs, self.done, self.done_epoch = self.done, [], -1
        loss, self.loss = self.loss, 0.0
        return jobs, loss

    def holds_jobs(self):
        """Whether a job is queued here or being trained (taken from the queue, not yet done)."""
        with self.jobs.mutex:
            return self.jobs.unfinished_tasks > 0

    def kernel_cpu(self):
        """CPU seconds the trainer threads spent in jobs so far."""
        with self.lock:
            return float(self.train_cpu)
