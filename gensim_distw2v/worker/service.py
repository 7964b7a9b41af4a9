"""A worker: holds a replica of the model and trains jobs with T threads (the GIL released).

Start one per node (or more), after the name server; the dispatcher may come before or after::

    python -m gensim_distw2v.worker --ns-host 127.0.0.1 --ns-port 9090 --threads 4

How it works:

1. It registers as ``gensim_distw2v.worker.<id>`` in the name server, then looks for the
   dispatcher there until it finds it, and says hello (again whenever the dispatcher restarts
   or forgets it).
2. A heartbeat thread tells the dispatcher it is alive and learns of training sessions.
3. For a session it fetches the config and the static arrays from the dispatcher and the weights
   from the session's parameter shards (:mod:`gensim_distw2v.shard`), in chunks, builds its
   replica, and runs T trainer threads on jobs pulled from the dispatcher with a small prefetch. Training from a
   shared corpus file, it first checks that it sees the client's file, and its jobs are byte
   ranges of the file that it reads and encodes itself (:mod:`gensim_distw2v.io.corpusfile`).
4. Every ``sync_words`` words (and whenever it runs out of jobs) it merges: it sends the rows it
   changed, each straight to the shard that owns it, to every shard at once, and takes in the rows
   other workers changed (:mod:`gensim_distw2v.core.merge`), while its trainer threads go on (they wait
   only once the next interval is used up before the round is done: the wait is counted and
   reported); then it tells the dispatcher which jobs the round carried.
5. When the session closes it drops the replica and waits for the next one.
"""
import collections
import logging
import os
import threading
import uuid

from gensim_distw2v import protocol
from gensim_distw2v.core.replica import merge_threads as default_merge_threads
from gensim_distw2v.protocol import tables
from gensim_distw2v.io import endpoints, meter, transport
from gensim_distw2v.protocol.constants import WORKER_PREFIX
from gensim_distw2v.io.corpusfile import corpus_folders
from gensim_distw2v.member import Member
from gensim_distw2v.options import WorkerOptions
from gensim_distw2v.versions import versions
from gensim_distw2v.worker.counting import Counting
from gensim_distw2v.worker.training import SessionLost, _Training

logger = logging.getLogger(__name__)

__all__ = ["Worker", "SessionLost"]


class Worker(Member):
    """A worker process's remote face and its loops (its membership: :class:`gensim_distw2v.member.Member`).

    Parameters
    ----------
    ns_conf : dict
        Where the name server is.
    threads : int
        Trainer threads (default: the node's cores).
    hmac_key : bytes, optional
        The cluster's HMAC key.
    heartbeat : float
        Seconds between heartbeats (each is a long poll: a new session is seen at once).
    merge_threads : int, optional
        Threads that take and apply a merge round's rows (:class:`gensim_distw2v.core.replica.Replica`);
        default :func:`gensim_distw2v.core.replica.merge_threads` of ``threads``.
    corpus_dir : str, optional
        The only folders (``:``-separated) whose files it reads as corpora (None: any file).

    Raises
    ------
    ValueError
        A ``corpus_dir`` folder that is not one.
    """

    ROLE = "worker"
    TABLE = tables.WORKER  # its remote calls

    def __init__(self, ns_conf, threads=WorkerOptions.threads, hmac_key=None, heartbeat=WorkerOptions.heartbeat,
                 merge_threads=WorkerOptions.merge_threads, corpus_dir=WorkerOptions.corpus_dir):
        self.ns_conf, self.hmac_key = dict(ns_conf), hmac_key
        self.corpus_dirs = corpus_folders(corpus_dir)
        if hmac_key:
            self.ns_conf["hmac_key"] = hmac_key
        self.threads = threads or os.cpu_count() or 1
        self.merge_threads = merge_threads or default_merge_threads(self.threads)
        self.heartbeat_every = heartbeat
        self.meter = meter.Meter("worker", self.threads)
        self.name = WORKER_PREFIX + uuid.uuid4().hex[:12]
        self.uri = None
        self.stopped = threading.Event()
        self.session_wanted = None  # session id the dispatcher says we should be in
        self.dispatcher_uri = None
        self.training = None
        self.trained_sessions = collections.deque(maxlen=10)
        self.hellos = 0  # hellos said: sessions ended before the last one are not "trained" for the dispatcher
        self.hello_lock = threading.Lock()  # (hellos and trained_sessions change together)
        self.counting = Counting(self)  # its count call: vocabulary counts (gensim_distw2v.worker.counting)

    def guards(self):
        """Each kind of caller's check, for the table's handlers: a count's ranges come from the
        dispatcher's lease (:meth:`Counting.check_lease`)."""
        return {"lease": self.counting.check_lease}

    def status(self, _request=None):
        """What this worker is doing: a :class:`gensim_distw2v.protocol.WorkerStatus`."""
        training = self.training
        return protocol.WorkerStatus(name=self.name, threads=self.threads, dispatcher=self.dispatcher_uri,
                                     session=training.sid if training is not None else None)

    def check_alive(self, training):
        """Raise SessionLost if ``training`` should stop (session ended, dispatcher gone, shutting down)."""
        if self.stopped.is_set() or self.session_wanted != training.sid or training.stop.is_set():
            raise SessionLost(training.sid)

    # ------------------------------------------------------------------ membership (gensim_distw2v.member)
    def hello_request(self):
        return protocol.Hello(name=self.name, uri=self.uri, versions=versions(), threads=self.threads)

    def beat_request(self):
        return protocol.Heartbeat(name=self.name, secret=self.secret, known=self.session_wanted,
                                  wait=self.heartbeat_every, metrics=self.metrics(), count=self.counting.leased())

    def found(self, uri):
        self.dispatcher_uri = uri
        with self.hello_lock:
            self.hellos += 1
            self.trained_sessions.clear()  # after a new hello the dispatcher treats us as new

    def lost(self, asked):
        self.session_wanted = None
        self.counting.lease(None, None, None)
        if not asked:
            self.dispatcher_uri = None

    def on_beat(self, link, request, beat):
        """Start and stop session work as the dispatcher says, and count for the count it leases only."""
        self.counting.lease(beat.count, beat.count_corpus, beat.count_shards)
        self.session_wanted = beat.session
        old = self.training
        if old is not None and old.sid != self.session_wanted:
            # its session is over for the dispatcher; it may still be blocked in a call on a dead
            # connection (after a network cut): stop it and do not wait for it
            old.stop.set()
            old = None
        if self.session_wanted and old is None and self.session_wanted not in self.trained_sessions:
            self.training = _Training(self, self.session_wanted, None)
            threading.Thread(target=self._run_session, args=(self.training, self.hellos), daemon=True,
                             name="session").start()

    def session_metrics(self):
        """This worker's :class:`gensim_distw2v.protocol.NodeMetrics` in its session (None: none)."""
        training = self.training
        if training is not None and self.meter.session == training.sid:
            return training.metrics()
        return None

    def _run_session(self, training, hellos):
        """Train ``training``'s session until it ends here; ``hellos``: :attr:`hellos` when it began. A session
        ended after a newer hello (dropped meanwhile, then back) is not remembered as trained: the dispatcher
        counts this worker as new, and it joins that session again if it still runs (else it would wait for a
        worker that never comes)."""
        training.proxy = endpoints.link(self.dispatcher_uri, tables.DISPATCHER, self.hmac_key, timeout=60.0)
        try:
            training.run()
        except SessionLost:
            logger.info("session %s ended", training.sid)
        except transport.PyroError as err:  # the dispatcher is gone, or drops this worker as its link closed
            logger.warning("session %s stopped on this worker: %s", training.sid, err)
        except (ValueError, RuntimeError) as err:
            logger.warning("session %s stopped on this worker: %s", training.sid, err)
            self._quit(training, f"{err}", getattr(err, "code", None))
        except Exception as err:  # noqa: BLE001 - a worker keeps serving whatever one session did
            logger.exception("session %s failed on this worker", training.sid)
            self._quit(training, f"{type(err).__name__}: {err}")
        finally:
            training.stop.set()
            transport.release(training.proxy)
            with self.hello_lock:
                if hellos == self.hellos:
                    self.trained_sessions.append(training.sid)
            self.meter.mark(None)
            if self.training is training:  # a newer session may have started meanwhile
                self.training = None

    def _quit(self, training, reason, code=None):
        """Tell the dispatcher the session failed here, so that its jobs go to other workers and
        the client stops waiting for this one."""
        try:
            training.proxy.call("quit_session", name=self.name, secret=self.secret, session=training.sid,
                                reason=reason, code=None if code is None else str(getattr(code, "value", code)))
        except (transport.PyroError, ValueError) as err:  # the session or the dispatcher is gone already
            logger.info("could not tell the dispatcher that session %s failed here: %s", training.sid, err)
