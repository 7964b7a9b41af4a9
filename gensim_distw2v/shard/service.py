"""A parameter shard: holds a share of the global weights' rows and folds the workers' merges into them.

Start one per worker node, beside its worker, after the name server (the dispatcher may come
before or after)::

    python -m gensim_distw2v.shard --ns-host 127.0.0.1 --ns-port 9090

How it works:

1. It registers as ``gensim_distw2v.shard.<id>`` in the name server, finds the dispatcher there and
   says hello; a heartbeat thread keeps in touch (a shard the dispatcher stops hearing from fails
   the session it serves, naming it).
2. A client opening a session gets the shards from the dispatcher and gives shard ``p`` of ``P``
   its rows (:class:`gensim_distw2v.core.layout.ShardLayout`: every ``P``-th row from row ``p``), in
   chunks, then starts it.
3. Workers download the shard's rows when they join, and in every merge round send it the changes
   they made to its rows (:meth:`Shard.merge`); it folds them into its rows with the session's
   rule and answers with what the worker lacks of them (:class:`gensim_distw2v.core.merge.GlobalWeights`:
   work proportional to the rows moved, memory independent of the number of workers).
4. The client downloads the trained rows and closes the session. A session the dispatcher no
   longer runs is dropped at the next heartbeat.
5. Checkpoints: a heartbeat reply may carry a checkpoint order (:class:`gensim_distw2v.protocol.CheckpointOrder`);
   the shard copies its rows (merges wait only for the copy), tells the dispatcher, writes the copy
   to ``<checkpoint_dir>/shard-<p>-of-<P>/`` in a thread of its own and tells the dispatcher again
   (the dispatcher's ``shard_checkpoint``). A session resumed from a
   checkpoint gives the shard its rows as a :class:`gensim_distw2v.protocol.RestoreSpec` instead of
   uploading them: it reads them from the checkpoint's files (of every shard that held some, if the
   number of shards changed).
"""
import ctypes
import logging
import sys
import threading
import time
import uuid

from gensim_distw2v import protocol
from gensim_distw2v.io import endpoints, meter, transport
from gensim_distw2v.protocol.constants import SHARD_PREFIX
from gensim_distw2v.member import Member
from gensim_distw2v.protocol import constants, errors, tables, transfers
from gensim_distw2v.io.store import shard_store
from gensim_distw2v.versions import check_versions
from gensim_distw2v.io.meter import model_bytes_limit
from gensim_distw2v.options import ShardOptions
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.core.merge import GlobalWeights, compiled_cpu
from gensim_distw2v.shard.counts import CountTables
from gensim_distw2v.shard.guards import ShardGuards
from gensim_distw2v.shard.held import _Held
from gensim_distw2v.core.schedule import row_limits, wanted_only

logger = logging.getLogger(__name__)

__all__ = ["Shard", "cap_malloc_arenas"]

REPORT_ATTEMPTS = 5  # tries to tell the dispatcher a checkpoint's rows are written
MALLOC_ARENAS = 2


def cap_malloc_arenas(arenas=MALLOC_ARENAS):
    """Let glibc's malloc use at most ``arenas`` arenas in this process (Linux; elsewhere nothing).

    glibc gives each thread that allocates while others do an arena of its own and keeps the
    memory freed there for reuse: with K workers' calls served at once, the shard's peak RSS grew
    with K (devmix CBOW, one shard, K=2/4/8: 331 / 396 / 495 MB; with two arenas 260 / 262 / 407,
    the same CPU; docs/measurements/scaling-shards-cbow-devmix-2026-11-24.json). The rest of the
    growth was the bulk transfers' part size (gensim_distw2v.worker.training.BULK_PART_DIVISOR).
    Returns whether the cap is set.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(-8, int(arenas)))  # -8: M_ARENA_MAX
    except (OSError, AttributeError):
        return False


class Shard(Member):
    """A shard process's remote face and its heartbeat loop.

    Parameters
    ----------
    ns_conf : dict
        Where the name server is.
    hmac_key : bytes, optional
        The cluster's HMAC key.
    heartbeat : float
        Seconds between heartbeats.
    max_model_bytes : int, optional
        The most this shard's rows of a session may take (default: half this machine's memory).
    sign_checkpoints : bool
        Whether its checkpoints' manifests are signed with ``hmac_key`` (and read back only so).
    """

    ROLE = "shard"
    TABLE = tables.SHARD  # its remote calls

    def __init__(self, ns_conf, hmac_key=None, heartbeat=ShardOptions.heartbeat,
                 max_model_bytes=ShardOptions.max_model_bytes, sign_checkpoints=ShardOptions.sign_checkpoints):
        self.ns_conf, self.hmac_key = dict(ns_conf), hmac_key
        self.max_model_bytes = model_bytes_limit(max_model_bytes)
        if hmac_key:
            self.ns_conf["hmac_key"] = hmac_key
        self.heartbeat_every = heartbeat
        self.checkpoint_key = hmac_key if sign_checkpoints else None
        self.meter = meter.Meter("shard", calls=True)  # its calls too: merges apart from serving downloads
        self.name = SHARD_PREFIX + uuid.uuid4().hex[:12]
        self.uri = None
        self.channel_port = 0  # its bulk channel's (gensim_distw2v.io.channel), once serving; 0: none
        self.lock = threading.Lock()
        self.held = None
        self.told = None  # the session the dispatcher last said it runs (a heartbeat's news is what differs)
        self.grant = None  # that session's ShardBeat: who may open it here, the checkpoints it may restore from
        self.granted = threading.Condition(self.lock)
        self.count_grant = (None, None)  # the count the dispatcher leases, and its owner's digest (dispatcher.counts)
        self.stopped = threading.Event()
        self.ordered = (None, 0)  # the last checkpoint order taken: (session, sequence)
        self.dispatcher_uri = None
        self.writing = threading.Lock()  # one checkpoint write at a time (a replaced session's may still run)
        # vocabulary counts (their calls: count_*), the dispatcher's leased one only
        self.counts = CountTables(self.name, self.max_model_bytes, self._count_granted)

    # ------------------------------------------------------------------ helpers (not remote)
    def _held(self, sid, started=True):
        held = self.held
        if held is None or held.id != sid:
            raise errors.SessionClosed(f"shard {self.name} holds no session {sid!r} (it may have been closed, or "
                                       f"replaced, or the shard restarted)")
        if started is not None and started != (held.weights is not None):
            raise errors.BadRequest(f"session {sid} on shard {self.name} is {'not ' if started else ''}started yet")
        return held

    # ------------------------------------------------------------------ remote (protocol.tables.SHARD): client
    def guards(self):
        """Each kind of caller's check (:class:`~gensim_distw2v.shard.guards.ShardGuards`), for the table's handlers."""
        return ShardGuards(self).table()

    def status(self, _request=None):
        """What this shard holds: a :class:`gensim_distw2v.protocol.ShardStatus`."""
        held = self.held
        return protocol.ShardStatus(name=self.name, session=None if held is None else protocol.HeldStatus(
            id=held.id, index=held.spec.index, count=held.spec.count, rows=held.n_rows,
            started=held.weights is not None, merges=held.merges, merge_cpu=held.merge_cpu, exact_cpu=held.exact_cpu,
            routine_nogil_cpu=held.routine_nogil_cpu,
            bytes_in=held.bytes_in, bytes_out=held.bytes_out,
            damped=0 if held.weights is None else held.weights.damped,
            workers=0 if held.weights is None else len(held.weights.slots)), node=self.metrics())

    def check_grant(self, spec, op="open_session"):
        """Check that ``spec`` comes from the owner of a session the dispatcher runs (waiting up to
        :data:`~gensim_distw2v.protocol.constants.GRANT_WAIT` seconds for its word), restoring from
        that session's checkpoints only: the guard of ``open_session`` (auth ``grant``)."""
        deadline = time.monotonic() + constants.GRANT_WAIT
        with self.granted:
            while (self.grant is None or self.grant.session != spec.session) and time.monotonic() < deadline:
                self.granted.wait(deadline - time.monotonic())
            grant = self.grant
        if grant is None or grant.session != spec.session:
            raise errors.SessionClosed(f"{op}: the dispatcher runs no session {spec.session!r} (this shard "
                                       f"heard of none within {constants.GRANT_WAIT:.0f} s)")
        protocol.check_token(protocol.owner_digest(spec.owner), grant.owner, op, owner=True)
        restore = spec.restore
        if restore is not None and (restore.dir != grant.checkpoint_dir or restore.run != grant.run):
            raise errors.Forbidden(f"{op}: session {spec.session} may restore rows from its own checkpoints "
                                   f"only (its folder and run), not from {restore.dir[:200]!r}")

    def _count_granted(self, count):
        """The digest of count ``count``'s secret once the dispatcher leases it (waiting up to
        :data:`~gensim_distw2v.protocol.constants.GRANT_WAIT` seconds for its word), or None."""
        deadline = time.monotonic() + constants.GRANT_WAIT
        with self.granted:
            while self.count_grant[0] != count and time.monotonic() < deadline:
                self.granted.wait(deadline - time.monotonic())
            leased, owner = self.count_grant
        return owner if leased == count else None

    def open_session(self, spec):
        """Hold a session's share of rows (any other session held is dropped): ``spec``, a
        :class:`gensim_distw2v.protocol.ShardSpec`, says which, and where a resumed session's rows are.
        Only the session's owner may (the client that opened it on the dispatcher), and a resumed
        session's rows come from its own checkpoint folder only."""
        check_versions(spec.versions, "the client")
        need = ShardLayout(spec.count).count(spec.vocab_size, spec.index) * spec.vector_size * 4 * len(spec.weights)
        if need > self.max_model_bytes:
            raise errors.Full(f"open_session: this shard's rows need {need / 2 ** 20:.0f} MiB, more than its limit of "
                             f"{self.max_model_bytes / 2 ** 20:.0f} MiB; start more shards, or start this one with "
                             f"--max-model-bytes N (default: half the machine's memory)")
        held = _Held(spec)
        if spec.restore is not None:
            held.restore(spec.restore, self.checkpoint_key)
        with self.lock:
            if self.held is not None:
                logger.info("session %s dropped: session %s replaces it", self.held.id, spec.session)
            self.held = held
            self.meter.mark(spec.session)
        logger.info("session %s opened: shard %i of %i, %i of %i rows x %i dimensions of %s, merge=%s",
                    spec.session, spec.index, spec.count, held.n_rows, spec.vocab_size, spec.vector_size,
                    "/".join(spec.weights), spec.merge)

    def upload(self, request):
        """Receive this shard's rows ``[lo, lo + len)`` of a matrix, in order, in parts (a
        :class:`gensim_distw2v.protocol.session.Upload`, with the session's token)."""
        with self.lock:
            held = self._held(request.session, started=False)
            name = request.name
            target = held.array(name, 0, 0, "upload", self.name)
            try:
                held.received[name] = transfers.receive_part(target, held.received[name], request.lo, request.array,
                                                             f"upload: {name} chunk")
            except errors.ClusterFault:
                raise
            except ValueError as err:
                raise errors.BadRequest(str(err)) from None

    def start(self, request):
        """Every row is uploaded (a :class:`gensim_distw2v.protocol.session.SessionRef`): merges may begin."""
        sid = request.session
        with self.lock:
            held = self._held(sid, started=False)
            missing = [name for name, n in held.received.items() if n != held.n_rows]
            if missing:
                raise errors.BadRequest(f"start: rows of {missing} not fully uploaded to shard {self.name}")
            spec = held.spec
            damp = {name: held.layout.count(n, spec.index) for name, n in spec.damp_rows.items()}
            held.weights = GlobalWeights(held.arrays, rule=spec.merge, damp_rows=damp, codec=spec.merge_dtype,
                                         delta_rows={"syn0": held.layout.count(spec.hot_rows, spec.index),
                                                     "syn1neg": held.layout.count(max(spec.hot_rows,
                                                                                      spec.output_hot_rows), spec.index),
                                                     "syn1": held.layout.count(spec.tree_hot_rows, spec.index)},
                                         wanted_only=wanted_only(spec.cold_output_down))
        logger.info("session %s started on shard %i of %i", sid, spec.index, spec.count)

    def download(self, request):
        """This shard's rows ``[lo, hi)`` of a matrix (a :class:`gensim_distw2v.protocol.rounds.ShardDownload`),
        as an array message.

        A worker of the session names itself by its ``rank`` and shows the session's ``token``: the
        rows it downloads become its view of them for the merges
        (:meth:`gensim_distw2v.core.merge.GlobalWeights.download`); its first download takes it a slot
        (a snapshot of the damped and hot rows), refused if it would pass ``max_model_bytes``.
        """
        sid, name, lo, hi, rank = request.session, request.name, request.lo, request.hi, request.rank
        with self.lock:
            held = self._held(sid, started=True if rank is not None else None)
            held.array(name, lo, hi, "download", self.name)
            weights = held.weights
            if rank is not None:
                if rank in held.gone:
                    raise errors.NotInSession(f"download: worker rank {rank} left session {sid}: join it again")
                if rank not in weights.slots:
                    held.room_for_one_more(self.name, self.max_model_bytes)
                    weights.add_worker(rank)
        if weights is None:
            return protocol.pack_array(held.arrays[name][lo:hi].copy())
        out = weights.download(name, lo, hi, rank)
        held.bytes_out += out.nbytes
        return protocol.pack_array(out)

    def close(self, request):
        """Drop a session (the client has its weights, or gave up), given its token (a
        :class:`gensim_distw2v.protocol.session.Close`); a session not held is no error."""
        sid = request.session
        with self.lock:
            if self.held is not None and self.held.id == sid:
                logger.info("session %s closed after %i merges (%.1f s of CPU in them)", sid, self.held.merges,
                            self.held.merge_cpu)
                self.held = None

    # ------------------------------------------------------------------ remote (protocol.tables.SHARD): workers
    def channel(self, _request=None):
        """The port of this shard's bulk channel, which carries merges (0: none; its host is the URI's)."""
        return self.channel_port

    def merge(self, part):
        """Fold one part of a worker's merge round into this shard's rows.

        Parameters
        ----------
        part : gensim_distw2v.protocol.MergePart
            In this shard's rows; checked on its own on arrival, against the session here.

        Returns
        -------
        gensim_distw2v.protocol.MergeReply
        """
        cpu, compiled = time.thread_time(), compiled_cpu()
        sid, rank = part.session, part.rank
        held = self._held(sid)
        if rank in held.poisoned:
            raise errors.Poisoned(f"worker rank {rank} is refused in session {sid}: {held.poisoned[rank]}")
        try:
            part.fit(held.n_rows, held.spec.vector_size, held.spec.weights, held.spec.max_delta)
        except errors.Poisoned as err:
            if rank in held.weights.slots:
                with self.lock:
                    held.poisoned.setdefault(rank, str(err))
                logger.error("session %s: refused a merge of worker rank %i: %s", sid, rank, err)
            raise
        except ValueError as err:
            raise errors.BadRequest(str(err)) from None
        if rank in held.gone:
            raise errors.NotInSession(f"worker rank {rank} left session {sid}: join it again")
        if part.exact:  # an epoch's flush: a cost per epoch, counted apart from the routine rounds'
            meter.CALLS.name("merge_flush")
        missed, values = held.weights.apply(part.rank, part.lo, part.hi, part.matrices, part.hold_back, part.exact,
                                            row_limits(part.hot_rows, part.tree_hot_rows, part.output_hot_rows),
                                            part.wanted, output_down=part.output_down)
        reply = protocol.MergeReply(
            matrices={name: protocol.pack_deltas(*d) for name, d in missed.items() if len(d[0])},
            values={name: protocol.pack_deltas(*v) for name, v in values.items() if len(v[0])})
        with self.lock:
            held.merges += 1
            held.bytes_in += sum(r.nbytes + v.nbytes + (0 if c is None else c.nbytes)
                                 for r, v, c in part.matrices.values())
            held.bytes_out += sum(r.nbytes + v.nbytes + (0 if c is None else c.nbytes)
                                  for way in (missed, values) for r, v, c in way.values())
            held.merge_cpu += time.thread_time() - cpu
            if part.exact:
                held.exact_cpu += time.thread_time() - cpu
            else:  # of a routine part, the compiled calls' (folding, the reply)
                held.routine_nogil_cpu += compiled_cpu() - compiled
        return reply

    # ------------------------------------------------------------------ the dispatcher
    # ------------------------------------------------------------------ membership (gensim_distw2v.member)
    def beat_request(self):
        """A heartbeat: the session held, and the workers whose merges it refused as poison (not told yet)."""
        held = self.held
        self._asked, self._asking = time.monotonic(), held
        poisoned = {}
        if held is not None:
            with self.lock:
                poisoned = {str(rank): why for rank, why in held.poisoned.items() if rank not in held.told}
        # known: the session held, else the one the dispatcher last told of (not None: a session it runs
        # but this shard does not hold yet is no news to answer at once, again and again, until the
        # client opens it here)
        return protocol.Heartbeat(name=self.name, secret=self.secret, known=held.id if held else self.told,
                                  wait=self.heartbeat_every, count=self.count_grant[0],
                                  poisoned=poisoned or None, metrics=self.metrics())

    def on_beat(self, link, request, beat):
        if request.poisoned:
            self._asking.told.update(int(rank) for rank in request.poisoned)
        self.told = beat.session
        with self.granted:
            self.grant = beat if beat.session is not None else None
            self.count_grant = (beat.count, beat.count_owner)
            self.granted.notify_all()
        self.counts.keep_only(beat.count, self._asked)
        self._beat(beat, self._asked)
        if beat.checkpoint is not None:
            self._checkpoint(link, beat.session, beat.checkpoint)

    def _beat(self, beat, asked):
        """Act on the dispatcher's heartbeat reply (asked at ``asked``, monotonic): free the slots of
        workers that left, drop a session the dispatcher no longer runs."""
        with self.lock:
            held = self.held
            if held is None or held.opened > asked:  # opened since: the reply may predate it
                return
            if beat.session != held.id:
                logger.info("session %s dropped: the dispatcher no longer runs it", held.id)
                self.held = None
                return
            if held.weights is not None:
                live = set(beat.ranks)
                for rank in list(held.weights.slots):
                    if rank < beat.next_rank and rank not in live:
                        held.weights.remove_worker(rank)
                        held.gone.add(rank)
                        logger.info("worker rank %i left session %s: its slot is free", rank, held.id)

    def _checkpoint(self, proxy, sid, order):
        """Act on a checkpoint order: copy the session's rows, report it, write them in a thread."""
        if self.ordered == (sid, order.sequence):
            return  # taken already (the dispatcher has not heard yet)
        started = time.monotonic()
        with self.lock:
            held = self.held
            if held is None or held.id != sid or held.weights is None:
                return
            with held.weights.exclusive():  # no merge folds meanwhile: a copy between two folds
                rows = {name: array.copy() for name, array in held.arrays.items()}
            spec = held.spec
        try:
            proxy.call("shard_checkpoint", name=self.name, secret=self.secret, session=sid, report=protocol.ShardCheckpoint(
                sequence=order.sequence, stage="taken", seconds=time.monotonic() - started))
        except ValueError as err:  # the session ended meanwhile (a lost dispatcher: the beat loop sees it)
            logger.warning("checkpoint %i: could not tell the dispatcher the rows were taken: %s", order.sequence, err)
            self.stopped.wait(0.1)
            return
        self.ordered = (sid, order.sequence)
        threading.Thread(target=self._write_checkpoint, args=(sid, spec, order, rows, self.dispatcher_uri), daemon=True,
                         name=f"checkpoint-{order.sequence}").start()

    def _write_checkpoint(self, sid, spec, order, rows, uri):
        """Write a checkpoint's rows (a thread of its own) and tell the dispatcher."""
        started = time.monotonic()
        try:
            with self.writing:
                store = shard_store(order.dir, spec.index, spec.count, key=self.checkpoint_key)
                sequence = store.write({"run": order.run, "session": sid, "index": spec.index, "count": spec.count,
                                        "vocab_size": spec.vocab_size, "vector_size": spec.vector_size}, rows,
                                       sequence=order.sequence)
                nbytes = store.size(sequence)
                store.prune(order.keep_from)
            report = protocol.ShardCheckpoint(sequence=order.sequence, stage="written", bytes=nbytes,
                                          seconds=time.monotonic() - started)
        except Exception as err:  # noqa: B902 - any failure is reported (the thread must not die silently)
            logger.error("checkpoint %i of session %s: could not write this shard's rows to %s: %s", order.sequence,
                         sid, order.dir, err)
            report = protocol.ShardCheckpoint(sequence=order.sequence, stage="failed", error=f"{type(err).__name__}: {err}")
        del rows
        for attempt in range(REPORT_ATTEMPTS):  # a report lost would leave the checkpoint hanging to its deadline
            try:
                link = endpoints.link(uri, tables.DISPATCHER, self.hmac_key, timeout=30.0)
                try:
                    link.call("shard_checkpoint", name=self.name, secret=self.secret, session=sid, report=report)
                finally:
                    link.release()
                return
            except ValueError as err:  # the session is over: nothing to tell
                logger.info("checkpoint %i: the dispatcher no longer wants it (%s)", order.sequence, err)
                return
            except transport.PyroError as err:
                logger.warning("checkpoint %i: could not tell the dispatcher the rows were %s (attempt %i of %i): %s",
                               order.sequence, report.stage, attempt + 1, REPORT_ATTEMPTS, err)
                if self.stopped.wait(1.0 + attempt):
                    return

    def session_metrics(self):
        """This shard's :class:`gensim_distw2v.protocol.NodeMetrics` in the session it holds (None: none)."""
        held = self.held
        if held is not None and self.meter.session == held.id:
            return self.meter.sample(merge_cpu=held.merge_cpu)
        if held is None and self.meter.session is not None:
            self.meter.mark(None)
        return None
