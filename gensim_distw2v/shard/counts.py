"""A shard's part of the vocabulary counts: the words of a count that hash to it, merged.

A client counting a corpus on the cluster (:mod:`gensim_distw2v.client.vocab`) opens the count on
every shard (part ``index`` of ``parts``); the workers send each byte range's words of that part
(:class:`gensim_distw2v.protocol.CountPart`), which the shard adds to one
:class:`gensim_distw2v._counts.WordCounts` (counts summed, first occurrences the least, without the
GIL), each range once: a range counted again (its first worker was lost before it said so) is not
added twice. The client then takes the merged words in chunks (those counted at least ``min_count``
times: the others' number and occurrences only), and closes the count.

What a peer holding the cluster's key can do is bounded: a count is opened only once the dispatcher
leases it, and only with the secret the lease names (:mod:`gensim_distw2v.dispatcher.counts`: one
count at a time on a cluster; a count the dispatcher no longer leases is dropped); a part is added
only with its range's token (:func:`gensim_distw2v.protocol.range_token`, which the client gives the
worker it asks to count that range), taken or closed only with the count's secret; every count a
shard holds fits in one budget (``max_bytes``, checked before a part is added, not after); and a count
in use is never dropped to make room for another (only one idle for :data:`IDLE_SECONDS`).
"""
import collections
import logging
import threading
import time

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v._counts import WordCounts
from gensim_distw2v.protocol import errors

logger = logging.getLogger(__name__)

__all__ = ["CountTables", "MAX_COUNTS"]

MAX_COUNTS = 4  # counts held at once: opening one more drops the longest idle, if one is idle
IDLE_SECONDS = 900.0  # a count without an add or a take for this long may be dropped for a new one
MAX_COUNT_RANGES = 1 << 22  # ranges one count may add (4 M: a corpus of 4 TB in ranges of 1 MB)
RANGE_BYTES = 96  # what a range id held costs (a set entry), as counted against the budget


def _growth(part):
    """An upper bound of the bytes adding ``part`` may take (its words all new; the table's arrays and
    slots doubling as they grow)."""
    words = len(part.counts)
    return 2 * (int(part.words.nbytes) + 5 * 8 * words) + 4 * 8 * words + RANGE_BYTES


class _Count:
    """One count's part on this shard."""

    def __init__(self, request):
        self.request = request
        self.table = WordCounts()
        self.lock = threading.Lock()
        self.ranges = set()  # ranges added
        self.arrays = None  # the table in first-occurrence order, once taken (of at least min_count)
        self.min_count, self.dropped = 1, (0, 0)  # the takes' min_count; the words it left out, their occurrences
        self.cpu = 0.0
        self.opened = self.touched = time.monotonic()

    def nbytes(self):
        """The bytes this count holds (its table or taken arrays, and its ranges' ids)."""
        table, arrays = self.table, self.arrays  # (a take may swap one for the other meanwhile)
        held = table.nbytes() if table is not None else sum(int(a.nbytes) for a in arrays or ())
        return held + RANGE_BYTES * len(self.ranges)


def _at_least(arrays, min_count):
    """``(arrays of the words counted min_count times or more, (words left out, their occurrences))``."""
    words, offsets, counts, firsts = arrays
    if min_count <= 1:
        return arrays, (0, 0)
    keep = counts >= min_count
    dropped = (int(len(counts) - keep.sum()), int(counts[~keep].sum()))
    lengths = np.diff(offsets)[keep]
    kept_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=kept_offsets[1:])
    byte_keep = np.repeat(keep, np.diff(offsets))
    return (words[byte_keep], kept_offsets, counts[keep], firsts[keep]), dropped


class CountTables:
    """The counts a shard holds (its calls ``count_open``, ``count_add``, ``count_take``, ``count_close``).

    Parameters
    ----------
    name : str
        The shard's name (for messages).
    max_bytes : int
        The most the counts this shard holds may take together: a part that could take them beyond
        it is refused, before it is added, as :class:`gensim_distw2v.protocol.errors.Full`, naming the
        limit.
    granted : callable
        ``granted(count)``: the digest (:func:`gensim_distw2v.protocol.owner_digest`) of the secret of
        count ``count`` once the dispatcher leases it, or None (the shard's service waits a while for
        the dispatcher's word).
    """

    def __init__(self, name, max_bytes, granted):
        self.name, self.max_bytes, self.granted = name, int(max_bytes), granted
        self.lock = threading.Lock()
        self.held = collections.OrderedDict()  # count id -> _Count

    def _count(self, count):
        """The count ``count`` (SessionClosed if none is held; the caller's secret is checked before:
        :mod:`gensim_distw2v.shard.guards`)."""
        with self.lock:
            held = self.held.get(count)
        if held is None:
            raise errors.SessionClosed(f"shard {self.name} holds no count {count!r} (closed, dropped idle, or the "
                                       f"shard restarted)")
        return held

    def open(self, request):
        """Hold part ``index`` of ``parts`` of a new count (a :class:`gensim_distw2v.protocol.CountOpen`).

        The lease and its secret are checked before it runs (:meth:`check_grant`).

        Raises
        ------
        gensim_distw2v.protocol.errors.Busy
            :data:`MAX_COUNTS` counts are held and none is idle: none in use is dropped for another.
        """
        now = time.monotonic()  # (the lease and its secret are checked before: check_grant)
        with self.lock:
            if request.count in self.held:
                raise errors.BadRequest(f"count {request.count} is open on shard {self.name} already")
            while len(self.held) >= MAX_COUNTS:
                idle = min(self.held.values(), key=lambda c: c.touched)
                if now - idle.touched < IDLE_SECONDS:
                    raise errors.Busy(f"shard {self.name} holds {len(self.held)} vocabulary counts in use (at most "
                                      f"{MAX_COUNTS}; one is dropped once idle for {IDLE_SECONDS:.0f} s): try again "
                                      f"when one ends")
                del self.held[idle.request.count]
                logger.warning("count %s dropped: idle for %.0f s, and a shard holds %i counts at most",
                               idle.request.count, now - idle.touched, MAX_COUNTS)
            self.held[request.count] = _Count(request)
        logger.info("count %s opened: part %i of %i", request.count, request.index, request.parts)

    def check_grant(self, request, op):
        """The guard of ``count_open`` (auth ``count_grant``): the dispatcher leases the count (its word
        may take up to :data:`~gensim_distw2v.protocol.constants.GRANT_WAIT` seconds: not under the lock)
        and the request carries the secret whose digest the lease told this shard.

        Raises
        ------
        gensim_distw2v.protocol.errors.SessionClosed
            The dispatcher leases no such count.
        gensim_distw2v.protocol.errors.Forbidden
            Not the secret of the count the dispatcher leases.
        """
        owner = self.granted(request.count)
        if owner is None:
            raise errors.SessionClosed(f"{op}: the dispatcher leases no count {request.count!r} (shard "
                                       f"{self.name} heard of none): a count is opened on the dispatcher first "
                                       f"(open_count), one at a time")
        protocol.check_token(protocol.owner_digest(request.token), owner, op, owner=True)

    def secret_of(self, count):
        """The secret of count ``count`` as its opening carried it, or None if none is held."""
        with self.lock:
            held = self.held.get(count)
        return None if held is None else held.request.token

    def keep_only(self, count, asked):
        """Drop every count but ``count`` (the one the dispatcher leases, or None) opened before ``asked``
        (monotonic: when the heartbeat that said so was asked; a count opened since may be newer news)."""
        with self.lock:
            gone = [c for c, held in self.held.items() if c != count and held.opened < asked]
            for c in gone:
                del self.held[c]
        for c in gone:
            logger.info("count %s dropped: the dispatcher no longer leases it", c)

    def _room(self, part, held):
        """Full unless ``part`` fits this shard's budget with every count it holds (before it is added)."""
        with self.lock:
            counts = list(self.held.values())
        size = sum(c.nbytes() for c in counts)
        need = _growth(part)
        if size + need > self.max_bytes:
            raise errors.Full(f"count {part.count}: shard {self.name}'s counts take {size} bytes, and range "
                              f"{part.range}'s part may take {need} more, beyond its limit of {self.max_bytes} "
                              f"(--max-model-bytes): use more shards, or give them more memory")
        if len(held.ranges) >= MAX_COUNT_RANGES:
            raise errors.Full(f"count {part.count}: {MAX_COUNT_RANGES} ranges added on shard {self.name} already, "
                              f"the most a count takes")

    def add(self, part):
        """Add a range's words of this shard's part (a :class:`gensim_distw2v.protocol.CountPart`):
        True, or False if that range was added already. The part must carry its range's token."""
        held = self._count(part.count)
        if part.index != held.request.index:
            raise errors.BadRequest(f"count {part.count}: a part for index {part.index} sent to shard {self.name}, "
                                    f"which holds index {held.request.index}")
        began = time.thread_time()
        with held.lock:
            if part.range in held.ranges:
                return False
            if held.arrays is not None:
                raise errors.BadRequest(f"count {part.count}: range {part.range} arrives after the count was taken")
            try:
                self._room(part, held)
            except errors.Full:
                self._drop(part.count)
                raise
            held.table.add(part.words, part.offsets, part.counts, part.firsts)
            held.ranges.add(part.range)
            held.cpu += time.thread_time() - began
            held.touched = time.monotonic()
        return True

    def _drop(self, count):
        with self.lock:
            self.held.pop(count, None)

    def take(self, request):
        """Words ``[lo, hi)`` of this shard's part in first-occurrence order (a
        :class:`gensim_distw2v.protocol.CountChunk`); no range is added after the first take."""
        held = self._count(request.count)
        held.touched = time.monotonic()
        with held.lock:
            if held.arrays is None:
                held.arrays, held.dropped = _at_least(held.table.arrays(), request.min_count)
                held.min_count, held.table = request.min_count, None  # the arrays hold what is taken now
            elif request.min_count != held.min_count:
                raise errors.BadRequest(f"count {request.count}: taken with min_count {held.min_count} already, "
                                        f"not {request.min_count}")
            words, offsets, counts, firsts = held.arrays
        total = len(counts)
        lo, hi = min(request.lo, total), min(request.hi, total)
        return protocol.CountChunk(words=words[offsets[lo]:offsets[hi]], offsets=offsets[lo:hi + 1] - offsets[lo],
                                   counts=counts[lo:hi], firsts=firsts[lo:hi], total=total, ranges=len(held.ranges),
                                   table_bytes=int(words.nbytes + 24 * total), cpu=held.cpu,
                                   dropped=held.dropped[0], dropped_total=held.dropped[1])

    def close(self, request):
        """Drop a count (a :class:`gensim_distw2v.protocol.CountRef`); one not held is no error."""
        with self.lock:
            held = self.held.get(request.count)
            if held is None:
                return
            del self.held[request.count]
        logger.info("count %s closed: %i ranges added, %.2f s of CPU", request.count, len(held.ranges), held.cpu)
