"""A worker's merge interval at T trainer threads, and its batched round reports (in-process: no
sockets, no processes; the trainer threads are real threads over a stand-in kernel)."""
import threading
import time
import types

import numpy as np
import pytest

from gensim_distw2v import protocol
from gensim_distw2v.config.choices import SYNC
from gensim_distw2v.core import schedule
from gensim_distw2v.worker import merger
from gensim_distw2v.worker.held import wants_held_rows
from gensim_distw2v.worker.state import WorkState
from gensim_distw2v.worker.training import _Training

pytestmark = pytest.mark.unit


class _Kernel:
    """Stands in for the job kernel: takes a little time per word, releases the GIL (sleeps)."""

    def __init__(self):
        self.words = 0
        self.lock = threading.Lock()

    def train_job(self, indices, offsets, alpha, rng, compute_loss):
        time.sleep(len(indices) * 2e-6)
        with self.lock:
            self.words += len(indices)
        return len(indices), 0.0


def _training(sync_words, sync="ssp"):
    t = _Training(types.SimpleNamespace(corpus_dirs=None), "s", None)
    t.state.sync_words, t.state.mode = sync_words, SYNC[sync]
    t.trainer = _Kernel()
    return t


def _job(rng, words=10_000):
    lengths = rng.integers(5, 40, size=words // 20)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return np.zeros(offsets[-1], dtype=np.uint32), offsets


@pytest.mark.parametrize("threads", [1, 2, 4, 8])
@pytest.mark.parametrize("sync", ["ssp", "bsp"])
def test_a_round_carries_the_interval_whatever_the_number_of_trainer_threads(threads, sync):
    """Before, every thread took the rest of the interval anew after a stall: a round carried up to
    T intervals (2,219 words at T=1, 4,350-4,445 at T=4 for an interval of 2,200)."""
    sync_words = 2_200
    t = _training(sync_words, sync)
    rounds, done = [], threading.Event()

    def merge_loop():  # as MergeRounds.loop: a round once the interval is used up (bsp: after training resumes)
        while not done.is_set():
            with t.state.lock:
                if t.state.words_since_merge < sync_words:
                    t.state.lock.wait(0.01)
                    continue
                rounds.append(t.state.words_since_merge)
                t.state.words_since_merge = 0
                t.state.lock.notify_all()
            time.sleep(0.002)  # the round's own work: trainers that used up the interval wait for the next

    def trainer(seed):
        rng = np.random.default_rng(seed)
        for _ in range(6):
            indices, offsets = _job(rng)
            t._train_pieces(indices, offsets, len(indices), 0.025, None)

    merging = threading.Thread(target=merge_loop, daemon=True)
    merging.start()
    workers = [threading.Thread(target=trainer, args=(s,)) for s in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    done.set()
    merging.join(5)
    assert not any(w.is_alive() for w in workers)
    assert len(rounds) >= 10
    longest_sentence = 40
    for words in rounds:
        # a tenth of slack for a whole job, and at most a sentence per thread past the claim
        assert sync_words <= words <= sync_words * 1.1 + threads * longest_sentence, (threads, rounds)
    assert t.state.claimed == 0  # every claim counted once trained
    assert t.trainer.words == sum(rounds) + t.state.words_since_merge  # nothing trained twice, nothing lost


def test_a_job_that_fits_the_interval_goes_in_one_kernel_call():
    """One worker's jobs are not cut while they fit the room left (plus a tenth): gensim's draws."""
    t = _training(1_000_000)
    calls = []
    t.trainer.train_job = lambda indices, offsets, *args: calls.append(len(offsets) - 1) or (len(indices), 0.0)
    rng = np.random.default_rng(1)
    indices, offsets = _job(rng)
    t._train_pieces(indices, offsets, len(indices), 0.025, None)
    assert calls == [len(offsets) - 1]
    assert t.state.words_since_merge == len(indices)


class _Proxy:
    def __init__(self):
        self.reports = []

    def call(self, op, **kwargs):
        assert op == "round_done"
        self.reports.append(kwargs["report"])


def _report(jobs, flush=-1, merge_cpu=1.0):
    return protocol.RoundReport(jobs=jobs, loss=1.0, flush=flush, exact=flush >= 0, merge_seconds=1.0,
                                merge_cpu=merge_cpu, kernel_cpu=2.0, stall_seconds=0.0, bytes_up=10, bytes_down=20,
                                turn=[0, 0])


def _rounds():
    return merger.MergeRounds(WorkState("s"), types.SimpleNamespace(name="w", secret="s"))


def test_the_first_routine_round_reports_at_once_after_a_set_up_longer_than_the_report_interval():
    """The reports' clock starts when the worker heard of the session, not when its set-up ended: a join
    that took longer than REPORT_EVERY lets the first round's jobs count as merged at once."""
    heard = time.monotonic() - 2 * merger.REPORT_EVERY
    rounds, proxy = merger.MergeRounds(WorkState("s"), types.SimpleNamespace(name="w", secret="s"),
                                       reported=heard), _Proxy()
    rounds._report(proxy, _report([[0, 100]]))
    assert [r.jobs for r in proxy.reports] == [[[0, 100]]]
    rounds._report(proxy, _report([[1, 100]]))  # the next within REPORT_EVERY of that one: held
    assert len(proxy.reports) == 1


def test_routine_rounds_are_reported_together_a_few_times_a_second():
    rounds, proxy = _rounds(), _Proxy()
    for i in range(5):
        rounds._report(proxy, _report([[i, 100]], merge_cpu=float(i)))
    assert proxy.reports == []  # within REPORT_EVERY of the last report: nothing sent yet
    rounds.reported -= merger.REPORT_EVERY
    rounds._report(proxy, _report([[5, 100]], merge_cpu=5.0))
    (sent,) = proxy.reports
    assert sent.rounds == 6 and [j[0] for j in sent.jobs] == list(range(6))
    assert sent.loss == 6.0 and sent.bytes_up == 60 and sent.bytes_down == 120
    assert sent.merge_cpu == 5.0  # totals: the latest
    assert protocol.RoundReport.from_wire(sent.to_wire()).rounds == 6  # a valid message
    assert rounds.pending is None


def test_a_flush_goes_at_once_after_the_rounds_before_it():
    rounds, proxy = _rounds(), _Proxy()
    rounds._report(proxy, _report([[1, 100]]))
    rounds._report(proxy, _report([[2, 100]], flush=0), now=True)
    assert [r.flush for r in proxy.reports] == [-1, 0]
    assert [r.jobs for r in proxy.reports] == [[[1, 100]], [[2, 100]]]
    assert not proxy.reports[0].exact and proxy.reports[1].exact  # a flush's bytes stay its own
    rounds._report(proxy)  # nothing pending: nothing sent
    assert len(proxy.reports) == 2


def test_a_round_report_refuses_a_count_of_rounds_below_one():
    msg = _report([[1, 1]]).to_wire()
    msg["rounds"] = 0
    with pytest.raises(ValueError, match="rounds"):
        protocol.RoundReport.from_wire(msg)


@pytest.mark.unit
@pytest.mark.parametrize("threads", [1, 2, 16])
def test_a_worker_queues_a_few_long_ranges_and_many_short_jobs(threads):
    """Jobs of ``batch_words`` are queued four per trainer thread; a corpus file's long ranges (a
    long merge interval's) one per thread and one more, so that 16 workers of 2 threads do not
    take all 64 ranges of an epoch at the start while 8 others wait with none."""
    import types

    def stand(range_words, size=68_000_000, total_words=12_000_000):
        spec = None if range_words is None else protocol.CorpusFileSpec(
            path="/c.txt", size=size, digest="0" * 32, total_words=total_words,
            range_bytes=round(range_words * size / total_words), start_alpha=0.025, end_alpha=0.0001)
        return types.SimpleNamespace(worker=types.SimpleNamespace(threads=threads), file=spec)

    assert _Training._prefetch(stand(None)) == 4 * threads  # iterable jobs
    assert _Training._prefetch(stand(10_000)) == 4 * threads  # a file cut into ranges of batch_words
    assert _Training._prefetch(stand(185_185)) == threads + 1
    assert _Training._prefetch(stand(185_185, size=0)) == 4 * threads  # an empty file: nothing to cut


@pytest.mark.unit
@pytest.mark.parametrize("sg", [0, 1])
def test_a_range_is_read_when_fetched_and_names_its_rows_while_held_or_trained(sg, monkeypatch):
    """A worker reading a corpus file reads each of skip-gram's ranges when it fetches it, and the rounds
    bring the current values of its rows from then on, before it trains, as they do a streamed job's, not
    every row it lacks (skip-gram at K=8 on 40 M tokens: 2 analogy points and 2.9x the bytes down) nor its
    rows only once it trains (12 points). CBOW's ranges are read by the trainer threads (every thread
    reads, where one fetch thread reading for all would bind at 6-8 CBOW threads) and their rows wanted
    only while they train (from the fetch on cost the truth list 0.03-0.05 at K=8): docs/schedule.rst,
    "Skip-gram at half the share"."""
    from gensim_distw2v.worker import held as held_module

    t = _training(1_000)
    t.file = protocol.CorpusFileSpec(path="/c.txt", size=1000, digest="0" * 32, total_words=100, range_bytes=1000,
                                     start_alpha=0.025, end_alpha=0.0001)
    t.params = types.SimpleNamespace(sg=sg, vocab_size=10)
    state = t.state
    state.want_held = wants_held_rows(t.file, t.params)
    assert state.want_held == bool(sg) and wants_held_rows(None, t.params)  # (streamed jobs: from the fetch)
    state.want = np.zeros(10, dtype=np.int32)
    t.vocab = None
    seen, readers, touched = [], [], []
    t.replica = types.SimpleNamespace(touched=lambda name, rows: touched.append((name, rows.tolist())))

    class Reader:
        closed = False

        def read(self, lo, hi):
            readers.append((threading.current_thread().name, lo, hi))
            indices = np.array([3, 5, 3, 7], dtype=np.uint32)
            return indices, np.array([0, 4], dtype=np.int64), np.array([0, 1]), 4, 1

        def close(self):
            self.closed = True

    opened = []
    monkeypatch.setattr(held_module, "open_reader",
                        lambda file, vocab, folders: opened.append(Reader()) or folders == ("/c",) and opened[-1])
    t.worker = types.SimpleNamespace(corpus_dirs=("/c",))  # the worker's --corpus-dir reaches its readers

    def pieces(indices, offsets, raw, alpha, rng):
        seen.append(np.flatnonzero(state.want).tolist())
        return len(indices), 0.0
    t._train_pieces = pieces
    job = protocol.RangeJob(id=4, epoch=0, alpha=0.02, lo=0, hi=1000).to_wire()
    # the fetch loop holds a reader only where it reads (skip-gram's ranges)
    held = t._held(job, Reader() if state.want_held else None)
    if sg:
        assert held[1] is not None and held[2].tolist() == [3, 5, 7] and readers == [("MainThread", 0, 1000)]
        assert np.flatnonzero(state.want).tolist() == [3, 5, 7]  # skip-gram: wanted while queued
    else:
        assert held[1] is None and held[2] is None and not readers and not state.want.any()  # left for its trainer
    state.jobs.put(held)
    trainer = threading.Thread(target=t._train, args=(0, None), name="trainer-0")
    trainer.start()
    deadline = time.monotonic() + 30  # (not jobs.join(): a trainer failing leaves the job unfinished)
    while state.jobs.unfinished_tasks and not state.stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert state.error is None and not state.jobs.unfinished_tasks
    state.stop.set()
    trainer.join(10)
    assert seen == [[3, 5, 7]] and not state.want.any()  # wanted while trained, released after
    assert touched == [("syn0", [3, 5, 7])]  # named to the next round once trained (take_listed)
    if not sg:  # read by the trainer, on a reader of its own, closed when it stops
        assert readers == [("trainer-0", 0, 1000)] and len(opened) == 1 and opened[0].closed
    else:
        assert not opened
    assert state.done == [[4, 4, 4, 1]] and state.trained_words == 4 and state.error is None


def test_a_trainer_thread_failing_outside_a_job_ends_the_session_rather_than_hanging_it():
    """A trainer's error outside a job (its reader, its wait for a round) is the session's error, as a
    job's is: before, the thread died silently and the epoch waited for ever (a session of streamed jobs
    once failed so: its trainers looked for a corpus file's vocabulary that only reading workers have)."""
    t = _training(1_000)

    def broken():
        raise RuntimeError("the round's clock broke")
    t.state.wait_for_round = broken
    t._train(0, None)
    assert isinstance(t.state.error, RuntimeError) and t.state.stop.is_set()


def _steered(sync_target, lag_limit=1.65):
    state = WorkState("s")
    state.sync_words = sync_target
    return merger.MergeRounds(state, None, spec=merger.RoundSpec(sync_target=sync_target, lag_limit=lag_limit))


@pytest.mark.parametrize("late", [0.3, 1.5, 3.0])
def test_the_lag_shortens_the_interval_until_interval_and_lag_are_within_the_limit(late):
    """Rounds whose replies land ``late`` intervals after they were taken (the lag growing with the
    interval, as when rounds land late): the interval settles where interval and lag together are
    ``lag_limit`` intervals asked for, and no lower; a lag within the limit leaves it as asked."""
    target, limit = 40_000, 1.65
    rounds = _steered(target, limit)
    for _ in range(60):
        carried = rounds.state.sync_words
        rounds._steer_interval(carried, int(late * carried))
    settled = rounds.state.sync_words
    if 1 + late <= limit:
        assert settled == target
    else:
        assert settled * (1 + late) == pytest.approx(limit * target, rel=0.01), settled
        assert settled >= schedule.shortest_interval(target) == target // 4


@pytest.mark.parametrize("asked, shortest", [(40_000, 10_000), (4_000, 2_200), (1_000, 1_000)])
def test_the_interval_stays_within_a_quarter_the_floor_and_the_whole_of_what_was_asked(asked, shortest):
    """Never below a quarter of the interval asked, nor below the schedule's floor (2,200 words, chosen through
    a cluster with its lag), nor above what was asked: an interval asked below the floor is never steered."""
    rounds = _steered(asked)
    for _ in range(60):
        rounds._steer_interval(rounds.state.sync_words, 100 * rounds.state.sync_words)  # a lag no interval can meet
    assert rounds.state.sync_words == shortest
    for _ in range(60):
        rounds._steer_interval(rounds.state.sync_words, 0)  # the lag gone: back to the interval asked for
    assert rounds.state.sync_words == asked


def test_without_a_lag_limit_the_interval_is_never_steered():
    """``lag_limit=None`` (also one worker, ``bsp`` and ``local``: set by the worker's session), and rounds
    made for want of jobs (nothing carried), leave the interval as asked."""
    rounds = _steered(40_000, None)
    rounds._steer_interval(40_000, 400_000)
    assert rounds.state.sync_words == 40_000
    rounds = _steered(40_000)
    rounds._steer_interval(0, 400_000)
    assert rounds.state.sync_words == 40_000


def test_a_session_that_ends_after_a_new_hello_is_not_remembered_as_trained(monkeypatch):
    """Dropped by the dispatcher and back (a new hello) while its session thread was still ending: that session is
    not remembered as trained, so the worker joins it again if it still runs (before, the thread ending after the
    hello remembered it, and the worker never joined: the session waited for ever)."""
    from gensim_distw2v.worker import service

    worker = service.Worker({}, threads=1)
    monkeypatch.setattr(service.endpoints, "link", lambda *args, **kwargs: None)
    monkeypatch.setattr(service.transport, "release", lambda proxy: None)

    def session(sid, hello_meanwhile):
        def run():
            if hello_meanwhile:
                worker.found("PYRO:dispatcher@127.0.0.1:1")
            raise service.SessionLost(sid)
        training = types.SimpleNamespace(sid=sid, stop=threading.Event(), proxy=None, run=run)
        worker._run_session(training, worker.hellos)

    session("ended", hello_meanwhile=False)
    assert list(worker.trained_sessions) == ["ended"]  # not joined again
    session("dropped", hello_meanwhile=True)
    assert "dropped" not in worker.trained_sessions and not worker.trained_sessions  # joined again if it runs
