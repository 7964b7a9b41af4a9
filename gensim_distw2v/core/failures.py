"""A session's failure: the events that fail it, and the cause it keeps (no sockets, no clock).

Mixed into :class:`gensim_distw2v.core.session.Session`: a failed session's state is ``failed``
and :attr:`~gensim_distw2v.core.session.Session.failure` (a :class:`gensim_distw2v.protocol.Failure`) says why: a code
of
:class:`gensim_distw2v.protocol.errors.Code` and a message. The first cause's code stays; later
causes of the same code are added to its message (a second shard lost, say).
"""
from gensim_distw2v import protocol
from gensim_distw2v.protocol.constants import CLOSED, FAILED, RUNNING
from gensim_distw2v.protocol.errors import Code

__all__ = ["DROPPED", "SessionFailures"]

# the codes of a worker's quit that say the dispatcher (or a shard, told by it) no longer counted it a member: it
# was dropped meanwhile (frozen or cut off past the heartbeat) and rejoins by itself
DROPPED = frozenset({Code.UNKNOWN_MEMBER.value, Code.NOT_IN_SESSION.value})
# seconds a running session may have registered workers and none in it (they join within a heartbeat), at least
JOIN_WAIT = 10.0


class SessionFailures:
    """The failure events of a :class:`~gensim_distw2v.core.session.Session` (see the module's docstring)."""

    _FAILURES = {  # code -> (the message's start, how causes are joined, its end)
        Code.SHARD_LOST: ("lost parameter shard ", "; ", ""),
        Code.POISONED: ("a worker sent a merge that would poison the model, so this train() call stops: ", "; ", ""),
        Code.NO_WORKERS: ("", "; ", ""),
        Code.WORKERS_DROPPED: ("", "; ", ""),
        Code.CORPUS_FILE: ("", "; ", ""),
    }

    def _fail(self, code, cause):
        """The session cannot go on: it fails with ``code`` (the first cause's code stays; later
        causes of that code are added to its message). True if this failed it."""
        if self.state == CLOSED or (self.failure is not None and self.failure.code != code.value):
            return False
        start, join, end = self._FAILURES[code]
        self._causes.append(cause)
        self.failure = protocol.Failure(code=code.value, message=start + join.join(self._causes) + end)
        if self.state != FAILED:
            self._move("fail")
            return True
        return False

    def excuse(self, seconds):
        """Event: the holder did not run for ``seconds`` (stopped, or starved of CPU): the silence its clocks
        measure (the client's calls, jobs held without a merge, no worker left or joined) was its own, so they
        do not count it."""
        if self.client_seen is not None:
            self.client_seen += seconds
        self.no_workers_since = None if self.no_workers_since is None else self.no_workers_since + seconds
        self.unjoined_since = None if self.unjoined_since is None else self.unjoined_since + seconds
        for name in self.last_round:
            self.last_round[name] += seconds

    def lose_shard(self, name, reason):
        """Event: a shard is gone. If it held rows of this session, the session fails
        (``shard_lost``); True if it was one of its shards."""
        if self.state == CLOSED or all(name != held for held, _uri in self.shards):
            return False
        self._fail(Code.SHARD_LOST, f"{name} ({reason})")
        return True

    def poison(self, worker, why):
        """Event: a shard refused a merge of ``worker`` as beyond the session's bound: the session
        fails (``poisoned``), naming it; it leaves the session. False if it was named before."""
        if worker in self.poisoned:
            return False
        self.poisoned.add(worker)
        self.release(worker)
        self._fail(Code.POISONED, f"worker {worker}: {why}")
        return True

    def workers_seen(self, registered, now):
        """Event: the workers registered with the holder now (names), at ``now`` (its clock). The
        session fails when no worker is left to train it: every one quit it (``no_workers``; at once,
        unless each quit because it lost a shard: that shard's loss is the cause, seen within a
        heartbeat; ``workers_dropped`` if each quit because it had been dropped from the cluster), none
        has been registered for ``cluster_timeout`` seconds (``no_workers``), or every one reported it
        does not see the corpus file (``corpus_file``). Returns True if this failed it."""
        if self.state != RUNNING:
            return False
        able = [name for name in registered if name not in self.quit]
        if able:
            self.no_workers_since = None
            # registered workers join a running session within a heartbeat: none in it for long is a stuck session
            self.unjoined_since = None if self.ranks else self.unjoined_since if self.unjoined_since is not None \
                else now
            waited = 0.0 if self.unjoined_since is None else now - self.unjoined_since
            if waited > max(JOIN_WAIT, self.config.settings.cluster_timeout):
                return self._fail(Code.NO_WORKERS, (
                    f"no worker is in the session, and none of the {len(able)} registered joined it for {waited:.0f} "
                    f"s: their logs say why"))
            if self.file is not None and all(self.file_checks.get(name) for name in able):
                problems = sorted((name, self.file_checks[name]) for name in able)
                return self._fail(Code.CORPUS_FILE, (
                    f"corpus_file {self.file.path}: {len(problems)} of {len(problems)} workers do not see the file "
                    f"this client sees ({self.file.size} bytes) at that path: "
                    + "; ".join(f"worker {name}: {problem}" for name, problem in problems)))
            return False
        quit_ = (
            "training failed on every worker of the session, so nothing trains it: "
            + "; ".join(f"worker {name}: {reason}" for name, reason in sorted(self.quit.items()))
            + ". The workers' logs have the details; they keep serving other sessions")
        codes = set(self.quit_codes.values())
        if codes - {Code.SHARD_LOST.value}:  # (none quit, or each for a lost shard: that loss fails it, below)
            # every one dropped meanwhile (some may have lost a shard too): they rejoin by themselves, and a run
            # with checkpoints resumes; else one failed at training itself, which a resume would meet again
            dropped = codes <= DROPPED | {Code.SHARD_LOST.value}
            return self._fail(Code.WORKERS_DROPPED if dropped else Code.NO_WORKERS, quit_)
        # none left, or every one quit for a lost shard: that shard's loss fails the session (it is
        # seen within a heartbeat); else, after cluster_timeout, the workers' absence does
        self.no_workers_since = self.no_workers_since if self.no_workers_since is not None else now
        gone = now - self.no_workers_since
        if gone > self.config.settings.cluster_timeout:
            return self._fail(Code.NO_WORKERS, quit_ if self.quit else (
                f"all workers lost: none has been registered with the dispatcher for {gone:.0f} s; the jobs not "
                f"yet merged were not trained. Start workers with: python -m gensim_distw2v.worker"))
        return False

    def file_waiting(self, registered):
        """Registered workers that have neither checked the corpus file nor quit (None without one)."""
        if self.file is None:
            return None
        return sum(1 for name in registered if name not in self.file_checks and name not in self.quit)
