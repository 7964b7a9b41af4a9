"""A worker's part of counting a vocabulary on the cluster: count byte ranges, send their words to the shards.

The client (:mod:`gensim_distw2v.client.vocab`) gives each worker a few byte ranges of the corpus at a
time (:class:`gensim_distw2v.protocol.CountRanges`, one call); the worker counts them on its threads
(:class:`gensim_distw2v._counts.WordCounts`, compiled, without the GIL, tokenising as gensim's
``LineSentence``), splits each range's table by a hash of the word into one part per shard, sends
each part to its shard (``count_add``; by the shard's bulk channel where it has one) and answers
with each range's raw words, sentences and distinct words. A range's table lives only while it is
sent: a worker holds at most one table per thread.
"""
import concurrent.futures
import logging
import threading
import time

from gensim_distw2v import protocol
from gensim_distw2v._counts import WordCounts
from gensim_distw2v.io import corpusfile, links, transport
from gensim_distw2v.protocol import errors

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
                                  bulk=("count_add",))
        try:
            for index, (words, offsets, counts, firsts) in enumerate(parts):
                shards.call(index, "count_add", protocol.CountPart(
                    count=request.count, token=token, range=rid, index=index, words=words, offsets=offsets,
                    counts=counts, firsts=firsts))
                sent += words.nbytes + offsets.nbytes + counts.nbytes + firsts.nbytes
        finally:
            shards.close()
        return [rid, raw, sentences, distinct], time.thread_time() - began, sent
