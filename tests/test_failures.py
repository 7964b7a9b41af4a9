"""Failures through real clusters: workers killed or frozen mid-training, every worker lost, a dead dispatcher.

Each test waits on the cluster's own state (the dispatcher's ``status()`` and its log lines) before it
breaks something, so the failure lands mid-epoch with jobs in flight, never on a timer.
"""
import _thread
import os
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
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.client.training import find_dispatcher

pytestmark = pytest.mark.cluster

PARAMS = dict(vector_size=16, min_count=2, seed=5, workers=1, sg=1, negative=3)
TIMEOUT = 3.0  # the dispatcher drops a worker silent for this long


@pytest.fixture(scope="module")
def corpus(lee_corpus):
    return lee_corpus * 12  # about 230 k words an epoch: a few seconds on two workers


def wait_until(what, predicate, timeout=60.0):
    """Poll ``predicate`` (cheap: a call to the dispatcher) until it returns something true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def busy_worker(dispatcher, rank):
    """The name of the session's worker of ``rank`` once it has merged words and holds jobs, else None."""
    for name, info in dispatcher.call("status").workers.items():
        if info.rank == rank and info.words > 0 and info.in_flight > 0:
            return name
    return None


def train_in_thread(model, corpus, epochs):
    result = {}

    def run():
        try:
            result["counts"] = model.train(corpus, total_examples=model.corpus_count, epochs=epochs)
        except BaseException as err:  # noqa: B902 - handed to the test thread
            result["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def expected_words(corpus, epochs):
    return epochs * sum(len(s) for s in corpus)


@pytest.mark.parametrize("how", ["kill", "freeze"])
def test_lost_worker_jobs_are_retrained(corpus, how, freeze_busy_worker):
    """kill -9 (or SIGSTOP: it stops answering) one of three workers mid-epoch: the others train its jobs."""
    epochs = 2
    with LocalCluster(n_workers=3, worker_timeout=TIMEOUT) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
        model.build_vocab(corpus)
        dispatcher_log = cluster.processes["dispatcher"]
        probe = find_dispatcher(cluster.ns_conf)
        thread, result = train_in_thread(model, corpus, epochs)
        victim, proc = wait_until("rank 1 to hold jobs", lambda: freeze_busy_worker(cluster, probe, 1))
        started = time.monotonic()
        if how == "kill":  # frozen since it was seen holding jobs
            os.kill(proc.pid, signal.SIGKILL)
        try:
            # a dead process's connection closes at once; a frozen one is found by its missing heartbeats
            reason = "its heartbeat connection closed" if how == "kill" else r"no heartbeat for [\d.]+ s"
            line = dispatcher_log.wait_for(rf"WARNING .*worker {victim} lost \({reason}\); (\d+) unmerged jobs go "
                                           rf"back to the queue; 2 workers left", timeout=TIMEOUT + 10)
            assert time.monotonic() - started < (2.0 if how == "kill" else TIMEOUT + 5)
            thread.join(timeout=120)
            assert not thread.is_alive(), "train() hangs after losing a worker"
            assert "error" not in result, result.get("error")
        finally:
            if how == "freeze":
                proc.kill()
        assert int(line.group(1)) >= 1  # it held jobs: they went back to the queue
        # every word trained once: the lost worker's unmerged jobs were retrained by the others
        assert result["counts"][1] == expected_words(corpus, epochs)
        assert model.cluster_stats["raw_words"] == expected_words(corpus, epochs)
        assert victim not in model.cluster_stats["workers"] and len(model.cluster_stats["workers"]) == 2
        assert np.isfinite(model.wv.vectors).all()
        similar = [w for w, _ in model.wv.most_similar("government", topn=20)]
        assert similar  # a usable model
        transport.release(probe)


def test_a_worker_killed_under_bsp_ends_the_turns_and_the_others_train_on(corpus, freeze_busy_worker):
    """sync="bsp" takes rounds in turn; kill -9 one of three workers while it holds jobs: the others
    would wait for its turn for ever, so the dispatcher ends the order, deals its jobs out again,
    and training completes with every word once (as ssp: the run is no longer reproducible)."""
    epochs = 2
    with LocalCluster(n_workers=3, worker_timeout=TIMEOUT) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, sync="bsp", **PARAMS)
        model.build_vocab(corpus)
        dispatcher_log = cluster.processes["dispatcher"]
        probe = find_dispatcher(cluster.ns_conf)
        thread, result = train_in_thread(model, corpus, epochs)
        victim, proc = wait_until("rank 1 to hold jobs", lambda: freeze_busy_worker(cluster, probe, 1))
        os.kill(proc.pid, signal.SIGKILL)
        dispatcher_log.wait_for(rf"WARNING .*sync='bsp' without worker {victim}: its rounds are no longer taken in "
                                r"turn", timeout=TIMEOUT + 10)
        thread.join(timeout=120)
        assert not thread.is_alive(), "train() hangs after losing a worker under bsp"
        assert "error" not in result, result.get("error")
        assert result["counts"][1] == expected_words(corpus, epochs)
        assert victim not in model.cluster_stats["workers"] and np.isfinite(model.wv.vectors).all()
        transport.release(probe)


def test_losing_every_worker_raises_within_the_timeout(corpus):
    with LocalCluster(n_workers=1, worker_timeout=TIMEOUT) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, cluster_timeout=2.0, **PARAMS)
        model.build_vocab(corpus)
        before = model.wv.vectors.copy()
        probe = find_dispatcher(cluster.ns_conf)
        thread, result = train_in_thread(model, corpus, 3)
        victim = wait_until("rank 0 to train", lambda: busy_worker(probe, 0))
        cluster.process_of(victim).kill()
        started = time.monotonic()
        thread.join(timeout=TIMEOUT + 2.0 + 20)
        assert not thread.is_alive(), "train() hangs with no worker left"
        assert time.monotonic() - started < TIMEOUT + 2.0 + 10
        assert isinstance(result.get("error"), RuntimeError)
        assert "all workers lost" in str(result["error"]) and "python -m gensim_distw2v.worker" in str(result["error"])
        assert (model.wv.vectors == before).all()  # a failed train() leaves the weights alone
        # a new worker serves the next train()
        cluster.add_worker()
        model.train(corpus[:200], total_examples=200, epochs=1)
        assert model.cluster_stats["raw_words"] == expected_words(corpus[:200], 1)
        transport.release(probe)


def test_dead_dispatcher_gives_a_clear_error_and_a_new_one_serves(corpus):
    with LocalCluster(n_workers=2, worker_timeout=TIMEOUT) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
        model.build_vocab(corpus)
        probe = find_dispatcher(cluster.ns_conf)
        thread, result = train_in_thread(model, corpus, 3)
        wait_until("rank 1 to train", lambda: busy_worker(probe, 1))
        transport.release(probe)
        cluster.processes["dispatcher"].kill()
        thread.join(timeout=30)
        assert not thread.is_alive(), "train() hangs after the dispatcher died"
        error = result.get("error")
        assert isinstance(error, ClusterError), error
        assert "lost the dispatcher" in str(error) and "python -m gensim_distw2v.dispatcher" in str(error)
        # a restarted dispatcher finds the workers again, and the next train() works
        marks = {name: len(p.lines) for name, p in cluster.processes.items()}
        cluster.start_dispatcher()
        for name in cluster.workers():
            cluster.processes[name].wait_for("found the dispatcher", timeout=30, start=marks[name])
        cluster.processes["dispatcher"].wait_for(r"\(2 workers\)", timeout=30)
        counts = model.train(corpus, total_examples=model.corpus_count, epochs=1)
        assert counts[1] == expected_words(corpus, 1)
        assert len(model.cluster_stats["workers"]) == 2


def test_ctrl_c_in_the_client_ends_the_session_and_the_next_train_works(corpus):
    with LocalCluster(n_workers=2, worker_timeout=TIMEOUT) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
        model.build_vocab(corpus)
        probe = find_dispatcher(cluster.ns_conf)

        def interrupt():  # Ctrl-C, once both workers train
            wait_until("rank 1 to train", lambda: busy_worker(probe, 1))
            _thread.interrupt_main()

        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            model.train(corpus, total_examples=model.corpus_count, epochs=3)
        cluster.processes["dispatcher"].wait_for(r"session \S+ closed \(running\)", timeout=10)
        assert probe.call("status").session is None
        counts = model.train(corpus[:300], total_examples=300, epochs=1)
        assert counts[1] == expected_words(corpus[:300], 1)
        transport.release(probe)


def test_a_dead_clients_session_times_out_and_the_next_client_trains(corpus, tmp_path):
    """kill -9 of a client mid-training: the dispatcher aborts its session after client_timeout."""
    with LocalCluster(n_workers=2, worker_timeout=TIMEOUT, client_timeout=3.0) as cluster:
        script = tmp_path / "client.py"
        script.write_text(textwrap.dedent(f"""
            from gensim.models.word2vec import LineSentence
            from gensim.test.utils import datapath
            from gensim_distw2v import Word2Vec
            corpus = list(LineSentence(datapath("lee_background.cor"))) * 30
            Word2Vec(corpus, distributed=True, ns_conf={cluster.ns_conf!r}, epochs=5,
                     vector_size=16, min_count=2, sg=1, workers=1)
        """))
        client = subprocess.Popen([sys.executable, "-P", str(script)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=cluster._env())
        try:
            probe = find_dispatcher(cluster.ns_conf)
            wait_until("the client's workers to train", lambda: busy_worker(probe, 1))
            client.kill()
            client.wait()
            killed = time.monotonic()
            cluster.processes["dispatcher"].wait_for(r"WARNING .*session \S+ aborted: no word from its client",
                                                     timeout=20)
            assert time.monotonic() - killed < 3.0 + 5
            model = Word2Vec(corpus[:300], distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
            assert model.cluster_stats["raw_words"] == expected_words(corpus[:300], PARAMS.get("epochs", 5))
            transport.release(probe)
        finally:
            client.kill()


def test_a_dispatcher_frozen_past_every_timeout_counts_no_one_silent_for_its_own_pause(corpus):
    """The dispatcher stopped (SIGSTOP) for longer than the worker and client timeouts, then let go: the silence
    of its members and of the client in that time was its own, so it drops no one and aborts nothing, and the run
    finishes (before: it dropped every worker and shard at once, and ``train()`` raised ShardLostError)."""
    with LocalCluster(n_workers=2, worker_timeout=2.0, client_timeout=3.0) as cluster:
        model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
        model.build_vocab(corpus)
        result = {}

        def train():
            try:
                result["counts"] = model.train(corpus, total_examples=model.corpus_count, epochs=3)
            except Exception as err:  # noqa: BLE001 - the test reads it
                result["error"] = err
        thread = threading.Thread(target=train, daemon=True)
        thread.start()
        dispatcher = cluster.processes["dispatcher"]
        dispatcher.wait_for(r"worker \S+ joined session", timeout=60)
        mark = len(dispatcher.lines)
        os.kill(dispatcher.pid, signal.SIGSTOP)
        time.sleep(5.0)
        os.kill(dispatcher.pid, signal.SIGCONT)
        thread.join(timeout=120)
        assert not thread.is_alive() and "error" not in result, result.get("error")
        dispatcher.wait_for(r"the dispatcher did not run for [4-9]\.\d s", timeout=5, start=mark)
        log = "\n".join(dispatcher.lines[mark:])
        assert "no heartbeat" not in log and "aborted" not in log, log
        assert result["counts"][1] == 3 * sum(len(s) for s in corpus) == model.cluster_stats["raw_words"]
