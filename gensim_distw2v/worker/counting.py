"""A worker's part of counting a vocabulary on the cluster: count byte ranges, send their words to the shards.

The client (:mod:`gensim_distw2v.client.vocab`) gives each worker a few byte ranges of the corpus at a
time (:class:`gensim_distw2v.protocol.CountRanges`, one call); the worker counts them on its threads
(:class:`gensim_distw2v._counts.WordCounts`, compiled, without the GIL, tokenising as gensim's
``LineSentence``), splits each range's table by a hash of the word into one part per shard, sends
each part to its shard (``count_add``; by the shard's bulk channel where it has one) and answers
with each range's raw words, sentences and distinct words. A range's table lives only while it is
sent: a worker holds at most one table per thread.

A worker counts for the count the dispatcher leases only (its heartbeat replies say which, with the
corpus and the shards the lease's client named: :mod:`gensim_distw2v.dispatcher.counts`), waiting up
to :data:`~gensim_distw2v.protocol.constants.GRANT_WAIT` seconds for the dispatcher's word: a peer
holding the cluster's key cannot have it read another file, nor send a count's words to shards of
its choosing.
"""
import concurrent.futures
import logging
import threading
import time

from gensim_distw2v import protocol
from gensim_distw2v._counts import WordCounts
from gensim_distw2v.io import corpusfile, links, transport
from gensim_distw2v.protocol import constants, errors, tables

logger = logging.getLogger(__name__)

__all__ = ["Counting"]

CHECKED = 8  # counts whose corpus check a worker remembers


class Counting:
    """The worker's ``count`` call.

    Parameters
    ----------
    worker : gensim_distw2v.worker.service.Worker
        Its name, threads, key and name server.
    """

    def __init__(self, worker):
        self.worker = worker
        self.lock = threading.Lock()
        self.pool = None  # the counting threads, made at the first count
        self.checked = {}  # count id -> None (the corpus is the client's) or what is wrong
        self.granted = threading.Condition(threading.Lock())
        self.grant = (None, None, None)  # the leased count, its corpus's digest, its shards (the dispatcher's word)

    def lease(self, count, corpus, shards):
        """The dispatcher's word (a heartbeat reply): the count it leases (None: none), its corpus's digest
        (:func:`gensim_distw2v.protocol.corpus_digest`) and its shards."""
        with self.granted:
            self.grant = (count, corpus, None if shards is None else [list(s) for s in shards])
            self.granted.notify_all()

    def leased(self):
        """The leased count this worker last heard of (its heartbeat says so: news is what differs)."""
        return self.grant[0]

    def check_lease(self, request, _op=None):
        """Refuse a count the dispatcher does not lease, or one whose corpus or shards are not the
        lease's (waiting up to :data:`~gensim_distw2v.protocol.constants.GRANT_WAIT` seconds for the
        dispatcher's word): the guard of the worker's ``count`` call (auth ``lease``)."""
        deadline = time.monotonic() + constants.GRANT_WAIT
        with self.granted:
            while self.grant[0] != request.count and time.monotonic() < deadline:
                self.granted.wait(deadline - time.monotonic())
            count, corpus, shards = self.grant
        if count != request.count:
            raise errors.SessionClosed(f"{self._where()}: the dispatcher leases no count {request.count[:64]!r} "
                                       f"(heard of none within {constants.GRANT_WAIT:.0f} s): a count is opened by its client "
                                       f"on the dispatcher first")
        if corpus != protocol.corpus_digest(request.corpus):
            raise errors.Forbidden(f"{self._where()}: count {request.count[:16]}: not the corpus its lease names")
        if shards != request.shards:
            raise errors.Forbidden(f"{self._where()}: count {request.count[:16]}: not the shards its lease names")

    def _where(self):
        uri = self.worker.uri
        return f"worker {self.worker.name} on {transport.uri_host(uri) if uri else 'this node'}"

    def _check(self, request):
        """None if this node sees the client's corpus, else what is wrong (remembered per count)."""
        with self.lock:
            if request.count in self.checked:
                return self.checked[request.count]
        problem = corpusfile.check_files(request.corpus.parts(), self.worker.corpus_dirs)
        with self.lock:
            while len(self.checked) >= CHECKED:
                self.checked.pop(next(iter(self.checked)))
            self.checked[request.count] = problem
            if self.pool is None:
                self.pool = concurrent.futures.ThreadPoolExecutor(self.worker.threads, thread_name_prefix="count")
        return problem

    def count(self, request):
        """Count ``request.ranges`` (a :class:`gensim_distw2v.protocol.CountRanges`) on this worker's
        threads and send their words to the count's shards: a :class:`gensim_distw2v.protocol.Counted`.

        Raises
        ------
        gensim_distw2v.protocol.errors.SessionClosed, gensim_distw2v.protocol.errors.Forbidden
            The dispatcher leases no such count, or leases it for another corpus or other shards
            (:meth:`check_lease`, before the call runs).
        gensim_distw2v.protocol.errors.CorpusFileMismatch
            This node does not see the client's corpus (missing, other size or content).
        ValueError
            A line of the corpus is not UTF-8 (the file and the offset named).
        gensim_distw2v.protocol.errors.ShardLost
            A shard of the count does not answer.
        """
        problem = self._check(request)
        if problem is not None:
            raise errors.CorpusFileMismatch(f"{self._where()}: {problem}")
        futures = [self.pool.submit(self._one, request, entry, token)
                   for entry, token in zip(request.ranges, request.tokens)]
        done = []
        try:
            for future in futures:
                done.append(future.result())
        except ValueError as err:
            if isinstance(err, errors.ClusterFault):
                raise
            raise ValueError(f"{self._where()}: {err}") from None
        finally:
            for future in futures:
                future.cancel()
        return protocol.Counted(ranges=[entry for entry, _cpu, _sent in done], cpu=sum(cpu for _e, cpu, _s in done),
                                bytes_sent=sum(sent for _e, _cpu, sent in done))

    def _one(self, request, entry, token):
        """Count one range and send its parts (with the range's ``token``): ``([id, raw, sentences, distinct],
        CPU seconds, bytes sent)``."""
        began = time.thread_time()
        rid, lo, hi = entry
        table = WordCounts()
        reader = corpusfile.open_reader(request.corpus, None, self.worker.corpus_dirs)  # (checked as opened)
        try:
            raw, sentences = reader.count(lo, hi, table)
        finally:
            reader.close()
        distinct = len(table)
        parts = table.split(len(request.shards))
        del table
        sent = 0
        shards = links.ShardLinks(request.shards, self.worker.hmac_key, self.worker.ns_conf, None,
                                  bulk=tables.SHARD.ops(cadence="count", bulk=True))
        try:
            for index, (words, offsets, counts, firsts) in enumerate(parts):
                shards.call(index, "count_add", protocol.CountPart(
                    count=request.count, token=token, range=rid, index=index, words=words, offsets=offsets,
                    counts=counts, firsts=firsts))
                sent += words.nbytes + offsets.nbytes + counts.nbytes + firsts.nbytes
        finally:
            shards.close()
        return [rid, raw, sentences, distinct], time.thread_time() - began, sent
