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
   (:meth:`gensim_distw2v.dispatcher.Dispatcher.shard_checkpoint`). A session resumed from a
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

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.io import meter, transport
from gensim_distw2v.io.store import CheckpointError, shard_store
from gensim_distw2v.versions import check_versions, versions
from gensim_distw2v.io.meter import model_bytes_limit
from gensim_distw2v.core.layout import ShardLayout
from gensim_distw2v.core.merge import GlobalWeights
from gensim_distw2v.core.schedule import row_limits

logger = logging.getLogger(__name__)

__all__ = ["Shard", "cap_malloc_arenas"]

MAX_RANK = 2 ** 31
REPORT_ATTEMPTS = 5  # tries to tell the dispatcher a checkpoint's rows are written
MALLOC_ARENAS = 2


def cap_malloc_arenas(arenas=MALLOC_ARENAS):
    """Let glibc's malloc use at most ``arenas`` arenas in this process (Linux; elsewhere nothing).

    glibc gives each thread that allocates while others do an arena of its own and keeps the
    memory freed there for reuse: with K workers' calls served at once, the shard's peak RSS grew
    with K (devmix CBOW, one shard, K=2/4/8: 331 / 396 / 495 MB; with two arenas 260 / 262 / 407,
    the same CPU; docs/measurements/scaling-shards-cbow-devmix-2026-11-24.json). The rest of the
    growth was the bulk transfers' part size (gensim_distw2v.worker.BULK_PART_DIVISOR).
    Returns whether the cap is set.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(-8, int(arenas)))  # -8: M_ARENA_MAX
    except (OSError, AttributeError):
        return False


class _Held:
    """One session's rows on this shard."""

    def __init__(self, spec):
        self.spec = spec
        self.layout = ShardLayout(spec.count)
        self.n_rows = self.layout.count(spec.vocab_size, spec.index)
        self.arrays = {name: np.zeros((self.n_rows, spec.vector_size), dtype=np.float32) for name in spec.weights}
        self.received = {name: 0 for name in spec.weights}
        self.weights = None  # GlobalWeights once started
        self.opened = time.monotonic()
        self.gone = set()  # ranks of workers that left the session: refused from now on
        self.poisoned = {}  # rank -> why its merge was refused as poison (told to the dispatcher, then refused)
        self.told = set()  # ranks of ``poisoned`` the dispatcher has heard of
        self.merges = 0
        self.merge_cpu = 0.0  # CPU seconds in merge calls: checking, folding, the reply
        self.bytes_in = self.bytes_out = 0

    @property
    def id(self):
        return self.spec.session


class Shard:
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
    """

    def __init__(self, ns_conf, hmac_key=None, heartbeat=1.0, max_model_bytes=None):
        self.ns_conf, self.hmac_key = dict(ns_conf), hmac_key
        self.max_model_bytes = model_bytes_limit(max_model_bytes)
        if hmac_key:
            self.ns_conf["hmac_key"] = hmac_key
        self.heartbeat_every = heartbeat
        self.meter = meter.Meter("shard")
        self.name = transport.SHARD_PREFIX + uuid.uuid4().hex[:12]
        self.uri = None
        self.lock = threading.Lock()
        self.held = None
        self.stopped = threading.Event()
        self.ordered = (None, 0)  # the last checkpoint order taken: (session, sequence)
        self.dispatcher_uri = None
        self.writing = threading.Lock()  # one checkpoint write at a time (a replaced session's may still run)

    # ------------------------------------------------------------------ helpers (not remote)
    def _held(self, sid, started=True):
        held = self.held
        if held is None or held.id != sid:
            raise ValueError(f"shard {self.name} holds no session {sid!r} (it may have been closed, or replaced, or "
                             f"the shard restarted)")
        if started is not None and started != (held.weights is not None):
            raise ValueError(f"session {sid} on shard {self.name} is {'not ' if started else ''}started yet")
        return held

    def _array(self, held, name, lo, hi, what):
        if name not in held.arrays:
            raise ValueError(f"{what}: shard {self.name} holds no matrix {name!r} (it holds {sorted(held.arrays)})")
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= held.n_rows):
            raise ValueError(f"{what}: rows [{lo}, {hi}) outside this shard's [0, {held.n_rows})")
        if (hi - lo) * held.spec.vector_size * 4 > protocol.MAX_ARRAY_BYTES:
            raise ValueError(f"{what}: too many rows in one chunk")
        return held.arrays[name]

    def _room_for_one_more(self, held):
        """Refuse a worker's slot that would take this shard's session past ``max_model_bytes``."""
        weights = held.weights
        rows = sum(held.arrays[name].nbytes for name in held.arrays)
        snapshot = sum(weights.snap_rows[name] * held.spec.vector_size * 4 for name in held.arrays)
        need = rows + (len(weights.slots) + 1) * snapshot
        if need > self.max_model_bytes:
            raise ValueError(f"download: one more worker ({len(weights.slots) + 1} in all, a {snapshot / 2 ** 20:.0f} MiB "
                             f"snapshot each) would take shard {self.name} to {need / 2 ** 20:.0f} MiB, past its limit "
                             f"of {self.max_model_bytes / 2 ** 20:.0f} MiB: start more shards, or start it with "
                             f"--max-model-bytes N")

    # ------------------------------------------------------------------ remote: client
    @transport.expose
    def status(self):
        """What this shard holds.

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.ShardStatus`.
        """
        held = self.held
        return protocol.ShardStatus(name=self.name, session=None if held is None else protocol.HeldStatus(
            id=held.id, index=held.spec.index, count=held.spec.count, rows=held.n_rows,
            started=held.weights is not None, merges=held.merges, merge_cpu=held.merge_cpu,
            bytes_in=held.bytes_in, bytes_out=held.bytes_out,
            damped=0 if held.weights is None else held.weights.damped,
            workers=0 if held.weights is None else len(held.weights.slots)), node=self._metrics()).to_wire()

    @transport.expose
    def open_session(self, spec):
        """Hold a session's share of rows (any other session held is dropped).

        Parameters
        ----------
        spec : dict
            A :class:`gensim_distw2v.protocol.ShardSpec`.
        """
        spec = protocol.ShardSpec.from_wire(spec)
        check_versions(spec.versions, "the client")
        need = ShardLayout(spec.count).count(spec.vocab_size, spec.index) * spec.vector_size * 4 * len(spec.weights)
        if need > self.max_model_bytes:
            raise ValueError(f"open_session: this shard's rows need {need / 2 ** 20:.0f} MiB, more than its limit of "
                             f"{self.max_model_bytes / 2 ** 20:.0f} MiB; start more shards, or start this one with "
                             f"--max-model-bytes N (default: half the machine's memory)")
        held = _Held(spec)
        if spec.restore is not None:
            self._restore(held, spec.restore)
        with self.lock:
            if self.held is not None:
                logger.info("session %s dropped: session %s replaces it", self.held.id, spec.session)
            self.held = held
            self.meter.mark(spec.session)
        logger.info("session %s opened: shard %i of %i, %i of %i rows x %i dimensions of %s, merge=%s",
                    spec.session, spec.index, spec.count, held.n_rows, spec.vocab_size, spec.vector_size,
                    "/".join(spec.weights), spec.merge)

    def _restore(self, held, restore):
        """Fill a session's rows from checkpoint ``restore.sequence`` (written by ``restore.count``
        shards: this shard's rows are in the files of those that held them)."""
        spec, started = held.spec, time.monotonic()
        for old in range(restore.count):
            rows = old + np.arange(ShardLayout(restore.count).count(spec.vocab_size, old), dtype=np.int64) \
                * restore.count  # the global rows shard ``old`` held
            mine = rows % spec.count == spec.index
            if not mine.any():
                continue
            try:
                _meta, arrays = shard_store(restore.dir, old, restore.count).read(
                    restore.sequence, expect={"run": restore.run, "vocab_size": spec.vocab_size,
                                              "vector_size": spec.vector_size})
            except (CheckpointError, OSError) as err:
                raise ValueError(f"restore: {err}") from None
            for name in spec.weights:
                array = arrays.get(name)
                if array is None or array.dtype != np.float32 or array.shape != (len(rows), spec.vector_size):
                    raise ValueError(f"restore: checkpoint {restore.sequence} of shard {old} of {restore.count} in "
                                     f"{restore.dir} has no float32 {name} of {len(rows)} rows x {spec.vector_size}")
                held.arrays[name][rows[mine] // spec.count] = array[mine]
        held.received = {name: held.n_rows for name in spec.weights}
        logger.info("session %s: rows of shard %i of %i restored from checkpoint %i in %s (%.2f s)", spec.session,
                    spec.index, spec.count, restore.sequence, restore.dir, time.monotonic() - started)

    @transport.expose
    def upload(self, sid, name, lo, array, token):
        """Receive this shard's rows ``[lo, lo + len)`` of matrix ``name`` (in order, in chunks);
        ``token``: the session's."""
        with self.lock:
            held = self._held(sid, started=False)
            protocol.check_token(token, held.spec.token, "upload")
            target = self._array(held, name, lo, lo, "upload")
            if lo != held.received[name]:
                raise ValueError(f"upload: {name} chunk starts at row {lo}, expected {held.received[name]}")
            chunk = protocol.unpack_array(array, f"upload of {name}", "float32", shape=(None, held.spec.vector_size))
            if lo + len(chunk) > held.n_rows:
                raise ValueError(f"upload: {name} rows [{lo}, {lo + len(chunk)}) overflow this shard's {held.n_rows}")
            target[lo:lo + len(chunk)] = chunk
            held.received[name] += len(chunk)

    @transport.expose
    def start(self, sid):
        """Every row is uploaded: merges may begin."""
        with self.lock:
            held = self._held(sid, started=False)
            missing = [name for name, n in held.received.items() if n != held.n_rows]
            if missing:
                raise ValueError(f"start: rows of {missing} not fully uploaded to shard {self.name}")
            spec = held.spec
            damp = {name: held.layout.count(n, spec.index) for name, n in spec.damp_rows.items()}
            held.weights = GlobalWeights(held.arrays, rule=spec.merge, damp_rows=damp, codec=spec.merge_dtype,
                                         delta_rows={"syn0": held.layout.count(spec.hot_rows, spec.index),
                                                     "syn1neg": held.layout.count(spec.hot_rows, spec.index),
                                                     "syn1": held.layout.count(spec.tree_hot_rows, spec.index)})
        logger.info("session %s started on shard %i of %i", sid, spec.index, spec.count)

    @transport.expose
    def download(self, sid, name, lo, hi, rank=None, token=None):
        """This shard's rows ``[lo, hi)`` of matrix ``name``.

        A worker of the session names itself by its ``rank`` and shows the session's ``token``: the
        rows it downloads become its view of them for the merges
        (:meth:`gensim_distw2v.core.merge.GlobalWeights.download`); its first download takes it a slot
        (a snapshot of the damped and hot rows), refused if it would pass ``max_model_bytes``.
        """
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < MAX_RANK):
            raise ValueError(f"download: rank must be the downloading worker's rank (an int >= 0) or None, got "
                             f"{rank!r}")
        with self.lock:
            held = self._held(sid, started=True if rank is not None else None)
            self._array(held, name, lo, hi, "download")
            weights = held.weights
            if rank is not None:
                protocol.check_token(token, held.spec.token, "download")
                if rank in held.gone:
                    raise ValueError(f"download: worker rank {rank} left session {sid}: join it again")
                if rank not in weights.slots:
                    self._room_for_one_more(held)
                    weights.add_worker(rank)
        if weights is None:
            return protocol.pack_array(held.arrays[name][lo:hi].copy())
        out = weights.download(name, lo, hi, rank)
        held.bytes_out += out.nbytes
        return protocol.pack_array(out)

    @transport.expose
    def close(self, sid, token):
        """Drop a session (the client has its weights, or gave up) given its ``token``; a session not
        held is no error."""
        if not isinstance(sid, str):
            raise ValueError(f"close: sid must be a session id (str), got {type(sid).__name__}")
        with self.lock:
            if self.held is not None and self.held.id == sid:
                protocol.check_token(token, self.held.spec.token, "close")
                logger.info("session %s closed after %i merges (%.1f s of CPU in them)", sid, self.held.merges,
                            self.held.merge_cpu)
                self.held = None

    # ------------------------------------------------------------------ remote: workers
    @transport.expose
    def merge(self, part):
        """Fold one part of a worker's merge round into this shard's rows.

        Parameters
        ----------
        part : dict
            A :class:`gensim_distw2v.protocol.MergePart`, in this shard's rows.

        Returns
        -------
        dict
            A :class:`gensim_distw2v.protocol.MergeReply`.
        """
        cpu = time.thread_time()
        sid = part.get("session") if isinstance(part, dict) else None
        held = self._held(sid)
        protocol.check_token(part.get("token"), held.spec.token, "merge")  # first: a stranger blames no one
        rank = part.get("rank")
        if not isinstance(rank, int) or isinstance(rank, bool):
            rank = None  # (MergePart.from_wire says what is wrong with it)
        if rank in held.poisoned:
            raise ValueError(f"worker rank {rank} is refused in session {sid}: {held.poisoned[rank]}")
        try:
            part = protocol.MergePart.from_wire(part, n_rows=held.n_rows, vector_size=held.spec.vector_size,
                                            weights=held.spec.weights, max_delta=held.spec.max_delta)
        except protocol.PoisonError as err:
            if rank in held.weights.slots:
                with self.lock:
                    held.poisoned.setdefault(rank, str(err))
                logger.error("session %s: refused a merge of worker rank %i: %s", sid, rank, err)
            raise ValueError(str(err)) from None  # (Pyro4 sends builtin exceptions only)
        if part.rank in held.gone:
            raise ValueError(f"worker rank {part.rank} left session {sid}: join it again")
        missed, values = held.weights.apply(part.rank, part.lo, part.hi, part.matrices, part.hold_back, part.exact,
                                            row_limits(part.hot_rows, part.tree_hot_rows), part.wanted)
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
        return reply.to_wire()

    # ------------------------------------------------------------------ the dispatcher
    def _connect(self):
        """Find the dispatcher and say hello; retry until it works or we are stopped."""
        waited = 0
        while not self.stopped.is_set():
            try:
                uri = transport.lookup(self.ns_conf, transport.DISPATCHER_NAME)
                if uri:
                    proxy = transport.connect(uri, self.hmac_key, timeout=30.0)
                    proxy.shard_hello(self.name, self.uri, protocol.ShardHello(versions=versions()).to_wire())
                    self.dispatcher_uri = uri
                    logger.info("found the dispatcher at %s", uri)
                    return proxy
            except ValueError as err:
                logger.error("the dispatcher refused this shard: %s", err)
            except (transport.ClusterError, transport.PyroError) as err:
                if waited % 30 == 0:
                    logger.info("waiting for the dispatcher (%s)", err)
            if waited == 0:
                logger.info("waiting for a dispatcher to register as %s", transport.DISPATCHER_NAME)
            self.stopped.wait(1.0)
            waited += 1
        return None

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
            with held.weights.lock:  # merges fold in under it: a copy between two folds
                rows = {name: array.copy() for name, array in held.arrays.items()}
            spec = held.spec
        try:
            proxy.shard_checkpoint(self.name, sid, protocol.ShardCheckpoint(
                sequence=order.sequence, stage="taken", seconds=time.monotonic() - started).to_wire())
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
                store = shard_store(order.dir, spec.index, spec.count)
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
                proxy = transport.connect(uri, self.hmac_key, timeout=30.0)
                try:
                    proxy.shard_checkpoint(self.name, sid, report.to_wire())
                finally:
                    transport.release(proxy)
                return
            except ValueError as err:  # the session is over: nothing to tell
                logger.info("checkpoint %i: the dispatcher no longer wants it (%s)", order.sequence, err)
                return
            except transport.PyroError as err:
                logger.warning("checkpoint %i: could not tell the dispatcher the rows were %s (attempt %i of %i): %s",
                               order.sequence, report.stage, attempt + 1, REPORT_ATTEMPTS, err)
                if self.stopped.wait(1.0 + attempt):
                    return

    def _metrics(self):
        """This shard's :class:`gensim_distw2v.protocol.NodeMetrics`: of the session it holds, or since the last one."""
        held = self.held
        if held is not None and self.meter.session == held.id:
            return self.meter.sample(merge_cpu=held.merge_cpu)
        if held is None and self.meter.session is not None:
            self.meter.mark(None)
        return self.meter.sample()

    def heartbeat_loop(self):
        """Keep in touch with the dispatcher."""
        proxy = None
        while not self.stopped.is_set():
            if proxy is None:
                proxy = self._connect()
                if proxy is None:
                    return
            held = self.held
            asked = time.monotonic()
            poisoned = {}
            if held is not None:
                with self.lock:
                    poisoned = {str(rank): why for rank, why in held.poisoned.items() if rank not in held.told}
            try:
                beat = protocol.ShardBeat.from_wire(proxy.shard_beat(self.name, held.id if held else None,
                                                                 self.heartbeat_every, poisoned or None,
                                                                 self._metrics().to_wire()))
                if poisoned:
                    held.told.update(int(rank) for rank in poisoned)
            except (transport.PyroError, ValueError) as err:
                logger.warning("lost the dispatcher (%s); looking for it again", err)
                transport.release(proxy)
                proxy = None
                continue
            if beat.hello:
                transport.release(proxy)
                proxy = None
                continue
            self._beat(beat, asked)
            if beat.checkpoint is not None:
                try:
                    self._checkpoint(proxy, beat.session, beat.checkpoint)
                except transport.PyroError as err:
                    logger.warning("lost the dispatcher (%s); looking for it again", err)
                    transport.release(proxy)
                    proxy = None
        if proxy is not None:
            try:
                proxy.shard_leave(self.name)
            except transport.PyroError:
                pass
            transport.release(proxy)
