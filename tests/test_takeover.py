"""Issue 38, items 1 and 2, with real processes: a member holding the cluster's key (threat model c)
cannot take over a live client's run through a resume, open the session on a shard, or restore
rows from another folder; a dead client's resume waits for its session to end (no
``--allow-takeover``); a crafted checkpoint folder (``meta.json`` a symlink to ``/dev/zero``, or a
FIFO) is refused within seconds while the dispatcher goes on serving.
"""
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from gensim_distw2v import LocalCluster, Word2Vec, protocol
from gensim_distw2v.client.training import find_dispatcher
from gensim_distw2v.io import endpoints, transport
from gensim_distw2v.io.store import CheckpointStore, manifest_mac
from gensim_distw2v.protocol import errors, tables
from gensim_distw2v.versions import versions

from .test_resume import CLIENT, EPOCHS, PARAMS, kill_a_client_mid_run, wait_for_progress, words

pytestmark = pytest.mark.cluster

CLIENT_TIMEOUT = 6.0


@pytest.fixture(scope="module")
def corpus(lee_corpus):
    return lee_corpus * 12


@pytest.fixture(scope="module")
def cluster():
    """One worker and a shard, no ``--allow-takeover``, clients aborted after 6 s of silence."""
    with LocalCluster(n_workers=1, worker_timeout=3.0, client_timeout=CLIENT_TIMEOUT) as cluster:
        yield cluster


def _mallory(cluster):
    """A member holding the key: a link to the dispatcher, registered as a worker (its secret)."""
    link = find_dispatcher(cluster.ns_conf)
    name = protocol.WORKER_PREFIX + "mallory"
    secret = link.call("hello", name=name, uri="PYRO:mallory@127.0.0.1:1", versions=versions(), threads=1)
    return link, name, secret


def test_a_member_with_the_key_cannot_take_over_a_live_clients_run(cluster, corpus, tmp_path):
    folder = str(tmp_path / "run")
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=folder, checkpoint_every=0.3, **PARAMS)
    model.build_vocab(corpus)
    result = {}

    def train():  # 12 epochs: long enough for every attack below
        result["counts"] = model.train(corpus, total_examples=model.corpus_count, epochs=12)

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    wait_for_progress(cluster, 0.1 * words(corpus), committed=1)
    link, name, secret = _mallory(cluster)
    try:
        sid = link.call("status").session.id
        joined = link.call("join", name=name, secret=secret, session=sid)  # what every worker is told
        link.call("quit_session", name=name, secret=secret, session=sid, reason="mallory leaves")
        config = joined.config
        assert config.checkpoint.dir == folder
        config.checkpoint.resume = True
        with pytest.raises(errors.Busy, match=r"busy with session \S+ of this run \(its client was last heard \d+ s "
                                              r"ago\): it ends 6 s after its client's last call"):
            link.call("open_session", config)
        for op in ("checkpoint", "progress", "close"):
            with pytest.raises(errors.Forbidden, match="not this session's owner secret"):
                link.call(op, session=sid, token=joined.token)  # the workers' token is not the owner's
        shard = endpoints.link(joined.shards[0][1], tables.SHARD, cluster.hmac_key)
        try:
            other = str(tmp_path / "elsewhere")
            CheckpointStore(other, "dispatcher")
            spec = protocol.ShardSpec(
                session=sid, index=0, count=1, vocab_size=config.params.vocab_size,
                vector_size=config.params.vector_size, weights=["syn0", "syn1neg"], merge=config.settings.merge,
                merge_dtype=config.settings.merge_dtype, damp_rows=config.damp_rows, hot_rows=config.hot_rows,
                versions=versions(), token=joined.token, owner=joined.token)
            with pytest.raises(errors.Forbidden, match="open_session: not this session's owner secret"):
                shard.call("open_session", spec)
            spec.restore = protocol.RestoreSpec(dir=other, sequence=1, count=1, run="x")
            with pytest.raises(errors.Forbidden):
                shard.call("open_session", spec)
            with pytest.raises(errors.Forbidden):
                shard.call("close", session=sid, token=joined.token)
        finally:
            shard.release()
    finally:
        transport.release(link)
    thread.join(180)
    assert result["counts"][1] == words(corpus, 12) == model.cluster_stats["raw_words"]  # the real run, whole
    # the checkpoints it left, written by processes of umask 022 (the usual), are the user's alone
    with open(f"/proc/{cluster.processes['dispatcher'].proc.pid}/status") as fin:
        assert "Umask:\t0022" in fin.read()
    found = [os.path.join(root, name) for root, dirs, files in os.walk(folder) for name in dirs + files]
    assert len(found) >= 10 and [p for p in found + [folder] if os.lstat(p).st_mode & 0o077] == []


def test_a_dead_clients_resume_waits_for_its_session_to_end(cluster, corpus, tmp_path):
    folder = str(tmp_path / "checkpoints")
    kill_a_client_mid_run(cluster, tmp_path, folder, corpus)
    dispatcher = cluster.processes["dispatcher"]
    mark = len(dispatcher.lines)
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    model.build_vocab(corpus)
    began = time.monotonic()
    counts = model.train(corpus, total_examples=model.corpus_count, epochs=EPOCHS, resume_from=folder)
    assert counts[1] == words(corpus)
    dispatcher.wait_for(r"session \S+ aborted: no word from its client", timeout=5, start=mark)
    assert not any("replaced: a client resumes" in line for line in dispatcher.lines[mark:])
    assert time.monotonic() - began < CLIENT_TIMEOUT + 30


def test_a_resume_while_its_runs_session_lives_is_told_busy_not_that_there_is_no_checkpoint(cluster, corpus,
                                                                                           tmp_path, caplog):
    """Issue 54 (the fresh-start race): a client killed before its run's first checkpoint leaves its session
    live, and the session may still write that checkpoint. A resume of the run meanwhile is told Busy (and
    waits), not NoCheckpoint: that sent its user to a fresh start, which the session's checkpoint, written a
    moment later, then refused. Once the session has ended the resume goes on from the checkpoint it left, or,
    the folder empty, says there is none."""
    folder = str(tmp_path / "run")
    script = tmp_path / "client.py"
    script.write_text(CLIENT.format(ns_conf=cluster.ns_conf, folder=folder, params=PARAMS, epochs=EPOCHS).replace(
        "checkpoint_every=0.3", "checkpoint_every=3600"))
    client = subprocess.Popen([sys.executable, "-P", str(script)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=cluster._env())
    try:
        wait_for_progress(cluster, 0.05 * words(corpus), committed=0)
    finally:
        client.kill()
        client.wait()
    link, name, secret = _mallory(cluster)
    try:
        sid = link.call("status").session.id
        joined = link.call("join", name=name, secret=secret, session=sid)
        link.call("quit_session", name=name, secret=secret, session=sid, reason="mallory leaves")
        config = joined.config
        config.checkpoint.resume = True
        with pytest.raises(errors.Busy, match=r"busy with session \S+ of this run"):
            link.call("open_session", config)
    finally:
        transport.release(link)
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    model.build_vocab(corpus)
    dispatcher = cluster.processes["dispatcher"]
    mark = len(dispatcher.lines)
    try:  # the session, its client gone, may finish its first epoch and write its checkpoint meanwhile
        counts = model.train(corpus, total_examples=model.corpus_count, epochs=EPOCHS, resume_from=folder)
    except errors.NoCheckpoint as err:
        assert "resume: no usable checkpoint in" in str(err)
        assert CheckpointStore(folder, "dispatcher").sequences() == [], "a checkpoint was there to resume from"
    else:
        assert counts[1] == words(corpus)
    dispatcher.wait_for(r"session \S+ aborted: no word from its client", timeout=5, start=mark)
    assert any("resume: the dispatcher is busy with session" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("craft", ["dev-zero", "fifo"])
def test_a_crafted_checkpoint_folder_is_refused_in_seconds_and_the_dispatcher_serves(cluster, corpus, tmp_path,
                                                                                      craft):
    """The three checks from outside (issue 38): ``meta.json`` a symlink to ``/dev/zero`` with its
    manifest edited to say 0 bytes, or a FIFO: a clear error within seconds, never a hang."""
    folder = str(tmp_path / "crafted")
    store = CheckpointStore(folder, "dispatcher", key=cluster.hmac_key)  # signed: the files' checks are reached
    store.write({"run": "r", "identity": {}, "shards": 1, "finished": False, "point": {}}, {}, sequence=1)
    meta = os.path.join(store.path(1), "meta.json")
    os.remove(meta)
    if craft == "dev-zero":
        os.symlink("/dev/zero", meta)
    else:
        os.mkfifo(meta)
    manifest = os.path.join(store.path(1), "MANIFEST.json")
    with open(manifest) as fin:
        data = json.load(fin)
    data["files"]["meta.json"]["size"] = 0
    data["mac"] = manifest_mac(cluster.hmac_key, data)  # (one holding the key; without it: refused at once)
    with open(manifest, "w") as fout:
        json.dump(data, fout)
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    model.build_vocab(corpus[:200])
    probe = find_dispatcher(cluster.ns_conf)
    try:
        began = time.monotonic()
        with pytest.raises(ValueError, match=r"resume: no usable checkpoint in .*crafted"):
            model.train(corpus[:200], total_examples=200, epochs=1, resume_from=folder)
        assert time.monotonic() - began < 10.0
        assert probe.call("status").workers  # still serving
        cluster.processes["dispatcher"].wait_for(r"skipping checkpoint 1 of dispatcher: .*meta\.json is not a "
                                                 r"regular file", timeout=5)
        # a fresh run in that folder looks for an unfinished one there: refused as fast, no hang
        fresh = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, checkpoint_dir=folder, **PARAMS)
        fresh.build_vocab(corpus[:200])
        fresh.train(corpus[:200], total_examples=200, epochs=1)
        assert time.monotonic() - began < 30.0
    finally:
        transport.release(probe)
