"""A worker's merge rounds: its changes to the shards, the other workers' changes back.

Every ``sync_words`` words (and whenever it runs out of jobs) a worker merges: it sends the rows it
changed, each straight to the shard that owns it, to every shard at once, and takes in the rows
other workers changed (:mod:`gensim_distw2v.core.merge`), while its trainer threads go on; then
it tells the dispatcher which jobs the rounds carried (a few times a second, several rounds at
once: :data:`REPORT_EVERY`). The cost of a round is per part of rows and
per shard, never per row in Python.
"""
import dataclasses
import time

import numpy as np

from gensim_distw2v import protocol
from gensim_distw2v.core.merge import compiled_cpu
from gensim_distw2v.core.schedule import output_down, round_pieces, round_rows, shortest_interval
from gensim_distw2v.io import endpoints, transport
from gensim_distw2v.protocol import tables

__all__ = ["LOOK_AGAIN", "MergeRounds", "REPORT_EVERY", "RoundSpec", "SessionLost"]

# seconds between a worker's reports of routine merge rounds to the dispatcher (their jobs count as
# trained from then on): a few calls a second per worker whatever the interval, so that the dispatcher is
# off the per-round path; an epoch's flush (and every sync="bsp" round) is reported at once
REPORT_EVERY = 0.5
# seconds the fetch loop and the merger wait on the session's lock before they look again: the trainer
# threads notify them of every change they act on (a job done or taken, an interval claimed, an epoch
# drained), so this bounds only how late they see a stop, an error or a report due; shorter, they woke
# 20 times a second each for nothing (CPU by the clock, not by the words)
LOOK_AGAIN = 0.25
# seconds the merger waits for a round in flight's replies before it looks again whether the next round
# is due (rounds_in_flight=2): a round comes due every few tens of milliseconds at most
LAND_WAIT = 0.002


class SessionLost(Exception):
    """The session ended, was replaced, or the dispatcher went away."""


@dataclasses.dataclass
class RoundSpec:
    """What a session's merge rounds on a worker are made of, fixed once it joined (the settings
    and the session's shape; :class:`MergeRounds` takes it).

    Attributes
    ----------
    layout : gensim_distw2v.core.layout.ShardLayout or None
        Which shard owns which row.
    vector_size : int
    ranges, flush_ranges : list of (int, int)
        The row ranges of a routine round's parts and of an epoch flush's.
    sync_target : int
        The interval asked for (``settings.sync_words``; :attr:`WorkState.sync_words
        <gensim_distw2v.worker.state.WorkState>` is shortened from it as the lag grows).
    lag_limit : float or None
        ``settings.lag_limit`` (None: the interval stays ``sync_target``).
    hold_back, merge_dtype, round_pieces, rounds_in_flight, cold_every, cold_output_every, cold_output_down
        The settings of those names.
    hot_rows, output_hot_rows, tree_hot_rows : int
        The words' hot rows, syn1neg's (CBOW: its negatives' too) and hs's tree rows (-1: not known).
    vocab_size : int
    """

    layout: object = None
    vector_size: int = 0
    vocab_size: int = 0
    ranges: list = dataclasses.field(default_factory=list)
    flush_ranges: list = dataclasses.field(default_factory=list)
    sync_target: int = 0
    lag_limit: object = None
    hold_back: float = 0.0
    merge_dtype: str = "float32"
    round_pieces: int = 1
    rounds_in_flight: int = 1
    cold_every: int = 0
    cold_output_every: int = 0
    cold_output_down: str = "all"
    hot_rows: int = -1
    output_hot_rows: int = -1
    tree_hot_rows: int = -1


class MergeRounds:
    """The merge rounds of a session's work on a worker, and its reports of them to the dispatcher.

    Parameters
    ----------
    state : gensim_distw2v.worker.state.WorkState
        The session's work, shared with the trainer threads: the jobs done, the interval's words.
    worker : gensim_distw2v.worker.service.Worker
        The worker (its name, secret, dispatcher, meter).
    links : gensim_distw2v.io.links.ShardLinks or None
        The session's shards.
    replica : gensim_distw2v.core.replica.Replica or None
        This worker's replica of the weights.
    spec : RoundSpec
        What the rounds are made of.
    setup_cpu : float
        Process CPU seconds of the session's set-up here (reported with the rounds).
    reported : float, optional
        ``time.monotonic()`` the reports' clock starts from (default: now; the worker's: when it heard
        of the session, so a set-up longer than :data:`REPORT_EVERY` lets the first round report at once).
    """

    def __init__(self, state, worker, links=None, replica=None, spec=None, setup_cpu=0.0, reported=None):
        self.state, self.worker, self.links, self.replica = state, worker, links, replica
        self.spec = spec if spec is not None else RoundSpec()
        self.setup_cpu = setup_cpu
        # the last routine round's last part, in flight: [requests, InFlight, its RoundReport, the words trained
        # when it was taken (the lag's clock), the words it carried (0: a round that does not steer the interval)]
        self.flight = None
        self.recent = None  # the recent rounds' words and lags, moving sums (_steer_interval)
        self.rounds = 0
        self.turn = [0, 0]  # bsp: the (epoch, round) this worker merges next
        self.merge_seconds = self.merge_cpu = 0.0  # wall and CPU seconds of merge rounds
        self.flush_cpu = 0.0  # of merge_cpu, the epoch flushes'
        # of merge_cpu: the routine rounds' compiled calls' (no GIL), and the taking of their parts
        self.routine_nogil_cpu = self.take_cpu = 0.0
        # merge rounds not reported yet; the last report
        self.pending, self.reported = None, time.monotonic() if reported is None else reported

    def loop(self):
        """Merge when ``sync_words`` words are trained, when idle with unmerged jobs, and flush
        everything exactly once an epoch is drained; meanwhile take in a round in flight as soon as its
        replies come. ``bsp``: no round for want of jobs (its timing would decide what a round
        carries), and an interval's round before a flush; ``local``: flushes only."""
        state, spec = self.state, self.spec
        proxy = endpoints.link(self.worker.dispatcher_uri, tables.DISPATCHER, self.worker.hmac_key, timeout=60.0)
        try:
            while not state.stop.is_set():
                with state.lock:
                    idle = not state.holds_jobs()
                    # a flush once the epoch is drained, and again for jobs of it trained after that (given
                    # back by a lost worker): an epoch's jobs are always reported by an exact round (jobs of
                    # the next epoch, while the client has not put all of them, are not: drained is stale)
                    flush = idle and state.drained is not None and (
                        state.drained > state.flushed or (bool(state.done) and state.done_epoch <= state.drained))
                    interval = state.words_since_merge >= state.sync_words
                    if state.mode.in_turn and interval:
                        flush = False
                    spare = idle and state.done and state.mode.overlapped
                    if flush or interval or spare:
                        step = "flush" if flush else "round"
                    elif self.flight is not None:
                        step = "land"
                    else:
                        state.lock.wait(LOOK_AGAIN)
                        if self.pending is None:
                            continue
                        step = "report"
                    epoch = state.drained
                if step == "flush":
                    self._merge_round(proxy, "float32", 0.0, flush_epoch=epoch)
                    state.flushed = epoch
                elif step == "round":
                    self._merge_round(proxy, spec.merge_dtype, spec.hold_back, restart_clock=interval)
                elif step == "land":  # (a round in flight: taken in as soon as its replies come)
                    if self.flight[1].ready(LAND_WAIT):
                        self._count_landing(proxy)
                else:  # nothing to merge: rounds not reported yet go once due
                    self._report(proxy)
        except SessionLost:
            pass
        except Exception as err:  # noqa: BLE001 - handed to the fetch loop, which ends the session
            state.fail(err)
        finally:  # (a round still in flight as the session stops, ended or failed: its jobs are not reported)
            if self.flight is not None:
                self.flight[1].abandon()
                self.flight = None
            transport.release(proxy)

    def _count_landing(self, proxy):
        """:meth:`_land` outside a round, its CPU counted with the merge rounds' (a routine round's)."""
        compiled = compiled_cpu()
        pool_cpu, cpu, helpers, report = self._land()
        self.merge_cpu += pool_cpu + cpu + helpers
        self.routine_nogil_cpu += compiled_cpu() - compiled + helpers
        self._report(proxy, report)

    def _merge_round(self, proxy, dtype, hold_back, flush_epoch=None, restart_clock=True):
        """Send this worker's changes (values as ``dtype``: :data:`gensim_distw2v.config.choices.DELTA_DTYPES`) to
        the shards and take in the other workers', range by range, every shard at once; then tell
        the dispatcher the round's jobs are merged.

        With ``flush_epoch`` the round sends everything (no hold-back, float32) and tells the
        dispatcher this worker has nothing left of that epoch. A round made because the worker ran
        out of jobs (``restart_clock=False``) leaves the interval's word count as it is: where the
        intervals end depends only on the words trained, not on when jobs arrived (so one worker
        cuts no job, and reproduces gensim, however its jobs are delayed).
        """
        state, spec = self.state, self.spec
        turn = list(self.turn)
        if state.mode.in_turn:
            while not proxy.call("begin_round", name=self.worker.name, secret=self.worker.secret, session=state.sid,
                                 turn=turn, wait=0.5):
                self.worker.check_alive(state)
        began, cpu, compiled = time.perf_counter(), time.thread_time(), compiled_cpu()
        helpers = self.replica.helper_cpu  # the merge helper threads' CPU (compiled work), counted with ours
        with state.lock:
            jobs, loss = state.take_done()
            taken_at, carried = state.words_trained(), state.words_since_merge
            steer = restart_clock and flush_epoch is None  # (an interval's round: its lag steers the interval)
            # bsp: trainers go on once the round is taken in (below); a round made for want of jobs
            # leaves the interval's count as it is
            if not state.mode.in_turn and (restart_clock or flush_epoch is not None):
                state.restart_interval()
            state.lock.notify_all()  # trainers waiting for this round may go on
        # every cold_every-th round and every flush merges every row; the others only the hot rows
        # of syn0 and syn1neg (merge.hot_rows) and of hs's syn1 (merge.tree_hot_rows; every syn1 row
        # if those are not known): parts beyond them are skipped
        self.rounds += 1
        every_row, hot, tree, limits = round_rows(self.rounds, spec.hot_rows, spec.tree_hot_rows, spec.cold_every,
                                                  spec.cold_output_every, flush=flush_epoch is not None,
                                                  output_hot_rows=spec.output_hot_rows)
        out = -1 if hot < 0 else max(hot, spec.output_hot_rows)  # syn1neg's hot rows (CBOW: its negatives' too)
        down = output_down(spec.cold_output_down, self.rounds, spec.cold_every, spec.cold_output_every,
                           flush=flush_epoch is not None)
        top = spec.vocab_size if "syn1" in self.replica.replica and tree < 0 else max(hot, tree, out)
        parts = spec.flush_ranges if flush_epoch is not None else spec.ranges if every_row \
            else [(lo, hi) for lo, hi in spec.ranges if lo < top] or spec.ranges[:1]
        traffic, pool_cpu = [0, 0], 0.0  # bytes up, down; CPU of the shard links' threads
        wanted = None
        if flush_epoch is None and state.want is not None:
            with state.lock:
                wanted = np.flatnonzero(state.want).astype(np.uint32)
        # a part's rows are taken while the part before is on its way (wire, fold, reply): its rows are
        # others, so the order of the two does not matter; one part in flight on each shard's link
        flight, overlapped = None, 0
        if flush_epoch is not None or state.mode.in_turn:  # (exact: nothing of the round before may be on its way)
            landed = self._land()
            pool_cpu += landed[0]
            if landed[3] is not None:
                self._report(proxy, landed[3])
        # the round before may still be in flight (rounds_in_flight=2): taken in once this round's first
        # piece is taken, that piece's rows added back to its values (Replica.take_in's sent_since)
        keep = flush_epoch is None and state.mode.overlapped and spec.rounds_in_flight > 1
        landed = None
        failed = True
        try:
            for lo, hi in round_pieces(parts, top, spec.round_pieces):
                taking, taking_helpers = time.thread_time(), self.replica.helper_cpu
                requests, sent = self._part_requests(lo, hi, dtype, hold_back, limits, (hot, tree, out, down), wanted,
                                                     traffic, exact=flush_epoch is not None)
                if flush_epoch is None:
                    self.take_cpu += time.thread_time() - taking + self.replica.helper_cpu - taking_helpers
                if flight is not None:
                    pool_cpu += self._take_replies(*flight, traffic)
                elif self.flight is not None:
                    overlapped, landed = 1, self._land(sent_since=sent)
                    pool_cpu += landed[0]
                flight = (requests, self.links.start_all("merge", requests))
                if landed is not None:  # (its report once this part is on its way)
                    self._report(proxy, landed[3])
                    landed = None
            if keep:  # its report below: its jobs count as merged once its replies are in (_land)
                self.flight = [flight[0], flight[1], None, taken_at, carried if steer else 0]
            else:
                pool_cpu += self._take_replies(*flight, traffic)
            failed = False
        finally:
            if flight is not None and failed:
                flight[1].abandon()  # (if an error came between its start and its replies)
        with state.lock:
            stalled = state.stalled
            if state.mode.in_turn:
                state.restart_interval()
                state.lock.notify_all()
            lag = state.words_trained() - taken_at
            if steer and not keep:
                self._steer_interval(carried, lag)
        self.turn = [flush_epoch + 1, 0] if flush_epoch is not None else [turn[0], turn[1] + 1]
        self.merge_seconds += time.perf_counter() - began
        helpers = self.replica.helper_cpu - helpers
        self.merge_cpu += time.thread_time() - cpu + pool_cpu + helpers
        if flush_epoch is None:  # of a routine round, the compiled calls' (taking and applying parts: ours, the helpers')
            self.routine_nogil_cpu += compiled_cpu() - compiled + helpers
        if flush_epoch is not None:
            self.flush_cpu += time.thread_time() - cpu + pool_cpu + helpers
        report = protocol.RoundReport(
            jobs=jobs, loss=float(loss), flush=-1 if flush_epoch is None else flush_epoch,
            exact=flush_epoch is not None, merge_seconds=self.merge_seconds, merge_cpu=self.merge_cpu,
            flush_cpu=self.flush_cpu, setup_cpu=self.setup_cpu, routine_nogil_cpu=self.routine_nogil_cpu,
            take_cpu=self.take_cpu, kernel_cpu=state.kernel_cpu(), stall_seconds=stalled, bytes_up=traffic[0],
            bytes_down=traffic[1], overlapped=overlapped, lag_words=0 if keep or flush_epoch is not None else lag,
            turn=turn, node=None if flush_epoch is None else self.metrics())  # routine rounds: heartbeats carry them
        if keep:
            self.flight[2] = report
            return
        # an epoch's flush, and every bsp round (its turns are the dispatcher's), go at once; routine rounds
        # in batches
        self._report(proxy, report, now=flush_epoch is not None or state.mode.in_turn)

    def _land(self, sent_since=None):
        """Take in the replies of the round still in flight, if any (``sent_since``: the rows taken since
        it went, :meth:`~gensim_distw2v.core.replica.Replica.take_in`'s); returns ``(CPU seconds of the shard links'
        threads, of this
        thread, of the merge helpers, the round's report or None)``: the caller reports it."""
        state = self.state
        if self.flight is None:
            return 0.0, 0.0, 0.0, None
        cpu, helpers = time.thread_time(), self.replica.helper_cpu
        requests, flight, report, taken_at, carried = self.flight
        self.flight = None
        traffic = [0, 0]
        try:
            pool_cpu = self._take_replies(requests, flight, traffic, sent_since)
        finally:
            flight.abandon()  # (nothing if its replies were taken)
        report.bytes_down += traffic[1]
        with state.lock:
            report.lag_words = state.words_trained() - taken_at
            self._steer_interval(carried, report.lag_words)
        return pool_cpu, time.thread_time() - cpu, self.replica.helper_cpu - helpers, report

    def _steer_interval(self, carried, lag):
        """After a round that carried ``carried`` words landed ``lag`` words later (the lock held): the interval
        trained to (``sync_words``) set where interval and lag together would come to ``lag_limit`` times
        ``sync_target``, from the recent rounds' words and lags (moving sums, a third the latest round's: a
        ratio of sums, so that the mean comes there and not one noisy round), taking the lag as growing with
        the interval (it does when rounds land late); never above ``sync_target`` nor below
        :func:`gensim_distw2v.core.schedule.shortest_interval` of it (a quarter, and not below the 2,200-word
        floor: sixteen workers held gensim's quality there on 40 M tokens with rounds lagging 1.7 intervals)."""
        state, spec = self.state, self.spec
        if spec.lag_limit is None or carried <= 0:
            return
        if self.recent is None:
            self.recent = [float(carried), float(lag)]
        else:
            self.recent = [(2 * old + new) / 3 for old, new in zip(self.recent, (carried, lag))]
        words, lagged = self.recent
        wanted = words * spec.lag_limit * spec.sync_target / (words + lagged)
        state.sync_words = int(round(min(spec.sync_target, max(shortest_interval(spec.sync_target), wanted))))

    def metrics(self):
        """This worker's :class:`gensim_distw2v.protocol.NodeMetrics` in the session so far."""
        return self.worker.meter.sample(self.state.trained_words, self.state.kernel_cpu(), self.merge_cpu)

    def _part_requests(self, lo, hi, dtype, hold_back, limits, rows, wanted, traffic, exact):
        """The merge parts of rows ``[lo, hi)``, one per shard: this worker's changes taken there (and
        marked sent), the rows it wants back; and the changes
        (:meth:`~gensim_distw2v.core.replica.Replica.take_delta`'s). ``rows`` is
        the round's ``(hot, tree, out, down)``: the words' hot rows, hs's tree rows and syn1neg's (-1: every
        row), and whether every rare syn1neg row it lacks should come down."""
        state, spec = self.state, self.spec
        hot, tree, out, down = rows
        deltas = self.replica.take_delta(lo, hi, dtype, hold_back, limits, exact=exact)
        traffic[0] += sum(_nbytes(d) for d in deltas.values())
        split = {name: spec.layout.split(*d) for name, d in deltas.items() if len(d[0])}
        wanted_split = None if wanted is None else spec.layout.split(
            wanted[np.searchsorted(wanted, max(lo, spec.hot_rows)):np.searchsorted(wanted, hi)])
        self.worker.check_alive(state)
        requests = []
        for shard in range(len(self.links)):  # each shard's part of the range, its own rows
            local_lo, local_hi = spec.layout.local_range(lo, hi, shard)
            requests.append(protocol.MergePart(
                session=state.sid, rank=state.rank, lo=local_lo, hi=local_hi, hold_back=float(hold_back),
                token=state.token,
                matrices={name: protocol.pack_deltas(*d[shard]) for name, d in split.items() if len(d[shard][0])},
                hot_rows=-1 if hot < 0 else spec.layout.count(hot, shard), exact=exact,
                tree_hot_rows=-1 if hot < 0 or tree < 0 else spec.layout.count(tree, shard),
                output_hot_rows=None if hot < 0 or out <= hot else spec.layout.count(out, shard), output_down=down,
                wanted=None if wanted_split is None else protocol.pack_wanted(wanted_split[shard][0], local_lo,
                                                                          local_hi)))
            traffic[0] += 0 if requests[-1].wanted is None else len(requests[-1].wanted["data"])
        return requests, deltas

    def _take_replies(self, requests, flight, traffic, sent_since=None):
        """Wait for the shards' replies to ``requests`` (under way: ``flight``) and take them in
        (``sent_since``: :meth:`~gensim_distw2v.core.replica.Replica.take_in`'s); returns the CPU seconds the shard
        links' threads
        spent on them."""
        replies, link_cpu = flight.result()
        size = self.spec.vector_size
        for shard, (request, reply) in enumerate(zip(requests, replies)):
            got = []
            for key in ("matrices", "values"):
                got.append({})
                for name, msg in getattr(reply, key).items():
                    if name not in self.replica.replica:
                        raise ValueError(f"merge reply: unknown matrix {name!r}")
                    rows, values, scales = protocol.unpack_deltas(msg, name, size, request.lo, request.hi,
                                                              f"merge reply's {key}")
                    got[-1][name] = (self.spec.layout.to_global(rows, shard), values, scales)
            traffic[1] += sum(_nbytes(d) for way in got for d in way.values())
            self.replica.take_in(*got, sent_since=sent_since)
        return link_cpu

    def _report(self, proxy, report=None, now=False):
        """Tell the dispatcher which jobs are merged: ``report`` joins the routine rounds not reported
        yet, and they go together once :data:`REPORT_EVERY` seconds have passed since the last
        report; with ``now`` (an epoch's flush, a bsp round) those go first, then ``report`` on its
        own. A worker lost meanwhile has its unreported jobs trained again by others (merged twice:
        a few tenths of a second of its work, against a call per round)."""
        if report is not None and not now and self.pending is not None:
            pending = self.pending  # the rounds' jobs, loss and bytes together; the totals and the turn the latest
            pending.jobs += report.jobs
            pending.loss += report.loss
            pending.bytes_up += report.bytes_up
            pending.bytes_down += report.bytes_down
            pending.rounds += report.rounds
            pending.overlapped += report.overlapped
            pending.lag_words += report.lag_words
            for name in report.TOTALS + ("turn",):
                setattr(pending, name, getattr(report, name))
        elif report is not None and not now:
            self.pending = report
        if self.pending is not None and (now or time.monotonic() - self.reported >= REPORT_EVERY):
            proxy.call("round_done", name=self.worker.name, secret=self.worker.secret, session=self.state.sid,
                       report=self.pending)
            self.pending, self.reported = None, time.monotonic()
        if now and report is not None:
            proxy.call("round_done", name=self.worker.name, secret=self.worker.secret, session=self.state.sid,
                       report=report)
            self.reported = time.monotonic()


def _nbytes(deltas):
    """Bytes of one matrix's ``(rows, values, scales or None)`` on the wire (their arrays)."""
    rows, values, scales = deltas
    return rows.nbytes + values.nbytes + (0 if scales is None else scales.nbytes)
