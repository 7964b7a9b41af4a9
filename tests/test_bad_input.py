"""Bad input from users and peers: each refused with a message that names the problem, servers keep serving."""
import logging
import sys

import numpy as np
import pytest

import gensim_distw2v
from gensim_distw2v import LocalCluster, Word2Vec
from gensim_distw2v.io import endpoints, transport
from gensim_distw2v.protocol.constants import SHARD_PREFIX
from gensim_distw2v.protocol.errors import ClusterError
from gensim_distw2v.client.cluster import ManagedProcess
from gensim_distw2v.protocol import errors

pytestmark = pytest.mark.cluster

PARAMS = dict(vector_size=8, min_count=2, seed=3, workers=1, epochs=1)


@pytest.fixture(scope="module")
def cluster():
    """One worker, keyed with a key given as a str (test_wrong_hmac_key_is_refused tries others)."""
    with LocalCluster(n_workers=1, hmac_key="the cluster's key") as cluster:
        yield cluster


def still_serves(cluster, corpus):
    model = Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    assert model.cluster_stats["raw_words"] == sum(len(s) for s in corpus)


def test_user_mistakes_get_gensims_errors_or_a_warning(cluster, lee_corpus, caplog, tmp_path):
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    with pytest.raises(RuntimeError, match="you must first build vocabulary"):
        model.train(lee_corpus, total_examples=len(lee_corpus), epochs=1)
    with pytest.raises(RuntimeError, match="you must first build vocabulary"):
        model.build_vocab([])
        model.train(lee_corpus, total_examples=len(lee_corpus), epochs=1)
    model = Word2Vec(distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    model.build_vocab(lee_corpus)
    with caplog.at_level(logging.WARNING):  # as gensim: a warning (first training only), and (0, 0)
        assert model.train([], total_examples=1, epochs=1) == (0, 0)
        assert "train() called with an empty iterator" in caplog.text
        caplog.clear()
        assert model.train([["qqzx", "zzqy"]] * 5, total_examples=5, epochs=1) == (0, 10)
        assert "no word of the corpus is in the vocabulary" in caplog.text
    missing = tmp_path / "no-such-file.txt"
    with pytest.raises(TypeError, match="corpus_file must be a valid path"):
        model.train(corpus_file=str(missing), total_words=10, epochs=1)
    still_serves(cluster, lee_corpus)


def test_different_versions_are_refused_naming_both(cluster, lee_corpus, monkeypatch):
    # a worker of another release: the dispatcher refuses it and keeps serving the others
    script = ("import gensim_distw2v, gensim_distw2v.versions, sys; "
              "gensim_distw2v.__version__ = gensim_distw2v.versions.__version__ = '0.0.1+other'; "
              "from gensim_distw2v.worker.daemon import main; sys.exit(main(sys.argv[1:]))")
    stranger = ManagedProcess("stranger", [sys.executable, "-P", "-c", script, "--ns-port",
                                           str(cluster.ns_conf["port"]), "--threads", "1"], env=cluster._env())
    try:
        line = stranger.wait_for(r"ERROR .*the dispatcher refused this worker: version mismatch: (.*)")
        assert "gensim_distw2v 0.0.1+other" in line.group(1)
        assert f"gensim_distw2v {gensim_distw2v.__version__}" in line.group(1)
        still_serves(cluster, lee_corpus)
    finally:
        stranger.stop()
    # a client of another release: refused at session start, naming both
    monkeypatch.setattr(gensim_distw2v.versions, "__version__", "0.0.2+other")  # the one definition
    with pytest.raises(ValueError, match=r"version mismatch: the client runs gensim \S+ / gensim_distw2v "
                                         r"0\.0\.2\+other, the dispatcher runs .*install the same versions"):
        Word2Vec(lee_corpus, distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    monkeypatch.undo()
    still_serves(cluster, lee_corpus)


def test_wrong_hmac_key_is_refused(cluster, lee_corpus):
    assert cluster.ns_conf["hmac_key"] == b"the cluster's key"
    for key, why in (("another key", "its HMAC key is not the cluster's"), (None, "it gave no HMAC key")):
        conf = {**cluster.ns_conf, "hmac_key": key} if key else {"port": cluster.ns_conf["port"]}
        with pytest.raises(ClusterError, match=f"name server at .* refuses this client: {why}; pass "
                                                         r"the cluster's key, as ns_conf\['hmac_key'\]") as refused:
            Word2Vec(lee_corpus, distributed=True, ns_conf=conf, **PARAMS)
        assert refused.value.code == errors.Code.FORBIDDEN  # told by the error's type, not its text
    still_serves(cluster, lee_corpus)


def test_messages_of_an_old_session_are_refused(cluster, lee_corpus):
    from gensim_distw2v.client.training import find_dispatcher
    from gensim_distw2v.core.jobs import Job
    from gensim_distw2v import protocol
    from gensim_distw2v.protocol import errors, tables

    model = Word2Vec(lee_corpus, distributed=True, ns_conf=cluster.ns_conf, **PARAMS)
    proxy = find_dispatcher(cluster.ns_conf)
    old = "0" * 32  # no such session (any finished one looks the same to the dispatcher)
    job = protocol.Job.of(0, 0, Job(indices=np.array([1, 2], dtype=np.uint32), offsets=np.array([0, 2], dtype=np.int64),
                                alpha=0.025, raw_words=2, examples=1)).to_wire()
    for op, fields in (("put_jobs", dict(session=old, jobs=[job])), ("progress", dict(session=old)),
                       ("end_epoch", dict(session=old, epoch=0)), ("download", dict(session=old, name="syn0", lo=0, hi=1))):
        with pytest.raises(ValueError, match="session"):
            proxy.call(op, **fields)
    (uri,) = transport.list_names(cluster.ns_conf, SHARD_PREFIX).values()
    shard = endpoints.link(uri, tables.SHARD, cluster.ns_conf["hmac_key"], timeout=10)
    part = protocol.MergePart(session=old, rank=0, lo=0, hi=1, matrices={}, hold_back=0.0, hot_rows=-1, exact=False,
                              token="token")
    for op, request in (("download", protocol.ShardDownload(session=old, name="syn0", lo=0, hi=1)),
                        ("upload", protocol.Upload(session=old, name="syn0", lo=0, token="token",
                                                   array=protocol.pack_array(np.zeros((1, 4), np.float32)))),
                        ("start", protocol.SessionRef(session=old)), ("merge", part)):
        with pytest.raises(errors.SessionClosed, match=f"holds no session '{old}'"):
            shard.call(op, request)
    for rank, problem in ((["not", "a", "rank"], "field 'rank' must be int"),
                          (-1, "rank must be the downloading worker's rank")):
        with pytest.raises(errors.BadRequest, match=problem):
            shard.send("download", {"session": old, "name": "syn0", "lo": 0, "hi": 1, "rank": rank})
    shard.release()
    transport.release(proxy)
    still_serves(cluster, lee_corpus)
    assert model.cluster_stats["raw_words"] > 0
