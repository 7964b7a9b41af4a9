"""Counting the vocabulary on the cluster: ``build_vocab`` of a distributed model.

gensim's ``build_vocab`` scans the whole corpus in one Python thread (about 1.6 M words a second),
the longest step of a run on a large corpus. A distributed model's ``build_vocab(corpus_file=F)``
(or of a ``LineSentence`` / ``PathLineSentences`` the workers can read) counts on the cluster:

1. The client cuts the corpus into byte ranges (:func:`range_bytes`: several per worker thread),
   takes the cluster's count lease from the dispatcher (``open_count``, renewed every
   :data:`WATCH_EVERY` seconds while the count runs and given back at its end:
   :mod:`gensim_distw2v.dispatcher.counts`; a shard opens only the leased count, for its holder) and
   opens the count on every shard: shard ``p`` of ``P`` will hold the words whose hash falls in
   part ``p`` (``count_open``).
2. One thread per worker hands it as many ranges as it has threads at a time (the worker's
   ``count`` call, :mod:`gensim_distw2v.worker.counting`): the worker counts each range in compiled
   code without the GIL, tokenising as ``LineSentence`` does, and sends the range's words of part
   ``p`` to shard ``p``, which adds them once per range (:mod:`gensim_distw2v.shard.counts`). So no
   process sees every word of the corpus, and the words cross the network once per range
   (distinct words of a range, not tokens).
3. A worker that is lost (its call fails, or does not answer within :data:`CALL_TIMEOUT`) gives its
   ranges back to the others; a range it had sent part of is added once all the same, so the
   counts are exact. A worker that does not see the client's file is left out (its node named); a
   line that is not UTF-8 ends the count with the file, the offset and the node named.
4. The client takes each shard's words, merged, and puts them in the order they first occur in the
   corpus: gensim's ``raw_vocab`` order, which its sort by count keeps among equal counts. With
   the raw words and sentences of every range, the model then has what gensim's scan would have
   given it (``raw_vocab``, ``corpus_count``, ``corpus_total_words``); gensim's own
   ``prepare_vocab`` applies ``min_count``, ``max_final_vocab``, ``trim_rule`` and ``sample``.

``max_vocab_size`` differs: gensim prunes its dict whenever it grows beyond the cap while it scans
(so its counts of rare words are too low, in a way that depends on the order of the corpus); the
cluster counts every word exactly (a worker holds one range's words per thread; a shard its part of
the corpus's distinct words) and prunes the counted vocabulary as gensim's scan would at its end,
until it fits (:func:`prune_like_gensim`).
"""
import collections
import logging
import os
import secrets
import threading
import time
import uuid

import numpy as np
from gensim import utils

from gensim_distw2v import protocol
from gensim_distw2v._counts import decode_words
from gensim_distw2v.client.links import find_dispatcher, wait_for_workers
from gensim_distw2v.io import corpusfile, endpoints, keys, links, transport
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.protocol import errors, tables
from gensim_distw2v.protocol.counting import MAX_TAKE_WORDS

logger = logging.getLogger(__name__)

__all__ = ["ClusterCount", "Counts", "range_bytes", "prune_like_gensim", "CALL_TIMEOUT"]

RANGES_PER_THREAD = 4  # ranges per worker thread at least (a slow range holds up the end less)
MIN_RANGE_BYTES = 1 << 20
MAX_RANGE_BYTES = 32 << 20  # a range's table is at most about this many distinct words' bytes
CALL_TIMEOUT = 600.0  # seconds a worker may take to count its ranges of one call (else it is lost)
WATCH_EVERY = 2.0  # seconds between two looks at the dispatcher's members (and renewals of the lease) while counting


def range_bytes(size, threads):
    """Bytes per range: ``size`` cut in at least :data:`RANGES_PER_THREAD` ranges per thread, each of
    :data:`MIN_RANGE_BYTES` to :data:`MAX_RANGE_BYTES`."""
    wanted = -(-size // max(1, RANGES_PER_THREAD * threads))
    return int(min(MAX_RANGE_BYTES, max(MIN_RANGE_BYTES, wanted)))


def prune_like_gensim(vocab, max_vocab_size, trim_rule=None):
    """Prune ``vocab`` as gensim's scan does when it grows beyond ``max_vocab_size``
    (:func:`gensim.utils.prune_vocab` with a threshold that rises by one each time), until it fits;
    the number of prunes."""
    prunes = 0
    while max_vocab_size and len(vocab) > max_vocab_size:
        prunes += 1
        utils.prune_vocab(vocab, prunes, trim_rule=trim_rule)
    return prunes


class Counts:
    """What a count found: ``raw_vocab`` (word -> count, in first-occurrence order, a
    ``defaultdict(int)`` as gensim's; of the words counted ``min_count`` times or more),
    ``total_words``, ``corpus_count``, ``dropped`` (the distinct words ``min_count`` left out, and
    their occurrences) and ``stats`` (seconds, workers' CPU, bytes, ranges, ranges counted again)."""

    def __init__(self, raw_vocab, total_words, corpus_count, stats, dropped=(0, 0)):
        self.raw_vocab, self.total_words, self.corpus_count, self.stats = raw_vocab, total_words, corpus_count, stats
        self.dropped = dropped


def corpus_spec(paths):
    """A :class:`gensim_distw2v.protocol.CorpusFileSpec` of one file or several read back to back (its
    training fields unused)."""
    if isinstance(paths, str):
        found, path = corpusfile.fingerprint(paths), paths
    else:
        found = corpusfile.fingerprint_files(paths)
        path = os.path.commonpath([entry[0] for entry in found["files"]])
    spec = protocol.CorpusFileSpec(path=path, size=found["size"], digest=found["digest"], range_bytes=1,
                                   total_words=1, start_alpha=0.0, end_alpha=0.0, files=found.get("files"))
    spec.check()
    return spec


class _Lease:
    """The cluster's count lease (:mod:`gensim_distw2v.dispatcher.counts`) for ``ref`` (a
    :class:`gensim_distw2v.protocol.CountRef`): taken on entering (``Busy`` if another count holds
    it), renewed every :data:`WATCH_EVERY` seconds on a thread of its own, given back on leaving."""

    def __init__(self, dispatcher, ns_conf, hmac_key, ref):
        self.dispatcher, self.ns_conf, self.hmac_key, self.ref = dispatcher, ns_conf, hmac_key, ref
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._renew, daemon=True, name="count-lease")

    def __enter__(self):
        self.dispatcher.call("open_count", self.ref)
        self.thread.start()
        return self

    def _renew(self):
        try:
            link = find_dispatcher(self.ns_conf, self.hmac_key)
        except ClusterError as err:
            logger.warning("count %s: cannot renew its lease: %s", self.ref.count, err)
            return
        try:
            while not self.stop.wait(WATCH_EVERY):
                try:
                    link.call("count_alive", self.ref)
                except (transport.PyroError, ValueError) as err:
                    logger.warning("count %s: could not renew its lease: %s", self.ref.count, err)
        finally:
            link.release()

    def __exit__(self, *_exc):
        self.stop.set()
        self.thread.join(WATCH_EVERY + 1.0)
        try:
            self.dispatcher.call("close_count", self.ref)
        except (transport.PyroError, ValueError) as err:
            logger.warning("count %s: could not give its lease back (it lapses by itself): %s", self.ref.count, err)


class ClusterCount:
    """Count a corpus's vocabulary on the cluster of ``ns_conf`` (see the module's docstring).

    Parameters
    ----------
    ns_conf : dict
        Where the name server is (and the cluster's ``hmac_key``).
    cluster_timeout : float
        Seconds to wait for a first worker and shard.
    """

    def __init__(self, ns_conf, cluster_timeout=30.0):
        self.ns_conf, self.cluster_timeout = dict(ns_conf or {}), cluster_timeout
        self.hmac_key = keys.ns_settings(self.ns_conf)[3]
        self.cond = threading.Condition()
        self.queue = collections.deque()  # [id, lo, hi] not yet counted nor handed out
        self.total = 0  # ranges in all
        self.out = {}  # worker -> the ranges it is counting
        self.results = {}  # range id -> [raw, sentences, distinct]
        self.problems = {}  # worker -> why it is out of the count
        self.fatal = None  # an error that ends the count
        self.recounted = 0
        self.cpu = self.shard_cpu = 0.0  # CPU seconds of the workers' counting and sending, of the shards' adds
        self.sent = self.shard_bytes = 0  # bytes the workers sent; the largest shard's table's bytes
        self.dropped = (0, 0)  # distinct words the shards left out (fewer than min_count), their occurrences
        self.secret = None  # the count's secret (the client's and the shards'; workers get each range's token)

    def count(self, corpus, min_count=1):
        """Count ``corpus`` (a path, or a list of paths read back to back): a :class:`Counts` (the shards
        send the client only the words counted ``min_count`` times or more).

        Raises
        ------
        gensim_distw2v.protocol.errors.ClusterError
            No dispatcher, worker or shard, or no worker could count (each one's reason named).
        ValueError
            Bad input: a line that is not UTF-8 (the file, the offset and the node named).
        """
        began = time.monotonic()
        spec = corpus_spec(corpus)
        dispatcher = find_dispatcher(self.ns_conf, self.hmac_key)
        try:
            return self._count(spec, dispatcher, began, min_count)
        finally:
            dispatcher.release()

    def _count(self, spec, dispatcher, began, min_count):
        wait_for_workers(dispatcher, self.ns_conf, self.cluster_timeout)
        status = dispatcher.call("status")
        workers = {name: (m.uri or transport.lookup(self.ns_conf, name), m.threads)
                   for name, m in status.workers.items()}
        shards = sorted([name, s.uri] for name, s in status.shards.items())
        threads = sum(t for _uri, t in workers.values())
        step = range_bytes(spec.size, threads)
        self.queue.extend([i, lo, min(spec.size, lo + step)] for i, lo in enumerate(range(0, spec.size, step)))
        n_ranges = self.total = len(self.queue)
        count_id, token = uuid.uuid4().hex, secrets.token_hex(16)
        logger.info("counting the vocabulary of %s (%i bytes) on %i workers (%i threads), %i ranges of %i bytes, "
                    "%i shards", spec.path, spec.size, len(workers), threads, n_ranges, step, len(shards))
        # the lease names the count's corpus and shards: the workers count for these only
        lease = protocol.CountRef(count=count_id, token=token, corpus=protocol.corpus_digest(spec), shards=shards)
        with _Lease(dispatcher, self.ns_conf, self.hmac_key, lease):
            held = links.ShardLinks(shards, self.hmac_key, self.ns_conf, token)
            try:
                held.call_all("count_open", [protocol.CountOpen(count=count_id, token=token, index=i,
                                                                parts=len(shards)) for i in range(len(shards))])
                request = dict(count=count_id, corpus=spec, shards=shards)  # (each range its token, not the secret)
                self.secret = token
                helpers = [threading.Thread(target=self._feed, args=(name, uri, t, request), daemon=True,
                                            name=f"count-{name[-6:]}") for name, (uri, t) in workers.items()]
                for helper in helpers:
                    helper.start()
                self._wait(dispatcher, spec.path, len(workers))
                counted = time.monotonic()
                words, offsets, counts, firsts = self._take(held, count_id, token, min_count)
            finally:
                self._close(held, count_id, token)
        raw_vocab = _vocab(words, offsets, counts, firsts)
        total_words = sum(r[0] for r in self.results.values())
        sentences = sum(r[1] for r in self.results.values())
        now = time.monotonic()
        stats = {"count_seconds": now - began, "count_ranges_seconds": counted - began, "count_cpu": self.cpu,
                 "count_shard_cpu": self.shard_cpu, "count_shard_bytes": self.shard_bytes, "count_bytes": self.sent,
                 "count_distinct": len(raw_vocab) + self.dropped[0], "count_sent_distinct": len(raw_vocab),
                 "count_ranges": n_ranges, "count_recounted": self.recounted,
                 "count_workers": len(workers), "count_threads": threads, "count_shards": len(shards),
                 "count_range_bytes": step, "count_range_words": sum(r[2] for r in self.results.values()),
                 "count_range_max_distinct": max((r[2] for r in self.results.values()), default=0)}
        logger.info("collected %i word types from a corpus of %i raw words and %i sentences on the cluster in %.1f s "
                    "(%.0f words/s; %i ranges, %i counted again, %.1f bytes sent a word; %i word types counted fewer "
                    "than %i times kept on the shards)", stats["count_distinct"], total_words, sentences,
                    stats["count_seconds"], total_words / max(stats["count_seconds"], 1e-9), n_ranges, self.recounted,
                    self.sent / max(1, total_words), self.dropped[0], min_count)
        return Counts(raw_vocab, total_words, sentences, stats, self.dropped)

    # ------------------------------------------------------------------ the ranges
    def _wait(self, dispatcher, path, n_workers):
        """Until every range is counted; a worker the dispatcher drops meanwhile is out (its ranges go
        to the others, whether or not its call ever ends)."""
        looked = time.monotonic()
        with self.cond:
            shown = -1
            while len(self.results) < self.total and self.fatal is None:
                if len(self.results) != shown:
                    shown = len(self.results)
                    self._progress(logging.DEBUG, n_workers)
                if len(self.problems) == n_workers:
                    reasons = "; ".join(f"{name}: {why}" for name, why in self.problems.items())
                    raise ClusterError(f"no worker could count the vocabulary of {path} ({reasons})")
                self.cond.wait(WATCH_EVERY)
                if time.monotonic() - looked >= WATCH_EVERY:
                    self.cond.release()
                    try:
                        members = set(dispatcher.call("status").workers)
                    except (transport.PyroError, ValueError) as err:
                        logger.warning("cannot ask the dispatcher for the workers while counting: %s", err)
                        members = None
                    finally:
                        self.cond.acquire()
                    looked = time.monotonic()
                    for name in set(self.out) - (members if members is not None else set(self.out)):
                        self._out(name, "the dispatcher lost it")
            if self.fatal is not None:
                raise self.fatal
            self._progress(logging.INFO, n_workers)

    def _progress(self, level, n_workers):
        """Log the ranges counted so far, with the figures as ``progress`` (gensim_distw2v.client.progress)."""
        logger.log(level, "counted %i of %i ranges", len(self.results), self.total, extra={"progress": {
            "stage": "count", "done": len(self.results), "ranges": self.total,
            "workers": n_workers - len(self.problems), "words": sum(r[0] for r in self.results.values())}})

    def _take_ranges(self, name, threads):
        """Up to ``threads`` ranges for worker ``name``, waiting while others' are out; None: all counted
        (or the worker is out)."""
        with self.cond:
            if name in self.problems:
                return None
            while not self.queue:
                if self.fatal is not None or len(self.results) >= self.total:
                    return None
                self.cond.wait(1.0)
            if name in self.problems:
                return None
            self.out[name] = [self.queue.popleft() for _ in range(min(threads, len(self.queue)))]
            return self.out[name]

    def _feed(self, name, uri, threads, request):
        """Hand worker ``name`` ranges until every range is counted, or it is out."""
        link = endpoints.link(uri, tables.WORKER, self.hmac_key, timeout=CALL_TIMEOUT)
        try:
            while True:
                ranges = self._take_ranges(name, threads)
                if ranges is None:
                    return
                try:
                    reply = link.call("count", protocol.CountRanges(
                        ranges=ranges, tokens=[protocol.range_token(self.secret, request["count"], rid)
                                               for rid, _lo, _hi in ranges], **request))
                except errors.CorpusFileMismatch as err:
                    self._out(name, str(err))
                    return
                except (errors.ShardLost, errors.Full) as err:
                    self._end(name, err)
                    return
                except (transport.PyroError, errors.ClusterFault) as err:
                    self._out(name, f"lost ({type(err).__name__}: {err})")
                    return
                except ValueError as err:  # bad input: every worker would stop on it
                    self._end(name, ValueError(str(err)))
                    return
                if not self._done(name, ranges, reply):
                    return
        finally:
            link.release()

    def _done(self, name, ranges, reply):
        """Take a worker's counts: whether it goes on (False: it was declared out meanwhile)."""
        with self.cond:
            self.out.pop(name, None)
            asked = {entry[0] for entry in ranges}
            for rid, raw, sentences, distinct in reply.ranges:
                if rid in asked and rid not in self.results:
                    self.results[rid] = [raw, sentences, distinct]
            missing = [entry for entry in ranges if entry[0] not in self.results]
            if missing and name not in self.problems:  # (fewer ranges answered than given: count them elsewhere)
                logger.warning("worker %s did not count %i of its ranges; they go to others", name, len(missing))
                self.queue.extendleft(reversed(missing))
            self.cpu += reply.cpu
            self.sent += reply.bytes_sent
            self.cond.notify_all()
            return name not in self.problems

    def _out(self, name, why):
        """Worker ``name`` is out of the count: the ranges it holds go back to the queue."""
        with self.cond:
            if name in self.problems:
                return
            ranges = [entry for entry in self.out.pop(name, ()) if entry[0] not in self.results]
            logger.warning("worker %s is out of the vocabulary count: %s; its %i ranges go to the others", name, why,
                           len(ranges))
            self.problems[name] = why
            self.recounted += len(ranges)
            self.queue.extendleft(reversed(ranges))
            self.cond.notify_all()

    def _end(self, name, err):
        with self.cond:
            self.queue.extendleft(reversed(self.out.pop(name, ())))
            if self.fatal is None:
                self.fatal = err
            self.cond.notify_all()

    # ------------------------------------------------------------------ the words
    def _take(self, held, count_id, token, min_count):
        """Every shard's words, merged, of ``min_count`` or more: ``(words, offsets, counts, firsts)`` of all,
        shard after shard (``self.dropped``: the others' number and occurrences)."""
        # no shard's part holds more words than the ranges' tables together: a shard claiming more (or
        # changing its total between chunks) would keep this loop taking for ever
        most = sum(r[2] for r in self.results.values())

        def take(shard):
            chunks, lo, total = [], 0, None
            while total is None or lo < total:
                chunk = held.call(shard, "count_take", protocol.CountTake(
                    count=count_id, token=token, lo=lo, hi=lo + MAX_TAKE_WORDS, min_count=min_count))
                if chunk.total > most or (total is not None and chunk.total != total) \
                        or len(chunk.counts) > chunk.total - lo:
                    raise ClusterError(
                        f"shard {held.shards[shard][0]} answered count {count_id} with {chunk.total} words in all "
                        f"(before: {total}; the ranges held {most} distinct words together) and {len(chunk.counts)} "
                        f"from word {lo}: it is not a shard of this cluster's, or it is broken; restart it")
                chunks.append(chunk)
                total, lo = chunk.total, lo + len(chunk.counts)
                if not len(chunk.counts):
                    break
            return chunks
        parts = held.each(take)
        self.shard_cpu = sum(part[0].cpu for part in parts)  # (every chunk of a shard tells the same)
        self.shard_bytes = max(part[0].table_bytes for part in parts)
        self.dropped = (sum(part[0].dropped for part in parts), sum(part[0].dropped_total for part in parts))
        chunks = [chunk for part in parts for chunk in part]
        sizes = np.cumsum([0] + [len(c.words) for c in chunks])
        words = np.concatenate([c.words for c in chunks]) if chunks else np.zeros(0, np.uint8)
        offsets = np.concatenate([np.zeros(1, np.int64)] + [c.offsets[1:] + base for c, base in zip(chunks, sizes)])
        counts = np.concatenate([c.counts for c in chunks]) if chunks else np.zeros(0, np.int64)
        firsts = np.concatenate([c.firsts for c in chunks]) if chunks else np.zeros(0, np.int64)
        return words, offsets, counts, firsts

    @staticmethod
    def _close(held, count_id, token):
        """Drop the count on every shard (best effort), then the links."""
        try:
            for shard in range(len(held)):
                try:
                    held.call(shard, "count_close", protocol.CountRef(count=count_id, token=token))
                except (errors.ShardLost, ValueError) as err:
                    logger.warning("could not close count %s on shard %s: %s", count_id, held.shards[shard][0], err)
        finally:
            held.close()


def _vocab(words, offsets, counts, firsts):
    """``defaultdict(int)`` of word -> count in first-occurrence order, from merged arrays (words are
    valid UTF-8: the workers checked every line)."""
    order = np.argsort(firsts, kind="stable")
    return collections.defaultdict(int, zip(decode_words(words, offsets, order), counts[order].tolist()))
