"""A network cut, for real: a worker in its own network namespace loses its link mid-training.

Two namespaces joined by a veth pair (private addresses, nothing else reachable): ``a`` runs the
name server, the dispatcher, one worker and the client; ``b`` runs the second worker. The test cuts
the link (``ip link set ... down``) once ``b`` trains, restores it after the dispatcher has dropped
``b``, and checks that training finished on ``a``'s worker with every word, and that ``b`` comes back
as a new worker that serves the next ``train()``. Linux and root only (skipped elsewhere, saying why);
both namespaces are deleted whatever happens.
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from gensim_distw2v.client.cluster import ManagedProcess

pytestmark = pytest.mark.system

NEEDS = ("Linux", "root", "the ip command")
if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("ip") is None:
    pytest.skip(f"network namespaces need {', '.join(NEEDS)}", allow_module_level=True)

ADDR_A, ADDR_B = "10.231.77.1", "10.231.77.2"
DRIVER = textwrap.dedent("""
    import sys, threading, time
    from gensim.models.word2vec import LineSentence
    from gensim.test.utils import datapath
    from gensim_distw2v import Word2Vec
    from gensim_distw2v.client.training import find_dispatcher
    conf = {"host": sys.argv[1], "port": int(sys.argv[2]), "hmac_key": sys.argv[3]}
    corpus = list(LineSentence(datapath("lee_background.cor"))) * 12
    model = Word2Vec(distributed=True, ns_conf=conf, vector_size=16, min_count=2, seed=1, workers=1, sg=1,
                     epochs=2)
    model.build_vocab(corpus)

    def watch():  # report each worker once it has merged words and holds jobs: the moment to cut its link
        probe, seen = find_dispatcher(conf), set()
        while len(seen) < 2:
            for name, info in probe.send("status", {})["workers"].items():
                if name not in seen and info["words"] > 0 and info["in_flight"] > 0:
                    seen.add(name)
                    print("busy", name, flush=True)
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()
    counts = model.train(corpus, total_examples=model.corpus_count, epochs=2)
    print("first run: raw words", counts[1], "expected", 2 * sum(map(len, corpus)), "workers",
          len(model.cluster_stats["workers"]), flush=True)
    dispatcher = find_dispatcher(conf)
    deadline = time.monotonic() + 180
    while len(dispatcher.call("status").workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    counts = model.train(corpus, total_examples=len(corpus), epochs=1)
    print("second run: raw words", counts[1], "expected", sum(map(len, corpus)), "workers training",
          sum(1 for w in model.cluster_stats["workers"].values() if w["words"] > 0), flush=True)
""")


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def namespaces():
    tag = f"gdw{os.getpid() % 100000}"
    a, b = f"{tag}a", f"{tag}b"
    try:
        ip("netns", "add", a)
        ip("netns", "add", b)
        ip("link", "add", f"{tag}va", "type", "veth", "peer", "name", f"{tag}vb")
        ip("link", "set", f"{tag}va", "netns", a)
        ip("link", "set", f"{tag}vb", "netns", b)
        for ns, dev, addr in ((a, f"{tag}va", ADDR_A), (b, f"{tag}vb", ADDR_B)):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield {"a": a, "b": b, "dev_b": f"{tag}vb"}
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)  # takes its veth end along
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert a not in left and b not in left


def test_worker_behind_a_cut_link(namespaces, tmp_path):
    key = tmp_path / "key"
    key.write_text("netns test key\n")
    env = dict(os.environ, PYRO_HMAC_KEY="netns test key", PYRO_SERIALIZERS_ACCEPTED="serpent", PYTHONUNBUFFERED="1")
    py = [sys.executable, "-P"]
    port = "9090"
    a, b = (["ip", "netns", "exec", namespaces[n]] for n in ("a", "b"))
    common = ["--ns-host", ADDR_A, "--ns-port", port, "--hmac-key-file", str(key)]
    procs = []

    def start(name, args, ready):
        proc = ManagedProcess(name, args, env=env)
        procs.append(proc)
        return proc.wait_for(ready, timeout=60), proc

    try:
        start("nameserver", a + py + ["-m", "gensim_distw2v.nameserver", "-n", ADDR_A, "-p", port, "--hmac-key-file",
                                      str(key)], "gensim_distw2v.nameserver ready at")
        _, dispatcher = start("dispatcher", a + py + ["-m", "gensim_distw2v.dispatcher", "--host", ADDR_A,
                                                       "--worker-timeout", "3"] + common, "ready at")
        start("shard-a", a + py + ["-m", "gensim_distw2v.shard", "--host", ADDR_A] + common, "ready at")
        dispatcher.wait_for(r"shard \S+ registered")
        start("worker-a", a + py + ["-m", "gensim_distw2v.worker", "--host", ADDR_A, "--threads", "1"] + common,
              "ready at")
        found, worker_b = start("worker-b", b + py + ["-m", "gensim_distw2v.worker", "--host", ADDR_B, "--threads",
                                                      "1"] + common, r"worker (\S+) ready at")
        name_b = found.group(1)
        dispatcher.wait_for(r"\(2 workers\)")
        _, driver = start("driver", a + py + ["-c", DRIVER, ADDR_A, port, "netns test key"], r".")
        driver.wait_for(rf"busy {name_b}", timeout=120)
        ip("-n", namespaces["b"], "link", "set", namespaces["dev_b"], "down")  # the cut
        lost = dispatcher.wait_for(rf"worker {name_b} lost \(no heartbeat.*\); (\d+) unmerged jobs", timeout=30)
        assert int(lost.group(1)) >= 1  # cut mid-training, with jobs in flight
        first = driver.wait_for(r"first run: raw words (\d+) expected (\d+) workers (\d+)", timeout=180)
        assert first.group(1) == first.group(2)  # every word trained, b's unmerged jobs retrained on a
        assert first.group(3) == "1", "\n".join(dispatcher.lines)
        mark = len(dispatcher.lines)
        ip("-n", namespaces["b"], "link", "set", namespaces["dev_b"], "up")  # restored: b comes back as new
        dispatcher.wait_for(rf"worker {name_b} registered", timeout=120, start=mark)
        second = driver.wait_for(r"second run: raw words (\d+) expected (\d+) workers training (\d+)", timeout=180)
        assert second.group(1) == second.group(2) and second.group(3) == "2", "\n".join(worker_b.lines[-30:])
    finally:
        for proc in reversed(procs):
            proc.stop()
