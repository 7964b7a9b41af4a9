"""Security defaults with real processes: loopback unless keyed, and Pyro4's TLS switched on by environment."""
import os
import subprocess
import sys
import textwrap

import pytest

from gensim_distw2v.io import serving
from gensim_distw2v.io.keys import HMAC_ENV, read_hmac_key
from gensim_distw2v.client.cluster import ManagedProcess


@pytest.mark.parametrize("module", ["gensim_distw2v.dispatcher", "gensim_distw2v.worker", "gensim_distw2v.shard"])
@pytest.mark.cluster
def test_binding_beyond_loopback_needs_an_hmac_key(module, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in (HMAC_ENV, "PYRO_HMAC_KEY")}
    done = subprocess.run([sys.executable, "-P", "-m", module, "--host", "0.0.0.0", "--ns-port", "1"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode != 0
    assert "0.0.0.0" in done.stderr and "HMAC key" in done.stderr and "--hmac-key-file" in done.stderr
    # with a key it gets past that check (and then waits for a name server that is not there)
    key = tmp_path / "key"
    key.write_text("a long random secret\n")
    proc = ManagedProcess("keyed", [sys.executable, "-P", "-m", module, "--host", "0.0.0.0", "--ns-port",
                                    str(serving.free_port()), "--hmac-key-file", str(key)], env=env)
    try:
        proc.wait_for(r"name server|waiting", timeout=60)
        assert proc.alive()
    finally:
        proc.stop()


@pytest.mark.system
def test_tls_through_pyro4s_environment(tmp_path):
    """The README's TLS recipe: certificates in PYRO_SSL_* variables on every process, nothing else."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=120)
    tls = {"PYRO_SSL": "1", "PYRO_SSL_SERVERCERT": str(cert), "PYRO_SSL_SERVERKEY": str(key),
           "PYRO_SSL_REQUIRECLIENTCERT": "1", "PYRO_SSL_CLIENTCERT": str(cert), "PYRO_SSL_CLIENTKEY": str(key),
           "PYRO_SSL_CACERTS": str(cert)}
    script = textwrap.dedent("""
        import os, subprocess, sys
        from gensim.models.word2vec import LineSentence
        from gensim.test.utils import datapath
        from gensim_distw2v import LocalCluster, Word2Vec
        corpus = list(LineSentence(datapath("lee_background.cor")))
        with LocalCluster(n_workers=1) as cluster:
            model = Word2Vec(corpus, distributed=True, ns_conf=cluster.ns_conf, vector_size=8, min_count=2, epochs=1)
            print("trained", model.cluster_stats["raw_words"], flush=True)
            # a process without the certificates cannot talk to this cluster
            plain = {k: v for k, v in os.environ.items() if not k.startswith("PYRO_SSL")}
            probe = ("import sys; from gensim_distw2v import Word2Vec; "
                     "Word2Vec([['a', 'b']], min_count=1, distributed=True, ns_conf={'port': int(sys.argv[1])})")
            done = subprocess.run([sys.executable, "-P", "-c", probe, str(cluster.ns_conf["port"])], env=plain,
                                  capture_output=True, text=True, timeout=120)
            print("plain client:", done.returncode, done.stderr.strip().splitlines()[-1], flush=True)
    """)
    done = subprocess.run([sys.executable, "-P", "-c", script], env={**os.environ, **tls}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained 59890" in done.stdout
    assert "plain client: 1" in done.stdout and "ClusterError: no Pyro4 name server answers" in done.stdout


@pytest.mark.unit
def test_a_key_file_other_users_can_read_is_warned_about(tmp_path, caplog):
    key = tmp_path / "key"
    key.write_text("a long random secret\n")
    for mode, warned in ((0o644, True), (0o640, True), (0o600, False), (0o400, False)):
        key.chmod(mode)
        caplog.clear()
        with caplog.at_level("WARNING", logger="gensim_distw2v.io.keys"):
            assert read_hmac_key(str(key)) == b"a long random secret"
        said = " ".join(r.getMessage() for r in caplog.records)
        assert (f"chmod 600 {key}" in said and "open to other users" in said) == warned, (oct(mode), said)


@pytest.mark.cluster
def test_a_daemon_on_loopback_without_a_key_says_every_local_user_can_reach_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in (HMAC_ENV, "PYRO_HMAC_KEY")}
    proc = ManagedProcess("unkeyed", [sys.executable, "-P", "-m", "gensim_distw2v.dispatcher", "--ns-port",
                                      str(serving.free_port())], env=env)
    try:
        proc.wait_for(r"without an HMAC key: every user of this machine can drive the cluster", timeout=60)
    finally:
        proc.stop()
    key = tmp_path / "key"
    key.write_text("a long random secret\n")
    key.chmod(0o600)
    keyed = ManagedProcess("keyed", [sys.executable, "-P", "-m", "gensim_distw2v.dispatcher", "--ns-port",
                                     str(serving.free_port()), "--hmac-key-file", str(key)], env=env)
    try:
        keyed.wait_for(r"name server|waiting", timeout=60)
        assert not [line for line in keyed.lines if "without an HMAC key" in line or "open to other users" in line]
    finally:
        keyed.stop()


@pytest.mark.unit
def test_a_failed_open_never_shows_a_shard_the_owners_secret(monkeypatch):
    """Issue 54, item 5: interrupted during the upload (Ctrl-C, a lost dispatcher), the client closes the
    session on every shard with that shard's capability; the owner's secret never leaves for a shard."""
    import types

    import numpy as np

    from gensim_distw2v import protocol
    from gensim_distw2v.client.session import SessionSetup
    from gensim_distw2v.io import endpoints
    from gensim_distw2v.config.settings import Settings

    seen = []

    class Recorder:
        """A shard link that keeps what it was asked."""

        def __init__(self, uri):
            self.uri, self.timeout = uri, 60.0

        def call(self, op, **fields):
            seen.append((self.uri, op, fields.get("token")))

        def release(self):
            pass

    shards = [["shard-a", "PYRO:a@127.0.0.1:1"], ["shard-b", "PYRO:b@127.0.0.1:2"]]
    opened = protocol.Opened(session="s1", shards=shards, token="workers-secret", owner="owners-secret")

    class Dispatcher:
        def call(self, op, *args, **fields):
            if op == "open_session":
                return opened
            if op == "upload":
                raise KeyboardInterrupt  # the user's Ctrl-C, the first array on its way
            return None

    monkeypatch.setattr(endpoints, "link", lambda uri, table, key, timeout=60.0: Recorder(uri))
    run = types.SimpleNamespace(hmac_key=None, ns_conf={"host": "127.0.0.1", "port": 1}, settings=Settings(),
                                token=None)
    setup = SessionSetup(run)
    with pytest.raises(KeyboardInterrupt):
        setup.open(Dispatcher(), types.SimpleNamespace(checkpoint=None), {"lockf": np.zeros(3, np.float32)})
    capabilities = {uri: protocol.shard_capability("owners-secret", "s1", i) for i, (_, uri) in enumerate(shards)}
    assert sorted(op for _, op, _ in seen) == ["close", "close"]
    assert all(token == capabilities[uri] and token != "owners-secret" for uri, _, token in seen)
