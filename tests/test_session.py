"""The session state machine in-process: no sockets, no dispatcher, no clock."""
import numpy as np
import pytest

from gensim_distw2v import wire
from gensim_distw2v.session import Session


def config(epochs=2, corpus_file=None):
    out = {"params": {"vocab_size": 10, "vector_size": 4}, "epochs": epochs,
           "arrays": {"syn0": {"dtype": "float32", "shape": [10, 4]}, "lockf": {"dtype": "float32", "shape": [10]}}}
    if corpus_file is not None:
        out["corpus_file"] = corpus_file
    return out


def running(**kwargs):
    session = Session("s1", config(**kwargs), [["shard-a", "PYRO:a@h:1"]])
    session.receive("lockf", 0, np.ones(10, np.float32))
    session.start()
    return session


def job(job_id, epoch=0, raw=100):
    msg = {"id": job_id, "epoch": epoch}
    return (msg, epoch, 0.025, None, None, raw, 5)


def report(jobs, flush=-1, loss=0.0):
    return wire.RoundReport(jobs=jobs, loss=loss, flush=flush, exact=flush >= 0, merge_seconds=0.0, merge_cpu=0.0,
                            kernel_cpu=0.0, stall_seconds=0.0, bytes_up=0, bytes_down=0)


def test_states_and_their_transitions():
    session = Session("s1", config(), [])
    with pytest.raises(ValueError, match="session s1 is uploading, expected running"):
        session.put_jobs([job(0)])
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
    assert session.epochs() == {"0": [5, 5, 500, 250, 25]} and session.loss == 1.5 and session.merges == 3


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
    assert session.quit == {"w1": "out of memory"} and list(session.queue)[0][0]["id"] == 0
    assert session.all_flushed() is None  # nobody left in the session


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
    assert session.epochs() == {"0": [4, 3, 180, 120, 9]} and session.ranges_done[0] == 900
    out, drained = session.hand_out("w1", 3)
    assert [(m["lo"], m["hi"]) for m in out] == [(900, 1000)] and drained == 0
    session.join("w2")
    session.check_file("w2", "no such file")  # a worker that does not see it leaves the session
    assert "w2" not in session.ranks and session.file_checks["w2"] == "no such file"


def test_only_the_sessions_own_shards_fail_it():
    session = running()
    assert not session.lose_shard("shard-b", "gone")
    assert session.lose_shard("shard-a", "no heartbeat") and session.lost_shards == {"shard-a": "no heartbeat"}
    session.close()
    assert not session.lose_shard("shard-a", "gone again")
