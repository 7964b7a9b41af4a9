"""Checkpoints and resume through real clusters: a dispatcher or a shard killed mid-run (kill -9) and
restarted, a client killed and its run resumed with ``resume_from``, damaged checkpoints, other corpora.

Each test waits on the cluster's own state (the dispatcher's progress and log lines) before it kills
anything: the kill lands at about 40 % of the run, after a checkpoint was committed.
"""
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from gensim_distw2v import LocalCluster, Word2Vec
from gensim_distw2v.io import transport
from gensim_distw2v.io.store import CheckpointStore
from gensim_distw2v.client.training import find_dispatcher

pytestmark = pytest.mark.cluster

PARAMS = dict(vector_size=16, min_count=2, seed=5, workers=1, sg=1, negative=3)
EPOCHS = 3


@pytest.fixture(scope="module")
def corpus(lee_corpus):
    return lee_corpus * 12  # about 230 k words an epoch: a second or two on two workers


@pytest.fixture(scope="module")
def cluster():
    """Two workers and a shard, for the tests that kill only clients: each leaves the cluster idle
    (its run finished, or refused before it began). A resume takes over the run's session of a
    dead client at once (``--allow-takeover``; without it the resume waits for the session to end:
    tests/test_takeover.py)."""
    with LocalCluster(n_workers=2, worker_timeout=3.0, dispatcher_args=["--allow-takeover"]) as cluster:
        yield cluster


def words(corpus, epochs=EPOCHS):
    return epochs * sum(len(s) for s in corpus)


def session_progress(probe):
    """The running session's progress, as plain data (None between sessions)."""
    try:
        session = probe.call("status").session
        return None if session is None else probe.send("progress", {"session": session.id})
    except (ValueError, transport.PyroError):
        return None


def wait_for_progress(cluster, share, committed, timeout=120.0):
    """Wait until the running session has trained ``share`` of the run's words and committed at
    least ``committed`` checkpoints; returns its progress then."""
    probe = find_dispatcher(cluster.ns_conf)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            progress = session_progress(probe)
            if progress and progress["checkpoints"]["committed"] >= committed and \
                    sum(e["raw_words"] for e in progress["epochs"].values()) >= share:
                return progress
            time.sleep(0.02)
    finally:
        transport.release(probe)
    raise AssertionError(f"timed out waiting for {share} words and {committed} checkpoints")


def trained_words(progress):
    return sum(e["raw_words"] for e in progress["epochs"].values())


RESUMED = re.compile(r"resumes run \S+ from checkpoint (\d+) in .* (\d+) raw words in all")


def resumed_from(dispatcher, start=0):
    """``(checkpoint, raw words it counts as trained)`` of the session the dispatcher's log says
    resumed the run."""
    match = dispatcher.wait_for(RESUMED.pattern, timeout=60, start=start)
    return int(match.group(1)), int(match.group(2))


def train_in_thread(model, **kwargs):
    result = {}

    def run():
        try:
            result["counts"] = model.train(epochs=EPOCHS, **kwargs)
        except BaseException as err:  # noqa: B902 - handed to the test thread
            result["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


@pytest.mark.parametrize("killed, mode", [("dispatcher", "iterable"), ("dispatcher", "corpus_file"),
                                          ("shard", "iterable")])
def test_a_server_killed_mid_run_is_restarted_and_every_word_is_trained_once(corpus, tmp_path, killed, mode):
    folder = str(tmp_path / "checkpoints")
    with LocalCluster(n_workers=2, n_shards=2, worker_timeout=3.0) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=folder, checkpoint_every=0.5,
                         **PARAMS)
        if mode == "corpus_file":
            path = tmp_path / "corpus.txt"
            path.write_text("".join(" ".join(s) + "\n" for s in corpus))
            model.build_vocab(corpus_file=str(path))
            kwargs = dict(corpus_file=str(path), total_words=model.corpus_total_words)
        else:
            model.build_vocab(corpus)
            kwargs = dict(corpus_iterable=corpus, total_examples=model.corpus_count)
        total = words(corpus)
        thread, result = train_in_thread(model, **kwargs)
        before = wait_for_progress(cluster, 0.4 * total, committed=1)
        marks = {name: len(p.lines) for name, p in cluster.processes.items()}
        if killed == "dispatcher":
            cluster.processes["dispatcher"].kill()
            cluster.start_dispatcher()
            dispatcher = cluster.processes["dispatcher"]
            start = 0
        else:
            shard = next(name for name in cluster.processes if name.startswith("shard-"))
            cluster.processes[shard].kill()
            dispatcher = cluster.processes["dispatcher"]
            dispatcher.wait_for(r"shard \S+ of session \S+ lost", timeout=30, start=marks["dispatcher"])
            cluster.add_shard()
            start = marks["dispatcher"]
        sequence, saved = resumed_from(dispatcher, start)
        thread.join(timeout=120)
        assert not thread.is_alive(), "train() hangs after a server was killed"
        assert "error" not in result, result.get("error")
        # the run returns what an uninterrupted one would: every word of every epoch counted once
        assert result["counts"][1] == total == model.cluster_stats["raw_words"]
        # it went on from the last checkpoint committed before the kill (or one committed after the
        # last look): at most one checkpoint interval is trained twice
        assert sequence >= before["checkpoints"]["committed"]
        assert 0.3 * total <= saved <= trained_words(before) + 0.2 * total
        # the words trained after the restart plus those in the checkpoint are the run's, exactly
        after = sum(w["words"] for w in model.cluster_stats["workers"].values())
        assert saved + after == total
        assert np.all(np.isfinite(model.wv.vectors)) and model.wv.most_similar(model.wv.index_to_key[50], topn=3)
        # its last checkpoint marks the run finished: a new run may use the folder
        meta = CheckpointStore(folder, "dispatcher").latest()[1]
        assert meta["finished"] and meta["point"]["epoch"] == EPOCHS


def test_a_shard_lost_before_the_first_checkpoint_trains_the_run_again_from_its_start(corpus, tmp_path, caplog):
    """No checkpoint to resume from yet (the first is at epoch 0's end): the call that began the run
    still holds the weights it was called with, so it trains the run again from its start rather than
    raising, and counts every word once."""
    folder = str(tmp_path / "checkpoints")
    with LocalCluster(n_workers=2, n_shards=2, worker_timeout=3.0) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=folder, checkpoint_every=1e6,
                         **PARAMS)
        model.build_vocab(corpus)
        total = words(corpus)
        thread, result = train_in_thread(model, corpus_iterable=corpus, total_examples=model.corpus_count)
        before = wait_for_progress(cluster, 0.1 * total, committed=0)  # a third of epoch 0
        dispatcher = cluster.processes["dispatcher"]
        mark = len(dispatcher.lines)
        cluster.processes[next(name for name in cluster.processes if name.startswith("shard-"))].kill()
        dispatcher.wait_for(r"shard \S+ of session \S+ lost", timeout=30, start=mark)
        cluster.add_shard()
        thread.join(timeout=120)
        assert not thread.is_alive(), "train() hangs after a shard was lost"
        assert "error" not in result, result.get("error")
        assert before["checkpoints"]["committed"] == 0 and "training again from the start" in caplog.text
        assert result["counts"][1] == total == model.cluster_stats["raw_words"]
        assert CheckpointStore(folder, "dispatcher").latest()[1]["finished"]


def test_a_run_whose_every_worker_was_dropped_resumes_once_they_rejoin(corpus, tmp_path, caplog):
    """The only worker frozen past its heartbeat (the dispatcher drops it) and let go: it finds itself unknown and
    says hello again. Then, as the race goes, either it quits the session, which fails as ``workers_dropped``, and
    a run with checkpoints resumes from its last one (before: ``train()`` raised "training failed on every
    worker"), or its session ends quietly and it joins the session again (before: it could remember that session
    as trained and never join, and the run waited for ever). Either way every word is trained once."""
    folder = str(tmp_path / "checkpoints")
    with LocalCluster(n_workers=1, worker_timeout=2.0) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=folder, checkpoint_every=0.5,
                         **PARAMS)
        model.build_vocab(corpus)
        total = words(corpus)
        thread, result = train_in_thread(model, corpus_iterable=corpus, total_examples=model.corpus_count)
        wait_for_progress(cluster, 0.4 * total, committed=1)
        dispatcher = cluster.processes["dispatcher"]
        mark = len(dispatcher.lines)
        worker = next(p for name, p in cluster.processes.items() if name.startswith("worker"))
        os.kill(worker.pid, signal.SIGSTOP)
        try:
            dispatcher.wait_for(r"worker \S+ lost", timeout=30, start=mark)
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        thread.join(timeout=120)
        assert not thread.is_alive(), "train() hangs after its worker was dropped"
        assert "error" not in result, result.get("error")
        log = "\n".join(dispatcher.lines[mark:])
        if "every worker of the session was dropped from the cluster" in caplog.text:
            assert RESUMED.search(log), log
        else:
            assert re.search(r"worker \S+ joined session \S+ as rank 1", log), log
        assert result["counts"][1] == total == model.cluster_stats["raw_words"]


CLIENT = """
import logging, sys
from gensim.models.word2vec import LineSentence
from gensim.test.utils import datapath
from gensim_distw2v import Word2Vec
logging.basicConfig(level=logging.INFO)
corpus = list(LineSentence(datapath("lee_background.cor"))) * 12
model = Word2Vec(distributed=True, ns_conf={ns_conf!r}, checkpoint_dir={folder!r}, checkpoint_every=0.3,
                 **{params!r})
model.build_vocab(corpus)
model.train(corpus, total_examples=model.corpus_count, epochs={epochs})
"""


def wait_until_idle(cluster, timeout=60.0):
    """Wait until the running session (its client dead) has merged every job it had, and a
    checkpoint holds them all: from then on it writes no more."""
    probe = find_dispatcher(cluster.ns_conf)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            progress = session_progress(probe)
            if progress and not progress["queued"] and not progress["in_flight"] and \
                    not progress["checkpoints"]["progress"] and not progress["checkpoints"]["unsaved"]:
                return progress
            time.sleep(0.02)
    finally:
        transport.release(probe)
    raise AssertionError(f"the session of the dead client was not idle within {timeout} s: {progress}")


def kill_a_client_mid_run(cluster, tmp_path, folder, corpus):
    """Start a client in a process of its own and kill -9 it once its run has two checkpoints and
    about 40 % of its words; returns the progress seen just before. Its session goes on with the
    jobs it had: this returns once it is idle, every one of them in a checkpoint."""
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(CLIENT.format(ns_conf=cluster.ns_conf, folder=folder, params=PARAMS,
                                                    epochs=EPOCHS)))
    client = subprocess.Popen([sys.executable, "-P", str(script)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=cluster._env())
    try:
        before = wait_for_progress(cluster, 0.4 * words(corpus), committed=2)
    finally:
        client.kill()
        client.wait()
    wait_until_idle(cluster)
    return before


@pytest.mark.parametrize("damage", ["dispatcher", "shard"])
def test_a_dead_clients_run_resumes_from_its_last_whole_checkpoint(cluster, corpus, tmp_path, damage):
    folder = str(tmp_path / "checkpoints")
    before = kill_a_client_mid_run(cluster, tmp_path, folder, corpus)
    newest = CheckpointStore(folder, "dispatcher").latest()[0]
    assert newest >= before["checkpoints"]["committed"] >= 2
    if damage == "dispatcher":  # the newest record cut short: the one before is used
        record = os.path.join(CheckpointStore(folder, "dispatcher").path(newest), "meta.json")
        with open(record, "r+b") as fout:
            fout.truncate(os.path.getsize(record) // 2)
    else:  # a byte of the newest checkpoint's rows altered on disk
        rows = os.path.join(CheckpointStore(folder, "shard-0-of-1", keep=None).path(newest), "syn0.npy")
        with open(rows, "r+b") as fout:
            fout.seek(-5, os.SEEK_END)
            byte = fout.read(1)
            fout.seek(-5, os.SEEK_END)
            fout.write(bytes([byte[0] ^ 0xFF]))
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    model.build_vocab(corpus)
    dispatcher = cluster.processes["dispatcher"]
    mark = len(dispatcher.lines)
    # the dead client's session is still open: the resume takes it over
    counts = model.train(corpus, total_examples=model.corpus_count, epochs=EPOCHS, resume_from=folder)
    assert counts[1] == words(corpus) == model.cluster_stats["raw_words"]
    resumed = [(int(m.group(1)), int(m.group(2))) for m in map(RESUMED.search, dispatcher.lines[mark:]) if m]
    sequences = [sequence for sequence, _words in resumed]
    if damage == "dispatcher":
        dispatcher.wait_for(rf"skipping checkpoint {newest} of dispatcher: .*meta\.json has \d+ bytes, its "
                            rf"manifest says \d+ \(cut short or altered\)", timeout=5, start=mark)
        assert sequences == [newest - 1]
    else:
        assert sequences == [newest, newest - 1]  # the shard refused it; the client went back one
    saved = resumed[-1][1]
    assert saved + sum(w["words"] for w in model.cluster_stats["workers"].values()) == words(corpus)
    dispatcher.wait_for(r"session \S+ replaced: a client resumes its run from \S+ \(--allow-takeover\)", timeout=5,
                        start=mark)


def test_a_resume_with_another_corpus_or_vocabulary_is_refused(cluster, corpus, tmp_path):
    folder = str(tmp_path / "checkpoints")
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    model.build_vocab(corpus)
    with pytest.raises(ValueError, match=r"resume: no usable checkpoint in .*empty"):
        model.train(corpus, total_examples=model.corpus_count, epochs=EPOCHS,
                    resume_from=str(tmp_path / "empty"))
    kill_a_client_mid_run(cluster, tmp_path, folder, corpus)
    # a new run into the folder of an unfinished one
    fresh = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=folder, **PARAMS)
    fresh.build_vocab(corpus)
    with pytest.raises(ValueError, match=r"holds checkpoint \d+ of an unfinished run: to go on with it, pass "
                                         r"resume_from="):
        fresh.train(corpus, total_examples=fresh.corpus_count, epochs=EPOCHS)
    # another vocabulary (and so another model)
    other = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **dict(PARAMS, min_count=40))
    other.build_vocab(corpus)
    with pytest.raises(ValueError, match=r"is of another run: params \(checkpoint: .*; vocab_size \(checkpoint: "
                                         r"\d+, this call: \d+\); vocabulary"):
        other.train(corpus, total_examples=other.corpus_count, epochs=EPOCHS, resume_from=folder)
    # other hyper-parameters
    with pytest.raises(ValueError, match=r"is of another run: epochs \(checkpoint: 3, this call: 4\)"):
        model.train(corpus, total_examples=model.corpus_count, epochs=4, resume_from=folder)
    # the same vocabulary, other sentences: found when the jobs the checkpoint trained are skipped
    with pytest.raises(ValueError, match=r"this corpus is not the one checkpoint \d+ was trained on"):
        model.train(corpus[::-1], total_examples=model.corpus_count, epochs=EPOCHS, resume_from=folder)
    # nothing was lost: the run resumes with its own corpus
    counts = model.train(corpus, total_examples=model.corpus_count, epochs=EPOCHS, resume_from=folder)
    assert counts[1] == words(corpus)
    # a finished run resumed (its client died before it had the weights) trains nothing and hands them back
    trained = model.wv.vectors.copy()
    again = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    again.build_vocab(corpus)
    assert again.train(corpus, total_examples=again.corpus_count, epochs=EPOCHS, resume_from=folder) == counts
    assert np.array_equal(again.wv.vectors, trained)
    assert sum(w["words"] for w in again.cluster_stats["workers"].values()) == 0


def test_a_checkpoint_that_cannot_be_written_is_reported_and_training_goes_on(cluster, lee_corpus, tmp_path,
                                                                              caplog):
    import logging

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "shard-0-of-1").write_text("a file where the shard's folder goes")
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=str(folder), **PARAMS)
    model.build_vocab(lee_corpus)
    mark = len(cluster.processes["dispatcher"].lines)
    with caplog.at_level(logging.ERROR, logger="gensim_distw2v.client"):
        counts = model.train(lee_corpus, total_examples=model.corpus_count, epochs=2)
    assert counts[1] == words(lee_corpus, 2)
    errors = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(errors) == 2 and "shard 0 could not write checkpoint" in errors[0], errors
    cluster.processes["dispatcher"].wait_for(r"ERROR : checkpoint 1 of session \S+ failed: shard 0 could not "
                                             r"write checkpoint 1: CheckpointError: checkpoint folder \S+shard-0-of-1 is "
                                             r"not a folder of this user's", timeout=5, start=mark)
    assert model.cluster_stats["checkpoints"]["count"] == 0
    assert CheckpointStore(folder, "dispatcher").latest() is None
