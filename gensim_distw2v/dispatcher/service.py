"""The dispatcher: coordination only: membership, sessions, the job queue, epochs, progress.

Start it once per cluster, after the name server::

    python -m gensim_distw2v.nameserver -n 127.0.0.1 -p 9090
    python -m gensim_distw2v.dispatcher --ns-host 127.0.0.1 --ns-port 9090

How it works:

1. It registers as ``gensim_distw2v.dispatcher`` in the name server and waits. Workers and
   parameter shards (:mod:`gensim_distw2v.shard`) find it there (they retry until it exists) and
   say ``hello`` / ``shard_hello``; their heartbeats are long polls it answers once the session
   they should be in changes (:mod:`~gensim_distw2v.dispatcher.membership`).
2. A client opens a session (``open_session``, which names the shards that will hold the
   weights), uploads the static arrays here and the weights to the shards, and starts it. Every
   live worker joins: it fetches the config and the static arrays here, the weights from the
   shards.
3. The client streams jobs in (``put_jobs``, which pushes back when the queue is full), or,
   training from a shared corpus file, opens each epoch (``open_file_epoch``) and the dispatcher
   cuts the file into byte ranges as workers ask for work, once each worker has shown it sees the
   client's file (``file_check``); workers pull jobs (``get_jobs``), merge their updates with
   every shard every ``sync_words`` words, and report each round here (``round_done``): a job
   counts as trained only once its updates are merged. No weights pass through the dispatcher.
4. A worker that misses heartbeats for ``worker_timeout`` seconds is dropped; its jobs go back
   to the queue. A worker that starts during a session joins it. The session fails (its state
   ``failed``, with a cause the client raises) when a shard of it is lost, a merge is poisoned,
   or no worker is left to train it (:mod:`gensim_distw2v.core.session`).
5. The client polls ``progress``, downloads the final weights and closes the session; the
   dispatcher keeps serving the next one. A client silent for ``client_timeout`` seconds loses
   its session.
6. With ``checkpoint_dir``, the session is checkpointed every ``checkpoint_every`` seconds and at
   every epoch end the client asks for (``checkpoint``;
   :mod:`~gensim_distw2v.dispatcher.checkpointing`). A session opened to resume (after this
   process, a shard or the client died) starts from the newest committed checkpoint.

Its remote calls are :data:`gensim_distw2v.protocol.tables.DISPATCHER`, handled by its
client-facing (:mod:`~gensim_distw2v.dispatcher.clients`), worker-facing
(:mod:`~gensim_distw2v.dispatcher.workers`) and shard-facing
(:mod:`~gensim_distw2v.dispatcher.shards`) parts and its vocabulary-count leases
(:mod:`~gensim_distw2v.dispatcher.counts`) over one cluster state
(:mod:`~gensim_distw2v.dispatcher.state`); each call's credential is checked before its handler runs
(:mod:`~gensim_distw2v.dispatcher.guards`).
"""
from gensim_distw2v.dispatcher import overview
from gensim_distw2v.dispatcher.checkpointing import Checkpointing
from gensim_distw2v.dispatcher.clients import ClientCalls
from gensim_distw2v.dispatcher.counts import CountLeases
from gensim_distw2v.dispatcher.guards import Guards
from gensim_distw2v.dispatcher.monitor import Monitor
from gensim_distw2v.dispatcher.shards import ShardCalls
from gensim_distw2v.dispatcher.state import Cluster, Limits
from gensim_distw2v.dispatcher.workers import WorkerCalls
from gensim_distw2v.options import DispatcherOptions
from gensim_distw2v.protocol import calls, tables

__all__ = ["Dispatcher"]


class Dispatcher:
    """Coordinates a cluster: worker and shard membership, the session, its job queue (or byte
    ranges), epochs and progress. The weights are on the shards.

    Serve it with ``transport.Server(endpoints.endpoint(tables.DISPATCHER, dispatcher), ...)``; in
    a test, :meth:`local` calls it in-process through the same table.

    Parameters
    ----------
    worker_timeout : float
        Seconds without a heartbeat after which a worker is dropped and its jobs re-queued.
    client_timeout : float
        Seconds without a call from the client after which its session is aborted.
    max_queue_jobs : int
        Jobs held in the queue at most (per worker thread, at least 8 in all, and at most
        :data:`~gensim_distw2v.dispatcher.state.MAX_QUEUE_BYTES` of them): beyond that ``put_jobs`` makes the
        client wait.
    job_deadline : float
        A worker that holds jobs without merging for longer than this, and than
        :data:`~gensim_distw2v.dispatcher.state.JOB_DEADLINE_ROUNDS` typical rounds, is dropped and its jobs re-queued.
    max_model_bytes : int, optional
        The largest session's arrays this dispatcher holds (default: half this machine's memory).
    allow_takeover : bool
        Whether a client resuming a run may replace the run's running session at once (else it
        waits for the session to end).
    sign_checkpoints : bool
        Whether the checkpoints' manifests are signed with ``hmac_key`` (and read back only so).
    hmac_key : bytes, optional
        The cluster's key.
    """

    TABLE = tables.DISPATCHER

    def __init__(self, worker_timeout=DispatcherOptions.worker_timeout, client_timeout=DispatcherOptions.client_timeout,
                 max_queue_jobs=4, job_deadline=DispatcherOptions.job_deadline,
                 max_model_bytes=DispatcherOptions.max_model_bytes, allow_takeover=DispatcherOptions.allow_takeover,
                 sign_checkpoints=DispatcherOptions.sign_checkpoints, hmac_key=None):
        self.cluster = Cluster(Limits(worker_timeout=worker_timeout, client_timeout=client_timeout,
                                      max_queue_jobs=max_queue_jobs, job_deadline=job_deadline,
                                      max_model_bytes=max_model_bytes or 0, allow_takeover=bool(allow_takeover)))
        self.cluster.key = (hmac_key or None) if sign_checkpoints else None
        checkpointing = Checkpointing(self.cluster)
        self.clients = ClientCalls(self.cluster, checkpointing)
        self.workers = WorkerCalls(self.cluster)
        self.shards = ShardCalls(self.cluster, checkpointing)
        self.counts = CountLeases(self.cluster)
        self.monitor = Monitor(self.cluster, self.workers, self.shards, checkpointing, self.counts)

    def guards(self):
        """Each kind of caller's check (:class:`~gensim_distw2v.dispatcher.guards.Guards`), for the table's handlers."""
        return Guards(self.cluster).table()

    @property
    def uri(self):
        """Where it is served (the status page shows it)."""
        return self.cluster.uri

    @uri.setter
    def uri(self, uri):
        self.cluster.uri = uri

    def connection_closed(self, connection):
        """A client connection closed: if it carried a worker's or a shard's heartbeats, that
        process is gone (it died, or it is reconnecting and will say hello again as a new one)."""
        with self.cluster.cond:
            self.workers.connection_closed(connection)
            self.shards.connection_closed(connection)

    def overview(self):
        """The cluster and its session as the status page shows them (:func:`overview.overview`)."""
        return overview.overview(self.cluster)

    def local(self):
        """A :class:`gensim_distw2v.protocol.calls.Caller` calling this dispatcher in-process through
        its table (messages as plain data both ways, as over the wire): for tests."""
        return calls.Caller(self.TABLE, calls.Handlers(self.TABLE, self).handle)

    def shutdown(self):
        """Stop the monitor thread."""
        self.monitor.stop()
