"""A session held by a shard: its rows, the workers' slots, its counters.

:class:`_Held` is the state of one session on a shard (:mod:`gensim_distw2v.shard.service`): its
rows of the weights (:class:`gensim_distw2v.core.layout.ShardLayout`), filled by uploads or read
back from a checkpoint (:meth:`_Held.restore`), then folded into by the workers' merges
(:class:`gensim_distw2v.core.merge.GlobalWeights`).
"""
import logging
import time

import numpy as np

from gensim_distw2v.protocol.arrays import weight_bound, within
from gensim_distw2v.protocol.errors import BadRequest, Full, RestoreFailed
from gensim_distw2v.protocol.transfers import check_part
from gensim_distw2v.io.store import READ_SECONDS, CheckpointError, shard_store
from gensim_distw2v.core.layout import ShardLayout

logger = logging.getLogger(__name__)


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
        self.exact_cpu = 0.0  # of merge_cpu, the exact parts' (epoch flushes)
        self.routine_nogil_cpu = 0.0  # of merge_cpu, the routine parts' compiled folds and replies (no GIL)
        self.bytes_in = self.bytes_out = 0

    @property
    def id(self):
        return self.spec.session

    def array(self, name, lo, hi, what, shard):
        """Matrix ``name``, once ``[lo, hi)`` is checked to be a chunk of its rows (``shard``: this shard's
        name, for the messages)."""
        if name not in self.arrays:
            raise BadRequest(f"{what}: shard {shard} holds no matrix {name!r} (it holds {sorted(self.arrays)})")
        array = self.arrays[name]
        try:
            check_part(array, lo, hi, f"{what} of {name} from shard {shard}")
        except ValueError as err:
            raise BadRequest(str(err)) from None
        return array

    def room_for_one_more(self, shard, max_model_bytes):
        """Refuse a worker's slot that would take this session past ``max_model_bytes`` on shard ``shard``."""
        weights = self.weights
        rows = sum(self.arrays[name].nbytes for name in self.arrays)
        snapshot = sum(weights.snap_rows[name] * self.spec.vector_size * 4 for name in self.arrays)
        need = rows + (len(weights.slots) + 1) * snapshot
        if need > max_model_bytes:
            raise Full(f"download: one more worker ({len(weights.slots) + 1} in all, a {snapshot / 2 ** 20:.0f} MiB "
                             f"snapshot each) would take shard {shard} to {need / 2 ** 20:.0f} MiB, past its limit "
                             f"of {max_model_bytes / 2 ** 20:.0f} MiB: start more shards, or start it with "
                             f"--max-model-bytes N")

    def restore(self, restore, key=None):
        """Fill a session's rows from checkpoint ``restore.sequence`` (written by ``restore.count``
        shards: this shard's rows are in the files of those that held them), signed with ``key``
        (the cluster's) when there is one; each shard's files no larger than its rows, read by a
        deadline; every row finite and within the session's :func:`~gensim_distw2v.protocol.weight_bound`."""
        spec, started = self.spec, time.monotonic()
        deadline, bound = started + READ_SECONDS, weight_bound(spec.max_delta)
        slack = (64 << 10) * (len(spec.weights) + 2)  # the headers of the .npy files, the manifest, the metadata
        for old in range(restore.count):
            rows = old + np.arange(ShardLayout(restore.count).count(spec.vocab_size, old), dtype=np.int64) \
                * restore.count  # the global rows shard ``old`` held
            mine = rows % spec.count == spec.index
            if not mine.any():
                continue
            try:
                _meta, arrays = shard_store(restore.dir, old, restore.count, key=key).read(
                    restore.sequence, expect={"run": restore.run, "vocab_size": spec.vocab_size,
                                              "vector_size": spec.vector_size}, deadline=deadline,
                    max_bytes=len(rows) * spec.vector_size * 4 * len(spec.weights) + slack)
            except (CheckpointError, OSError) as err:
                raise RestoreFailed(f"restore: {err}") from None
            for name in spec.weights:
                array = arrays.get(name)
                if array is None or array.dtype != np.float32 or array.shape != (len(rows), spec.vector_size):
                    raise RestoreFailed(f"restore: checkpoint {restore.sequence} of shard {old} of {restore.count} in "
                                     f"{restore.dir} has no float32 {name} of {len(rows)} rows x {spec.vector_size}")
                if not within(array, bound):
                    raise RestoreFailed(f"restore: checkpoint {restore.sequence} of shard {old} of {restore.count} in "
                                        f"{restore.dir}: {name} holds weights that are not finite or larger than "
                                        f"{bound:.3g} (the session's bound): refused")
                self.arrays[name][rows[mine] // spec.count] = array[mine]
        self.received = {name: self.n_rows for name in spec.weights}
        logger.info("session %s: rows of shard %i of %i restored from checkpoint %i in %s (%.2f s)", spec.session,
                    spec.index, spec.count, restore.sequence, restore.dir, time.monotonic() - started)
