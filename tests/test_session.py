"""The session state machine in-process: no sockets, no dispatcher, no clock."""
import math

import numpy as np
import pytest

from gensim_distw2v import protocol
from gensim_distw2v.core.session import Session
from gensim_distw2v.protocol import errors
from gensim_distw2v.protocol.rounds import MAX_LOSS_PER_WORD
from gensim_distw2v.config.settings import Settings

pytestmark = pytest.mark.unit


def config(epochs=2, corpus_file=None, sync="ssp", workers=2, checkpoint=False):
    """A complete, checked session config of a 10-word, 4-dimension skip-gram model (with
    ``checkpoint``, of a session with checkpoints)."""
    out = protocol.SessionConfig(
        versions={}, params=protocol.TrainParams(sg=1, hs=0, negative=5, window=5, cbow_mean=1, shrink_windows=True,
                                             sample=False, vector_size=4, vocab_size=10, seed=1),
        arrays={"syn0": {"dtype": "float32", "shape": [10, 4]}, "syn1neg": {"dtype": "float32", "shape": [10, 4]},
                "lockf": {"dtype": "float32", "shape": [10]}, "cum_table": {"dtype": "uint32", "shape": [10]}},
        settings=Settings(sync_words=1000, sync=sync), damp_rows={"syn0": 2, "syn1neg": 2}, hot_rows=10,
        compute_loss=False, epochs=epochs, rng_state=protocol.RngState.of(np.random.RandomState(1)), workers=workers,
        corpus_file=protocol.CorpusFileSpec(**corpus_file) if corpus_file is not None else None)
    if corpus_file is not None:
        out.arrays.update(vocab_bytes={"dtype": "uint8", "shape": [40]}, vocab_offsets={"dtype": "int64", "shape": [11]})
    if checkpoint:
        out.checkpoint = protocol.CheckpointSpec(dir="/checkpoints", every=300.0, identity={})
    out.check()
    return out


def running(**kwargs):
    session = Session("s1", config(**kwargs), [["shard-a", "PYRO:a@h:1"]])
    for name, array in session.arrays.items():
        session.receive(name, 0, np.ones_like(array))
    session.start()
    return session


def job(job_id, epoch=0, raw=100):
    return protocol.Job(id=job_id, epoch=epoch, alpha=0.025, indices=np.arange(3, dtype=np.uint32),
                    offsets=np.array([0, 3], np.int64), raw_words=raw, examples=5)


def counts(put, done, raw, effective, examples):
    return {"0": protocol.EpochCounts(put=put, done=done, raw_words=raw, effective_words=effective, examples=examples)}


def report(jobs, flush=-1, loss=0.0, turn=(0, 0)):
    return protocol.RoundReport(jobs=jobs, loss=loss, flush=flush, exact=flush >= 0, merge_seconds=0.0, merge_cpu=0.0,
                            kernel_cpu=0.0, stall_seconds=0.0, bytes_up=0, bytes_down=0, turn=list(turn))


def test_each_state_and_event_has_one_next_state():
    from gensim_distw2v.protocol import constants

    assert set(constants.SESSION_STATES) == {"uploading", "running", "failed", "closed"}
    assert set(constants.LIVE_STATES) == set(constants.SESSION_STATES) - {constants.CLOSED}
    moves = constants.SESSION_EVENTS
    assert {state for state, _event in moves} == set(constants.LIVE_STATES)  # closed is the end
    assert all(moves[state, "close"] == constants.CLOSED for state in constants.LIVE_STATES)
    assert moves["uploading", "start"] == "running" and ("running", "start") not in moves
    assert ("failed", "fail") not in moves and moves["running", "fail"] == "failed"


def test_states_and_their_transitions():
    session = Session("s1", config(), [])
    with pytest.raises(ValueError, match="session s1 is uploading, expected running"):
        session.put_jobs([job(0)])
    session.receive("cum_table", 0, np.ones(10, np.uint32))
    with pytest.raises(ValueError, match="start: arrays not fully uploaded: \\['lockf'\\]"):
        session.start()
    with pytest.raises(ValueError, match="the weights go to the session's shards"):
        session.receive("syn0", 0, np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="chunk starts at 3, expected 0"):
        session.receive("lockf", 3, np.ones(2, np.float32))
    session.receive("lockf", 0, np.ones(6, np.float32))
    with pytest.raises(ValueError, match="overflows 10 rows"):
        session.receive("lockf", 6, np.ones(5, np.float32))
    session.receive("lockf", 6, np.ones(4, np.float32))
    session.start()
    assert session.state == "running"
    with pytest.raises(ValueError, match="is running, expected uploading"):
        session.start()
    session.close()
    assert session.state == "closed"
    for event in (lambda: session.put_jobs([]), lambda: session.join("w"), lambda: session.hand_out("w", 1)):
        with pytest.raises(ValueError, match="session s1 is closed"):
            event()


def test_jobs_of_a_lost_worker_go_back_first_and_count_once():
    session = running()
    session.put_jobs([job(i) for i in range(5)])
    assert (session.join("w1"), session.join("w2")) == (0, 1)
    assert [m["id"] for m in session.hand_out("w1", 2)[0]] == [0, 1]
    assert [m["id"] for m in session.hand_out("w2", 2)[0]] == [2, 3]
    assert session.in_flight_count() == 4
    assert session.release("w1") == 2  # lost: its jobs go back to the front, in order
    assert [m["id"] for m in session.hand_out("w2", 10)[0]] == [0, 1, 4]
    with pytest.raises(ValueError, match="worker w1 is not a member of session s1"):
        session.round_done("w1", report([[0, 50]]))
    assert session.join("w1") == 2  # back as a new rank; a report of jobs that are not its counts nothing
    assert session.round_done("w1", report([[0, 50]])) == 0
    assert session.round_done("w2", report([[i, 50] for i in range(5)], loss=1.5)) == 500
    assert session.round_done("w2", report([[3, 50]])) == 0  # counted once
    assert session.epochs() == counts(5, 5, 500, 250, 25) and session.loss == 1.5 and session.merges == 3


def test_an_epoch_is_done_when_every_job_is_merged_and_every_worker_flushed():
    session = running()
    session.put_jobs([job(0), job(1)])
    session.join("w1")
    session.join("w2")
    out, drained = session.hand_out("w1", 5)
    assert len(out) == 2 and drained is None  # the client has not closed the epoch
    session.end_epoch(0)
    assert session.hand_out("w2", 5) == ([], 0)  # nothing left: time to flush
    session.round_done("w1", report([[0, 1], [1, 1]]))
    assert not session.epoch_done(0)  # merged, not flushed
    session.round_done("w1", report([], flush=0))
    assert not session.epoch_done(0) and session.all_flushed() == -1  # w2 has not flushed
    session.round_done("w2", report([], flush=0))
    assert session.epoch_done(0) and not session.epoch_done(1)
    with pytest.raises(ValueError, match="a job of epoch 2, but this session trains epochs 0 to 1"):
        session.put_jobs([job(9, epoch=2)])


def test_a_worker_that_quits_is_named_and_its_jobs_requeued():
    session = running()
    session.put_jobs([job(0)])
    session.join("w1")
    session.hand_out("w1", 1)
    assert session.quit_worker("w1", "out of memory") == 1
    assert session.quit == {"w1": "out of memory"} and list(session.queue)[0].id == 0
    assert session.all_flushed() is None  # nobody left in the session
    assert not session.workers_seen(["w1", "w2"], now=0.0) and session.state == "running"  # w2 may train it
    assert session.workers_seen(["w1"], now=1.0)  # every registered worker quit: it fails, naming why
    assert session.state == "failed" and session.failure.code == "no_workers"
    assert session.failure.message.startswith("training failed on every worker of the session, so nothing trains "
                                              "it: worker w1: out of memory")


def test_file_epochs_cut_ranges_lazily_and_count_the_workers_words():
    spec = {"path": "/x", "size": 1000, "range_bytes": 300, "total_words": 200, "start_alpha": 0.025,
            "end_alpha": 0.0001, "digest": "d"}
    session = running(corpus_file=spec, epochs=1)
    with pytest.raises(ValueError, match="trains from a corpus file; open its epochs with open_file_epoch"):
        session.put_jobs([job(0)])
    assert session.open_file_epoch(0) == 4
    with pytest.raises(ValueError, match="epoch 0 was opened before"):
        session.open_file_epoch(0)
    session.join("w1")
    with pytest.raises(ValueError, match="has not checked the corpus file"):
        session.hand_out("w1", 1)
    session.check_file("w1", None)
    assert session.queued() == 4
    out, drained = session.hand_out("w1", 3)
    assert [(m["lo"], m["hi"]) for m in out] == [(0, 300), (300, 600), (600, 900)] and drained is None
    assert out[0]["alpha"] > out[2]["alpha"]  # the ranges out count as trained, estimated: alpha decays
    session.round_done("w1", report([[m["id"], 40, 60, 3] for m in out]))
    assert session.epochs() == counts(4, 3, 180, 120, 9) and session.ranges_done[0] == 900
    out, drained = session.hand_out("w1", 3)
    assert [(m["lo"], m["hi"]) for m in out] == [(900, 1000)] and drained == 0
    session.join("w2")
    session.check_file("w2", "no such file")  # a worker that does not see it leaves the session
    assert "w2" not in session.ranks and session.file_checks["w2"] == "no such file"


def test_file_ranges_come_from_stretches_of_the_file_in_turn():
    """An ordered file (by topic, date, source) is trained stretch beside stretch, one stretch per trainer
    thread, as gensim's corpus_file mode reads it; one stretch is the file in order."""
    spec = {"path": "/x", "size": 1000, "range_bytes": 100, "total_words": 200, "start_alpha": 0.025,
            "end_alpha": 0.0001, "digest": "d", "streams": 3}
    session = running(corpus_file=spec, epochs=1)
    assert session.bounds == [0, 3, 6, 10] and session.open_file_epoch(0) == 10
    session.join("w1")
    session.check_file("w1", None)
    out, _ = session.hand_out("w1", 4)
    assert [m["lo"] for m in out] == [0, 300, 600, 100] and session.file_work_left() == 600
    assert session.queued() == 6
    out += session.hand_out("w1", 10)[0]
    assert [m["lo"] // 100 for m in out] == [0, 3, 6, 1, 4, 7, 2, 5, 8, 9]  # the longest stretch ends alone
    assert sorted(m["lo"] for m in out) == list(range(0, 1000, 100)) and session.file_work_left() == 0
    point_trained = [out[1]["id"], out[3]["id"]]  # ranges 3 and 1
    session.round_done("w1", report([[i, 20, 30, 2] for i in point_trained]))
    point = session.resume_point(1)
    assert (point.done_below, point.done_jobs) == (0, [1, 3])
    restored = Session("s2", config(corpus_file=spec, epochs=1), [["shard-a", "PYRO:a@h:1"]])
    restored.restore(point)
    for name, array in restored.arrays.items():
        restored.receive(name, 0, np.ones_like(array))
    restored.start()
    restored.open_file_epoch(0)
    restored.join("w1")
    restored.check_file("w1", None)
    again = [m["lo"] // 100 for m in restored.hand_out("w1", 10)[0]]
    assert again == [0, 4, 6, 2, 5, 7, 8, 9]  # 1 and 3 are trained: never handed out again
    one = running(corpus_file=dict(spec, streams=1), epochs=1)
    one.open_file_epoch(0)
    one.join("w1")
    one.check_file("w1", None)
    assert [m["lo"] for m in one.hand_out("w1", 10)[0]] == list(range(0, 1000, 100))
    many = running(corpus_file=dict(spec, streams=64), epochs=1)  # more stretches than ranges: one a range
    assert many.bounds == list(range(11))
    with pytest.raises(ValueError, match="streams must be an int in"):
        protocol.CorpusFileSpec(**dict(spec, streams=0)).check()


def test_bsp_file_ranges_from_stretches_take_the_rate_of_their_turn():
    spec = {"path": "/x", "size": 1000, "range_bytes": 250, "total_words": 200, "start_alpha": 0.025,
            "end_alpha": 0.0001, "digest": "d", "streams": 2}
    session = bsp_session(workers=1, corpus_file=spec, epochs=1)
    session.open_file_epoch(0)
    session.join("a")
    session.check_file("a", None)
    out, _ = session.hand_out("a", 10)
    assert [m["lo"] for m in out] == [0, 500, 250, 750]
    assert [m["alpha"] for m in out] == pytest.approx([0.025 - 0.0249 * p for p in (0.0, 0.25, 0.5, 0.75)])


def test_only_the_sessions_own_shards_fail_it():
    session = running()
    assert not session.lose_shard("shard-b", "gone") and session.state == "running"
    assert session.lose_shard("shard-a", "no heartbeat") and session.state == "failed"
    assert session.failure == protocol.Failure(code="shard_lost", message="lost parameter shard shard-a (no heartbeat)")
    session.close()
    assert not session.lose_shard("shard-a", "gone again") and session.state == "closed"


def _two_shards():
    session = Session("s1", config(), [["shard-a", "PYRO:a@h:1"], ["shard-b", "PYRO:b@h:1"]])
    for name, array in session.arrays.items():
        session.receive(name, 0, np.ones_like(array))
    session.start()
    return session


def test_a_failed_session_keeps_its_first_cause_and_answers_every_call_with_it():
    session = _two_shards()
    session.put_jobs([job(0)])
    session.join("w1")
    assert session.lose_shard("shard-a", "no heartbeat") and session.lose_shard("shard-b", "it shut down")
    assert session.failure.message == "lost parameter shard shard-a (no heartbeat); shard-b (it shut down)"
    session.poison("w1", "shard-b refused its merge: inf")  # another cause: the first stays
    assert session.failure.code == "shard_lost" and "w1" not in session.ranks
    for event in (lambda: session.put_jobs([]), lambda: session.hand_out("w1", 1), lambda: session.join("w2"),
                  lambda: session.round_done("w1", report([]))):
        with pytest.raises(errors.ShardLost, match="lost parameter shard shard-a") as err:
            event()
        assert err.value.code is errors.Code.SHARD_LOST
    session.expect("failed")  # what progress asks for: no error
    assert not session.workers_seen([], now=1e9)  # no second failure
    with pytest.raises(ValueError, match="session s1 is failed: it cannot start"):
        session._move("start")
    session.close()
    assert session.state == "closed" and session.failure.code == "shard_lost"


def test_a_poisoned_merge_fails_the_session_naming_each_worker_once():
    session = running()
    session.put_jobs([job(0)])
    session.join("w1")
    session.hand_out("w1", 1)
    assert session.poison("w1", "shard-a refused its merge: a value beyond the bound")
    assert not session.poison("w1", "again")  # named once
    assert "w1" not in session.ranks and list(session.queue)[0].id == 0  # it left; its job is back
    assert session.state == "failed" and session.failure.code == "poisoned"
    assert session.failure.message == ("a worker sent a merge that would poison the model, so this train() call "
                                       "stops: worker w1: shard-a refused its merge: a value beyond the bound")


def test_workers_that_quit_for_a_lost_shard_leave_the_cause_to_the_shards_loss():
    session = running()
    session.join("w1")
    session.quit_worker("w1", "lost shard shard-a at PYRO:a@h:1", code="shard_lost")
    assert not session.workers_seen(["w1"], now=10.0) and session.state == "running"  # the shard's loss will say
    assert session.lose_shard("shard-a", "its heartbeat connection closed") and session.failure.code == "shard_lost"
    other = running()
    other.join("w1")
    other.quit_worker("w1", "lost shard shard-a", code="shard_lost")
    other.workers_seen(["w1"], now=10.0)
    assert other.workers_seen(["w1"], now=10.5 + other.config.settings.cluster_timeout)  # no shard loss came
    assert other.failure.code == "no_workers" and "worker w1: lost shard shard-a" in other.failure.message


def test_workers_that_quit_because_they_were_dropped_fail_it_as_dropped_and_a_training_failure_does_not():
    """Every worker quit because the dispatcher (or a shard, told by it) had dropped it meanwhile: ``workers_dropped``
    (they rejoin by themselves: a run with checkpoints resumes); one that failed at training itself: ``no_workers``."""
    session = running()
    for name in ("w1", "w2"):
        session.join(name)
    session.quit_worker("w1", "unknown worker 'w1': say hello first", code="unknown_member")
    assert not session.workers_seen(["w1", "w2"], now=1.0)  # w2 trains on
    session.quit_worker("w2", "worker rank 1 left session s: join it again", code="not_in_session")
    assert session.workers_seen(["w1", "w2"], now=2.0) and session.failure.code == "workers_dropped"
    assert "worker w1: unknown worker 'w1'" in session.failure.message
    other = running()
    for name in ("w1", "w2"):
        other.join(name)
    other.quit_worker("w1", "unknown worker 'w1': say hello first", code="unknown_member")
    other.quit_worker("w2", "MemoryError: out of memory")
    assert other.workers_seen(["w1", "w2"], now=2.0) and other.failure.code == "no_workers"


def test_a_session_whose_registered_workers_never_join_fails_rather_than_waiting_for_ever():
    """Registered workers join a running session within a heartbeat; if none is in it for the cluster timeout (at
    least ``JOIN_WAIT``), the session fails naming that, instead of waiting for them for ever."""
    from gensim_distw2v.core.failures import JOIN_WAIT

    session = running()
    limit = max(JOIN_WAIT, session.config.settings.cluster_timeout)
    assert not session.workers_seen(["w1"], now=0.0) and session.unjoined_since == 0.0
    assert not session.workers_seen(["w1"], now=limit) and session.state == "running"
    session.join("w1")
    assert not session.workers_seen(["w1"], now=limit + 1.0) and session.unjoined_since is None  # it came
    session.release("w1")
    assert not session.workers_seen(["w1"], now=limit + 2.0)
    assert session.workers_seen(["w1"], now=2 * limit + 2.5) and session.failure.code == "no_workers"
    assert "none of the 1 registered joined it" in session.failure.message


def test_a_pause_of_the_holder_is_not_counted_as_anyones_silence():
    """``excuse``: the dispatcher did not run for a while; the client's, the held jobs' and the no-worker clocks move
    on by that much, so nothing fails for the pause alone."""
    session = running()
    timeout = session.config.settings.cluster_timeout
    session.client_seen, session.last_round["w1"] = 10.0, 12.0
    assert not session.workers_seen([], now=100.0)
    session.excuse(timeout + 5.0)
    assert session.client_seen == 15.0 + timeout and session.last_round["w1"] == 17.0 + timeout
    assert not session.workers_seen([], now=101.0 + timeout) and session.state == "running"  # 1 s of its own
    assert session.workers_seen([], now=106.0 + 2 * timeout) and session.failure.code == "no_workers"


def test_a_session_without_workers_fails_after_the_cluster_timeout():
    session = running()  # cluster_timeout: the settings' default
    timeout = session.config.settings.cluster_timeout
    assert not session.workers_seen([], now=100.0) and session.no_workers_since == 100.0
    assert not session.workers_seen(["w1"], now=101.0) and session.no_workers_since is None  # one came back
    assert not session.workers_seen([], now=102.0)
    assert not session.workers_seen([], now=102.0 + timeout) and session.state == "running"
    assert session.workers_seen([], now=102.5 + timeout) and session.failure.code == "no_workers"
    assert session.failure.message.startswith(f"all workers lost: none has been registered with the dispatcher for "
                                              f"{timeout + 0.5:.0f} s")


def test_a_session_fails_once_no_worker_sees_its_corpus_file():
    session = running(corpus_file={"path": "/data/c.txt", "size": 100, "digest": "d", "range_bytes": 10,
                                   "total_words": 20, "start_alpha": 0.025, "end_alpha": 0.0001})
    session.join("w1")
    session.join("w2")
    assert session.file_waiting(["w1", "w2", "w3"]) == 3
    session.check_file("w1", "no such file")
    session.quit_worker("w3", "it crashed")
    assert session.file_waiting(["w1", "w2", "w3"]) == 1
    assert not session.workers_seen(["w1", "w2", "w3"], now=0.0)  # w2 has not said
    session.check_file("w2", "another size")
    assert session.file_waiting(["w1", "w2", "w3"]) == 0
    assert session.workers_seen(["w1", "w2", "w3"], now=0.0) and session.failure.code == "corpus_file"
    assert session.failure.message == ("corpus_file /data/c.txt: 2 of 2 workers do not see the file this client sees "
                                       "(100 bytes) at that path: worker w1: no such file; worker w2: another size")


def test_a_session_fails_before_it_starts_and_the_uploads_learn_why():
    session = Session("s1", config(), [["shard-a", "PYRO:a@h:1"]])
    assert session.lose_shard("shard-a", "it shut down") and session.state == "failed"
    with pytest.raises(errors.ShardLost, match="lost parameter shard shard-a"):
        session.receive("lockf", 0, np.ones(10, np.float32))
    with pytest.raises(errors.ShardLost):
        session.start()


# ------------------------------------------------------------------ the session's messages, in-process
def test_session_config_round_trips_and_names_what_is_wrong():
    record = config(corpus_file={"path": "/x", "size": 1000, "range_bytes": 300, "total_words": 200,
                                 "start_alpha": 0.025, "end_alpha": 0.0001, "digest": "d"})
    msg = record.to_wire()
    back = protocol.SessionConfig.from_wire(msg)
    assert back.settings == record.settings and back.params == record.params and back.corpus_file == record.corpus_file
    assert np.array_equal(back.rng_state.keys, record.rng_state.keys) and back.rng_state.pos == record.rng_state.pos
    state = np.random.RandomState(5)
    state.set_state(back.rng_state.state())
    assert state.randint(1 << 30) == np.random.RandomState(1).randint(1 << 30)  # the client's stream, continued
    for change, problem in (
            ({"params": {k: v for k, v in msg["params"].items() if k != "window"}},
             "malformed session params: missing field 'window'"),
            ({"params": {**msg["params"], "negative": 0}}, "either hs=1 or negative > 0"),
            ({"params": {**msg["params"], "vocab_size": 2 ** 32}}, "vocab_size must be in"),
            ({"settings": {**msg["settings"], "merge_dtype": "int4"}}, "merge_dtype must be one of"),
            ({"settings": [1]}, "field 'settings' must be dict"),
            ({"corpus_file": {**msg["corpus_file"], "range_bytes": 0}}, "range_bytes and total_words >= 1"),
            ({"corpus_file": None}, "arrays must be exactly"),  # the vocabulary's arrays belong to a file session
            ({"rng_state": {**msg["rng_state"], "keys": protocol.pack_array(np.zeros(3, np.uint32))}},
             "rng_state keys must have shape \\(624,\\)"),
            ({"arrays": {**msg["arrays"], "syn0": {"dtype": "float32", "shape": [11, 4]}}},
             "array syn0 must be float32 of shape \\(10, 4\\)"),
            ({"epochs": 0}, "epochs must be in"), ({"hot_rows": 11}, "hot_rows must be in"),
            ({"extra": 1}, "session config: unknown fields \\['extra'\\]")):
        with pytest.raises(ValueError, match=problem):
            protocol.SessionConfig.from_wire({**msg, **change})


def test_jobs_are_checked_against_the_vocabulary():
    msg = job(7).to_wire()
    back = protocol.Job.from_wire(msg, vocab_size=10)
    assert back.id == 7 and back.indices.tolist() == [0, 1, 2] and back.offsets.tolist() == [0, 3]
    assert protocol.Job.from_wire(back.to_wire(), vocab_size=10).raw_words == 100  # a queued job goes on as it came
    with pytest.raises(ValueError, match="word index 2 >= vocab_size 2"):
        protocol.Job.from_wire(msg, vocab_size=2)
    with pytest.raises(ValueError, match="job offsets must run non-decreasing from 0 to 3"):
        protocol.Job.from_wire({**msg, "offsets": protocol.pack_array(np.array([0, 2], np.int64))}, vocab_size=10)
    with pytest.raises(ValueError, match="range job: .* 0 <= lo < hi <= 100"):
        protocol.RangeJob.from_wire({"id": 1, "epoch": 0, "alpha": 0.02, "lo": 50, "hi": 101}, size=100)


def test_progress_round_trips_with_named_counters():
    session = running()
    session.put_jobs([job(0), job(1)])
    session.join("w1")
    session.hand_out("w1", 2)
    session.round_done("w1", report([[0, 60]], loss=2.0))
    worker = protocol.WorkerCounts(words=100, merges=1, bytes_up=10, bytes_down=20, exact_bytes_up=0, exact_bytes_down=0,
                               merge_seconds=0.1, merge_cpu=0.05, kernel_cpu=1.0, stall_seconds=0.0)
    progress = protocol.Progress(epochs=session.epochs(), queued=session.queued(), in_flight=session.in_flight_count(),
                             loss=session.loss, merges=session.merges, workers={"w1": worker, "w2": worker},
                             flushed=session.all_flushed(), file_checks={}, state="running", failure=None)
    back = protocol.Progress.from_wire(progress.to_wire())
    assert back.epoch(0) == protocol.EpochCounts(put=2, done=1, raw_words=100, effective_words=60, examples=5)
    assert back.epoch(1) == protocol.EpochCounts() and back.in_flight == 1 and back.flushed == -1
    assert back.total("bytes_down") == 40 and back.workers["w1"] == worker
    bad = progress.to_wire()
    bad["workers"]["w1"]["words"] = -1
    with pytest.raises(ValueError, match="worker counters: words must be >= 0"):
        protocol.Progress.from_wire(bad)


def test_worker_counters_fold_round_reports():
    counts = protocol.WorkerCounts()
    counts.add(report([[0, 10]], loss=1.0), 100)
    late = protocol.RoundReport(jobs=[], loss=0.0, flush=0, exact=True, merge_seconds=0.5, merge_cpu=0.0, kernel_cpu=0.0,
                            stall_seconds=0.0, bytes_up=40, bytes_down=60, turn=[0, 1])
    counts.add(late, 0)
    assert (counts.words, counts.merges, counts.bytes_up, counts.bytes_down) == (100, 2, 40, 60)
    assert (counts.exact_bytes_up, counts.exact_bytes_down) == (40, 60)  # only the exact (flush) round's
    assert counts.merge_seconds == 0.5  # the worker's running totals: the largest seen
    counts.add(protocol.RoundReport(**{**late.to_wire(), "merge_seconds": 0.2, "exact": False, "flush": -1}), 0)
    assert counts.merge_seconds == 0.5 and counts.exact_bytes_up == 40


def test_round_reports_lag_is_summed_and_checked():
    """A report's lag (words trained between a round's take and its replies) adds up over reports; one
    that is not a non-negative int is refused by name."""
    counts = protocol.WorkerCounts()
    for lag in (120, 80):
        counts.add(protocol.RoundReport(**{**report([[0, 10]]).to_wire(), "lag_words": lag}), 10)
    assert counts.lag_words == 200
    for bad in (-1, 2.5, True, 2 ** 41):
        with pytest.raises(ValueError, match="lag_words"):
            protocol.RoundReport.from_wire({**report([[0, 10]]).to_wire(), "lag_words": bad})


# ------------------------------------------------------------------ sync="bsp": dealt jobs, rounds in turn
def bsp_session(workers=2, **kwargs):
    session = Session("s1", config(sync="bsp", workers=workers, **kwargs), [["shard-a", "PYRO:a@h:1"]])
    for name, array in session.arrays.items():
        session.receive(name, 0, np.ones_like(array))
    session.start()
    return session


def test_bsp_deals_job_i_to_rank_i_mod_k_whenever_workers_ask():
    session = bsp_session(workers=2)
    session.put_jobs([job(i) for i in range(5)])
    assert session.unclaimed() == [0, 1] and session.queued() == 5
    session.join("late-comer-is-rank-0")
    out, drained = session.hand_out("late-comer-is-rank-0", 10)
    assert [m["id"] for m in out] == [0, 2, 4] and drained is None  # however many it asks for, only its own
    session.end_epoch(0)
    assert session.hand_out("late-comer-is-rank-0", 10) == ([], 0)  # its jobs are out: it flushes
    session.join("w1")
    assert session.unclaimed() == [] and [m["id"] for m in session.hand_out("w1", 1)[0]] == [1]
    assert session.has_work("w1") and not session.has_work("late-comer-is-rank-0")


def test_bsp_rounds_wait_until_every_rank_has_started():
    session = bsp_session(workers=2)
    session.join("a")
    session.hand_out("a", 1)
    assert not session.may_merge("a", [0, 0])  # rank 1 not joined: its weights would hold a's round
    session.join("b")
    assert not session.may_merge("a", [0, 0])  # joined, still downloading (it asks for jobs once done)
    session.hand_out("b", 0)
    assert session.may_merge("a", [0, 0]) and not session.may_merge("b", [0, 0])


def test_bsp_rounds_go_in_turn_by_epoch_round_and_rank():
    session = bsp_session(workers=3)
    for name in ("a", "b", "c"):
        session.join(name)
        session.hand_out(name, 0)
    assert session.may_merge("a", [0, 0]) and not session.may_merge("b", [0, 0])
    with pytest.raises(ValueError, match=r"asks to merge round \[0, 1\], but its next round is \[0, 0\]"):
        session.may_merge("b", [0, 1])
    session.round_done("a", report([], turn=(0, 0)))
    assert session.may_merge("b", [0, 0]) and not session.may_merge("a", [0, 1]) and not session.may_merge("c", [0, 0])
    session.round_done("b", report([], turn=(0, 0)))
    session.round_done("c", report([], flush=0, turn=(0, 0)))  # c's epoch 0 ends after one round
    assert session.may_merge("a", [0, 1]) and not session.may_merge("c", [1, 0])  # epoch 1 waits for a and b
    session.round_done("a", report([], flush=0, turn=(0, 1)))
    assert session.may_merge("b", [0, 1]) and not session.may_merge("a", [1, 0])
    session.round_done("b", report([], turn=(0, 1)))
    assert not session.may_merge("a", [1, 0])  # b has a round 2 of epoch 0 to come
    session.round_done("b", report([], flush=0, turn=(0, 2)))
    assert session.may_merge("a", [1, 0]) and not session.may_merge("c", [1, 0])


def test_bsp_without_a_worker_goes_on_as_ssp_with_every_job():
    session = bsp_session(workers=2)
    session.put_jobs([job(i) for i in range(6)])
    session.join("a")
    session.join("b")
    taken = [m["id"] for m in session.hand_out("b", 2)[0]]
    assert taken == [1, 3]
    assert not session.may_merge("b", [0, 0])
    session.release("b")  # lost: its jobs in flight and those dealt to it go back, the order ends
    assert not session.ordered and session.may_merge("a", [0, 0]) and session.unclaimed() == []
    assert [m["id"] for m in session.hand_out("a", 10)[0]] == [1, 3, 0, 2, 4, 5]
    # a rank nobody claims: the holder ends the order (the dispatcher, after cluster_timeout)
    session = bsp_session(workers=3)
    session.join("a")
    assert session.unclaimed() == [1, 2] and session.end_order() and not session.end_order()


def test_bsp_file_epochs_are_cut_and_dealt_at_once_with_the_rate_of_their_place():
    spec = {"path": "/x", "size": 1000, "range_bytes": 300, "total_words": 200, "start_alpha": 0.025,
            "end_alpha": 0.0001, "digest": "d"}
    session = bsp_session(workers=2, corpus_file=spec, epochs=1)
    assert session.open_file_epoch(0) == 4 and session.queued() == 4 and session.file_work_left() == 0
    session.join("a")
    session.check_file("a", None)
    out, drained = session.hand_out("a", 10)
    assert [(m["lo"], m["hi"]) for m in out] == [(0, 300), (600, 900)] and drained == 0
    assert out[0]["alpha"] == pytest.approx(0.025) and out[1]["alpha"] == pytest.approx(0.025 - 0.0249 * 0.6)


def test_a_record_field_with_a_default_may_be_left_out():
    """A field added later with a default (an older peer's message lacks it) takes its default; a
    field without one is still required, and an unknown one refused."""
    msg = protocol.MergePart(session="s", rank=0, lo=0, hi=10, matrices={}, hold_back=0.0, hot_rows=4, token="t",
                         exact=False).to_wire()
    assert msg["tree_hot_rows"] == -1 and msg["wanted"] is None
    del msg["tree_hot_rows"], msg["wanted"]
    part = protocol.MergePart.from_wire(msg)
    assert part.tree_hot_rows == -1 and part.wanted is None and part.hot_rows == 4
    with pytest.raises(ValueError, match="missing field 'rank'"):
        protocol.MergePart.from_wire({k: v for k, v in msg.items() if k != "rank"})
    with pytest.raises(ValueError, match="unknown fields \\['max_rows'\\]"):
        protocol.MergePart.from_wire({**msg, "max_rows": -1})


def test_a_resume_point_names_the_trained_jobs_and_a_restored_session_counts_on():
    import zlib

    plain = running(epochs=2)
    plain.put_jobs([job(0)])
    assert not plain.job_crc and not plain.head  # without checkpoints, no CRC is worked out
    session = running(epochs=2, checkpoint=True)
    session.join("w1")
    session.put_jobs([job(i) for i in range(6)])
    out, _ = session.hand_out("w1", 6)
    # jobs 0, 1, 2 and 4 merged; 3 and 5 in flight: they are trained again after a resume
    session.round_done("w1", report([[0, 80], [1, 80], [2, 80], [4, 80]]))
    point = session.resume_point(7)
    crc = zlib.crc32(np.arange(3, dtype=np.uint32))
    assert (point.checkpoint, point.epoch, point.first_job, point.done_below, point.done_jobs) == (7, 0, 0, 3, [4])
    assert point.crc == 4 * crc and point.epochs == counts(4, 4, 400, 320, 20) and point.head == [crc] * 6
    restored = Session("s2", config(epochs=2, checkpoint=True), [["shard-a", "PYRO:a@h:1"]])
    restored.restore(protocol.Resumed.from_wire(point.to_wire()))
    for name, array in restored.arrays.items():
        restored.receive(name, 0, np.ones_like(array))
    restored.start()
    restored.join("w1")
    restored.put_jobs([job(3), job(5)])  # the client puts the jobs not trained
    restored.end_epoch(0)
    restored.hand_out("w1", 2)
    restored.round_done("w1", report([[3, 80], [5, 80]], flush=0))
    assert restored.epochs() == counts(6, 6, 600, 480, 30) and restored.epoch_done(0)
    # an epoch trained and flushed: the next point starts the next epoch, after the last job put
    point = restored.resume_point(8)
    assert (point.epoch, point.first_job, point.done_below, point.done_jobs, point.crc) == (1, 6, 6, [], 0)


def test_a_restored_file_epoch_never_hands_out_a_trained_range():
    spec = {"path": "/x", "size": 1000, "range_bytes": 300, "total_words": 200, "start_alpha": 0.025,
            "end_alpha": 0.0001, "digest": "d"}
    session = running(corpus_file=spec, epochs=1)
    session.open_file_epoch(0)
    session.join("w1")
    session.check_file("w1", None)
    out, _ = session.hand_out("w1", 3)
    session.round_done("w1", report([[out[0]["id"], 40, 60, 3], [out[2]["id"], 40, 60, 3]]))  # ranges 0 and 2
    point = session.resume_point(1)
    assert (point.first_job, point.done_below, point.done_jobs, point.range_bytes) == (0, 1, [2], 300)
    restored = Session("s2", config(corpus_file=spec, epochs=1), [["shard-a", "PYRO:a@h:1"]])
    restored.restore(point)
    for name, array in restored.arrays.items():
        restored.receive(name, 0, np.ones_like(array))
    restored.start()
    assert restored.open_file_epoch(0) == 4
    restored.join("w1")
    restored.check_file("w1", None)
    out, drained = restored.hand_out("w1", 4)
    assert [(m["lo"], m["hi"]) for m in out] == [(300, 600), (900, 1000)] and drained == 0
    restored.round_done("w1", report([[m["id"], 40, 60, 3] for m in out], flush=0))
    assert restored.epochs() == counts(4, 4, 240, 160, 12) and restored.epoch_done(0)


def test_reported_values_are_bounded_so_that_the_totals_stay_finite():
    """Issue 38, item 5: a member's report is checked against bounds, not only for being finite (two reports of
    a loss of 1.7e308 made the session's total infinite, and every progress reply after it failed)."""
    wire = report([[0, 50]], loss=120.0).to_wire()
    protocol.RoundReport.from_wire(wire)  # a real round's loss: a few per word
    for changes, problem in [({"loss": 1.7e308}, "loss must be in"), ({"loss": -1.0}, "loss must be in"),
                             ({"merge_cpu": 1e300}, "merge_cpu must be at most"),
                             ({"bytes_up": 2 ** 60}, "bytes must be below"),
                             ({"jobs": [[0, 2 ** 50]]}, "ints in \\[0, 2\\*\\*40\\)")]:
        with pytest.raises(ValueError, match=problem):
            protocol.RoundReport.from_wire(dict(wire, **changes))
    session = running()
    session.put_jobs([job(0), job(1)])
    session.join("w1")
    session.hand_out("w1", 2)
    for job_id in (0, 1):  # the largest losses a report may carry: the total stays finite
        biggest = dict(wire, jobs=[[job_id, 50]], loss=MAX_LOSS_PER_WORD * 1_000_000)
        session.round_done("w1", protocol.RoundReport.from_wire(biggest))
    assert math.isfinite(session.loss)


def _file_range_rates(epochs, **spec):
    """Two workers take a file's ranges (10 of 20 raw words) in turn for ``epochs`` epochs (``spec``
    added to the file's): ``[(epoch, lo, alpha)]`` of every range."""
    spec = {"path": "/x", "size": 1000, "range_bytes": 100, "total_words": 200, "digest": "d", **spec}
    session = running(corpus_file=spec, epochs=epochs)
    for name in ("w1", "w2"):
        session.join(name)
        session.check_file(name, None)
    alphas = []
    for epoch in range(epochs):
        session.open_file_epoch(epoch)
        while True:
            took = 0
            for name in ("w1", "w2"):
                out, _ = session.hand_out(name, 1)
                if out:
                    alphas.append((epoch, out[0]["lo"], out[0]["alpha"]))
                    session.round_done(name, report([[out[0]["id"], 15, 20, 1]]))  # 20 raw words a range
                    took += 1
            if not took:
                break
    assert len(alphas) == 10 * epochs
    return alphas


def test_file_ranges_decay_the_rate_over_the_whole_corpus_whatever_the_workers():
    """Two workers take a file's ranges in turn for three epochs: every range's rate is gensim's
    schedule at the run's progress (the words of every worker), so the last ranges of the last epoch
    reach the end rate. gensim's own corpus_file mode with W threads divides each thread's words by
    the whole corpus's (word2vec_corpusfile.pyx, get_next_alpha): its epochs decay only 1/W of the way
    (with 2 threads and 3 epochs, down to 0.0042 rather than 0.0001): a hotter schedule this cluster
    copies only when asked (``corpus_file_rate='gensim'``, below; docs/corpus_file.rst)."""
    start, end, epochs = 0.025, 0.0001, 3
    alphas = _file_range_rates(epochs, start_alpha=start, end_alpha=end)
    for epoch, lo, alpha in alphas:  # the rate of the words before the range, over the whole run
        progress = (epoch + lo / 1000) / epochs
        assert alpha == pytest.approx(start - (start - end) * progress, abs=1e-9)
    last = alphas[-1][2]
    assert last < start - (start - end) * (epochs - 1 + 0.9) / epochs + 1e-9  # gensim cf, 2 threads: 0.0042


def test_file_ranges_under_gensims_corpus_file_rate_decay_each_epoch_one_wth_of_the_way():
    """``corpus_file_rate='gensim'`` (``rate_threads`` W in the file's spec): a range's rate is gensim's
    corpus_file mode's with W threads, each epoch decaying only 1/W of its share (two workers, W=2: the
    last range of three epochs at 0.0042 or above, where the linear schedule reaches 0.0001)."""
    start, end, epochs = 0.025, 0.0001, 3
    alphas = _file_range_rates(epochs, start_alpha=start, end_alpha=end, rate_threads=2)
    for epoch, lo, alpha in alphas:
        progress = (epoch + lo / 1000 / 2) / epochs
        assert alpha == pytest.approx(start - (start - end) * progress, abs=1e-9)
    assert alphas[-1][2] > start - (start - end) * (epochs - 1 + 0.5) / epochs - 1e-9  # >= 0.0042
