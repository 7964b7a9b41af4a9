"""The SSH launcher with the real programs (issue 36): OpenSSH's server with keys made for the test,
on loopback and in two network namespaces joined by a bridge; ``gensim-distw2v train --hosts`` and
``gensim-distw2v cluster --hosts`` end to end; a host lost mid-training, Ctrl-C, and each start-up
failure, every one leaving no process of the package running on any host.
"""
import itertools
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
from gensim.models import Word2Vec as GensimWord2Vec
from gensim.test.utils import datapath

from gensim_distw2v import Word2Vec
from gensim_distw2v.launch.events import BEAT_SECONDS, SILENT_SECONDS

from .sshd import Bridge, Sshd, free_port, make_keys, nothing_left, package_processes  # noqa: F401 - a fixture

pytestmark = pytest.mark.system

NEEDS = ("Linux", "root", "/usr/sbin/sshd", "ssh", "ip")
if not sys.platform.startswith("linux") or os.geteuid() != 0 or not os.path.exists("/usr/sbin/sshd") \
        or shutil.which("ssh") is None or shutil.which("ip") is None:
    pytest.skip(f"the SSH launcher's tests need {', '.join(NEEDS)} (.ci/run installs openssh-server)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return make_keys(str(tmp_path_factory.mktemp("ssh-keys")))


@pytest.fixture
def sshd(keys, tmp_path):
    server = Sshd(str(tmp_path), keys, "127.0.0.1", free_port())
    yield server
    server.stop()


def ssh_args(keys, port, python=sys.executable, known_hosts=None, checking="yes"):
    return ["--ssh-port", str(port), "--ssh-option", f"IdentityFile={keys['client']}",
            "--ssh-option", f"StrictHostKeyChecking={checking}",
            "--ssh-option", f"UserKnownHostsFile={known_hosts or keys['known_hosts']}", "--python", python]


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-P", "-m", "gensim_distw2v", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_train_over_ssh_saves_a_model_gensim_loads_and_leaves_nothing(keys, sshd, tmp_path, nothing_left):
    """Issue 36's first "done when", as its command (the name server on its default port)."""
    model = tmp_path / "lee.model"
    out = cli("train", datapath("lee_background.cor"), "--hosts", "127.0.0.1,127.0.0.1",
              *ssh_args(keys, sshd.port), "--output", str(model), "--min-count", "2", "--epochs", "2",
              "--vector-size", "16", "--quiet")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "a cluster of 2 hosts started over SSH" in out.stdout
    assert "per trained word" in out.stdout and "why slower here" not in out.stdout  # (that line is a local one's)
    loaded = GensimWord2Vec.load(str(model))
    assert len(loaded.wv) > 1000 and loaded.wv.vector_size == 16


@pytest.mark.parametrize("failure", ["unreachable", "no package", "other version", "port in use", "another host key",
                                     "host keys unchecked"])
def test_a_host_that_cannot_start_is_named_with_the_fix(keys, sshd, tmp_path, failure, nothing_left):
    ns_port, python, port = free_port(), sys.executable, sshd.port
    held, known, checking = None, None, "yes"
    if failure == "another host key":  # known_hosts holds another key for it: a host answering in its place
        known = make_keys(str(tmp_path))["known_hosts"]
        expected = (r"host 127\.0\.0\.1: its host key is not the one known_hosts holds for it, or is unknown "
                    r"\(Host key verification failed\.\); .*update known_hosts")
    elif failure == "host keys unchecked":  # refused before any host is reached: the key would travel unchecked
        checking = "no"
        expected = (r"error: --ssh-option StrictHostKeyChecking=no: the cluster's key travels over these SSH "
                    r"connections, so the hosts' keys must be checked; .*StrictHostKeyChecking=accept-new")
    elif failure == "unreachable":
        port = free_port()  # no sshd there
        expected = r"host 127\.0\.0\.1: cannot reach it over SSH \(.*Connection refused\); check the address, --ssh-port"
    elif failure == "no package":
        bare = tmp_path / "bare"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
        python = str(bare / "bin" / "python")
        expected = r"host 127\.0\.0\.1: its Python has no gensim_distw2v .*; install it there"
    elif failure == "other version":
        python = str(tmp_path / "old-python")
        with open(python, "w") as fout:  # the real interpreter, claiming another release of the package
            fout.write(f"#!/bin/sh\nexec {sys.executable} -c 'import runpy, sys; import gensim_distw2v.versions as v; "
                       f"v.__version__ = \"0.0.1\"; sys.argv = sys.argv[2:]; runpy.run_module(sys.argv[0], "
                       f"run_name=\"__main__\", alter_sys=True)' \"$@\"\n")
        os.chmod(python, 0o755)
        expected = (r"host 127\.0\.0\.1 runs other versions: gensim_distw2v 0\.0\.1 here, \S+ on the launcher's "
                    r"machine; install the launcher's versions there")
    else:
        held = socket.socket()
        held.bind(("127.0.0.1", ns_port))
        held.listen()
        expected = rf"host 127\.0\.0\.1: cannot bind the name server's port 127\.0\.0\.1:{ns_port} .*pick another port"
    try:
        began = time.monotonic()
        out = cli("cluster", "--hosts", "127.0.0.1,127.0.0.1", *ssh_args(keys, port, python, known, checking),
                  "--cluster-ns-port", str(ns_port), timeout=120)
    finally:
        if held is not None:
            held.close()
    assert out.returncode == 1, out.stdout + out.stderr
    assert re.search(expected, out.stderr), out.stderr[-3000:]
    assert time.monotonic() - began < 60


def test_ctrl_c_during_start_up_leaves_nothing(keys, sshd, nothing_left):
    launcher = subprocess.Popen([sys.executable, "-P", "-m", "gensim_distw2v", "cluster", "--hosts", "127.0.0.1,127.0.0.1",
                                 *ssh_args(keys, sshd.port), "--cluster-ns-port", str(free_port())],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any("gensim_distw2v.shard" in cmd or "gensim_distw2v.dispatcher" in cmd
                  for cmd in package_processes().values()):
        assert launcher.poll() is None and time.monotonic() < deadline, launcher.stderr.read()
        time.sleep(0.02)
    launcher.send_signal(signal.SIGINT)
    out, err = launcher.communicate(timeout=60)
    assert "stopped" in out, out + err


_BRIDGES = itertools.count()


@pytest.fixture
def two_hosts(keys, tmp_path):
    """Two network namespaces on a bridge, an sshd in each (port 22, as on real hosts)."""
    use = next(_BRIDGES)  # (each use its own names and subnet: the last one's may linger a moment)
    tag = f"gl{os.getpid() % 10000}{use % 10}"
    bridge = Bridge(tag, ["a", "b"], f"10.{200 + os.getpid() % 50}.{(os.getpid() + use) % 250}")
    servers = []
    try:
        for ns, address in bridge.addresses.items():
            servers.append(Sshd(str(tmp_path), keys, address, 22, netns=ns, client_alive=False))  # (sshd's default)
        yield bridge
    finally:
        try:
            for server in servers:
                server.stop()
        finally:  # the namespaces go even if an sshd would not stop
            bridge.remove()


def launch_two_hosts(keys, a, b, conf_file, *options):
    """``gensim-distw2v cluster`` on hosts ``a`` and ``b``, up: ``(launcher, lines, errs, readers)``, its output
    read to the end by one reader a stream (no second reader to split it with)."""
    launcher = subprocess.Popen([sys.executable, "-P", "-m", "gensim_distw2v", "cluster", "--hosts", f"{a}:1,{b}:1",
                                 *ssh_args(keys, 22), "--ns-conf-file", str(conf_file), *options],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, errs = [], []
    readers = [threading.Thread(target=lambda: lines.extend(launcher.stdout), daemon=True),
               threading.Thread(target=lambda: errs.extend(launcher.stderr), daemon=True)]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 120
    while not any(line.startswith("ns_conf = ") for line in lines):
        if launcher.poll() is not None or time.monotonic() > deadline:
            launcher.kill()
            raise AssertionError((lines, "".join(errs)))
        time.sleep(0.05)
    return launcher, lines, errs, readers


def test_a_cluster_on_two_hosts_trains_through_a_lost_host_and_stops_on_ctrl_c(keys, two_hosts, tmp_path,
                                                                               lee_corpus, nothing_left):
    """Two shards a host (``--shards-per-host 2``, more fold threads a node): the lost host takes its worker
    and both its shards with it."""
    a, b = two_hosts.addresses.values()
    conf_file = tmp_path / "ns_conf.json"
    launcher, lines, errs, readers = launch_two_hosts(keys, a, b, conf_file, "--shards-per-host", "2")
    try:
        assert any("2 workers (2 threads), 4 shards" in line for line in lines), lines
        assert stat.S_IMODE(os.stat(conf_file).st_mode) == 0o600
        ns_conf = json.loads(conf_file.read_text())
        assert ns_conf["host"] == a and ns_conf["hmac_key"] not in "".join(lines)  # the key: in the file only
        corpus = lee_corpus * 20
        model = Word2Vec(distributed=True, ns_conf=ns_conf, vector_size=16, min_count=2, seed=1, sg=1, negative=3,
                         checkpoint_dir=str(tmp_path / "checkpoints"), checkpoint_every=0.3)
        model.build_vocab(corpus)
        result = {}
        thread = threading.Thread(target=lambda: result.update(counts=model.train(
            corpus, total_examples=model.corpus_count, epochs=4)), daemon=True)
        thread.start()
        time.sleep(4.0)  # training, with a checkpoint or more
        host_b = two_hosts.names[1]
        pids = subprocess.run(["ip", "netns", "pids", host_b], capture_output=True, text=True).stdout.split()
        victims = [int(p) for p in pids if "gensim_distw2v.worker" in _cmdline(p) or "gensim_distw2v.shard" in
                   _cmdline(p)]
        assert len(victims) == 3  # its worker and its two shards
        for pid in victims:  # the host's servers die (a crash; its agent stops what is left)
            os.kill(pid, signal.SIGKILL)
        thread.join(300)
        assert result["counts"][1] == 4 * sum(len(s) for s in corpus)
        time.sleep(2.0)  # (the launcher looks at its hosts every second)
    finally:
        launcher.send_signal(signal.SIGINT)
        launcher.wait(timeout=60)
        for reader in readers:
            reader.join(10)
    err = "".join(errs)
    assert f"lost host {b}" in err and "the others go on" in err, err[-3000:]
    assert launcher.returncode == 0 and any("stopped" in line for line in lines), (lines, err[-2000:])


def test_a_host_cut_off_from_its_launcher_stops_its_part(keys, two_hosts, tmp_path, nothing_left):
    """The network to a host cut without a word (its sshd, as by default, never asks whether the client is
    still there): its agent hears no beat from the launcher and stops the host's processes within
    SILENT_SECONDS, not at TCP's keepalive, hours later; the launcher names the host lost."""
    a, b = two_hosts.addresses.values()
    launcher, _lines, errs, readers = launch_two_hosts(keys, a, b, tmp_path / "ns_conf.json")
    try:
        host_b = two_hosts.names[1]
        pids = subprocess.run(["ip", "netns", "pids", host_b], capture_output=True, text=True).stdout.split()
        served = [p for p in pids if any(f"gensim_distw2v.{role}" in _cmdline(p) for role in
                                         ("worker", "shard", "launch.agent"))]
        assert len(served) == 3, [_cmdline(p) for p in pids]
        subprocess.run(["ip", "-n", host_b, "link", "set", "eth0", "down"], check=True, timeout=30)
        cut = time.monotonic()
        while any(_cmdline(p) for p in served):
            assert time.monotonic() - cut < SILENT_SECONDS + 20, [_cmdline(p) for p in served]
            time.sleep(0.2)
        stopped_after = time.monotonic() - cut
        while f"lost host {b}" not in "".join(errs) and time.monotonic() - cut < 60:
            time.sleep(0.2)
    finally:
        launcher.send_signal(signal.SIGINT)
        launcher.wait(timeout=60)
        for reader in readers:
            reader.join(10)
    assert stopped_after > SILENT_SECONDS - BEAT_SECONDS - 1, stopped_after  # (its beats ended it, not a crash)
    assert f"lost host {b}" in "".join(errs), "".join(errs)[-3000:]


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fin:
            return fin.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
