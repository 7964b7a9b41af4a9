"""The SLURM launcher with real daemons (issue 36): ``slurmctld``, two ``slurmd`` and ``munge`` on
this machine; ``srun gensim-distw2v train ... --slurm`` trains and saves a model gensim loads, and
``srun gensim-distw2v cluster --slurm`` serves a client until ``scancel``; nothing of the package
is left running, and the key file is gone.
"""
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time

import pytest
from gensim.models import Word2Vec as GensimWord2Vec
from gensim.test.utils import datapath

from gensim_distw2v import Word2Vec

from . import slurm
from .sshd import free_port, nothing_left  # noqa: F401 - a fixture

pytestmark = pytest.mark.system

if not sys.platform.startswith("linux") or os.geteuid() != 0 or slurm.missing():
    pytest.skip(f"the SLURM launcher's tests need Linux, root and {', '.join(slurm.missing()) or 'SLURM'} (.ci/run "
                f"installs slurmctld, slurmd, slurm-client and munge)", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster():
    folder = tempfile.mkdtemp(prefix="gdw-slurm-", dir="/tmp")  # short: munge's and slurmd's sockets live there
    daemons = slurm.Slurm(folder)
    yield daemons
    daemons.stop()
    shutil.rmtree(folder, ignore_errors=True)  # config, munge's key, state and logs


def srun(*args):
    return ["srun", "-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", sys.executable, "-P", "-m",
            "gensim_distw2v", *args]


def test_srun_train_on_two_nodes_saves_a_model_gensim_loads(cluster, tmp_path, nothing_left):
    model = tmp_path / "lee.model"
    out = cluster.run(srun("train", datapath("lee_background.cor"), "--slurm", "--key-dir", str(tmp_path),
                           "--cluster-ns-port", str(free_port()), "--output", str(model), "--min-count", "2",
                           "--epochs", "2", "--vector-size", "16", "--quiet"), timeout=300, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "on the 2 nodes of SLURM job" in out.stdout
    assert len(GensimWord2Vec.load(str(model)).wv) > 1000
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".key")] == []  # rank 0 removed the key


def test_srun_cluster_serves_a_client_until_scancel(cluster, tmp_path, lee_corpus, nothing_left):
    conf_file = tmp_path / "ns_conf.json"
    step = cluster.popen(srun("cluster", "--slurm", "--key-dir", str(tmp_path), "--cluster-ns-port",
                              str(free_port()), "--ns-conf-file", str(conf_file)), cwd=str(tmp_path))
    try:
        deadline = time.monotonic() + 120
        while not conf_file.exists() or not conf_file.read_text().endswith("\n"):
            assert step.poll() is None and time.monotonic() < deadline, step.communicate()
            time.sleep(0.1)
        assert stat.S_IMODE(os.stat(conf_file).st_mode) == 0o600
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".key")] == []  # read by all, then removed
        model = Word2Vec(distributed=True, ns_conf=json.loads(conf_file.read_text()), vector_size=16, min_count=2,
                         seed=1, epochs=2)
        model.build_vocab(lee_corpus)
        counts = model.train(lee_corpus, total_examples=model.corpus_count, epochs=2)
        assert counts[1] == 2 * sum(len(s) for s in lee_corpus)
        assert len(model.cluster_stats["workers"]) == 2
    finally:
        jobs = cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()
        cluster.run(["scancel", *jobs])
        out, err = step.communicate(timeout=60)
    assert "cluster up on 2 nodes of job" in out and "stopping this node's part" in out, out + err


def _rank_processes(job):
    """``{rank: {pid: command line}}`` of this package's processes in SLURM job ``job``."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fin:
                cmdline = fin.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/environ", "rb") as fin:
                env = dict(item.split(b"=", 1) for item in fin.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        if "-m gensim_distw2v" in cmdline and env.get(b"SLURM_JOB_ID") == job.encode():
            found.setdefault(int(env[b"SLURM_PROCID"]), {})[int(pid)] = cmdline
    return found


def test_rank_0_killed_before_everyone_joined_leaves_no_key_file(cluster, tmp_path, nothing_left):
    """Issue 54, item 8: rank 0 killed (-9) while it waits for the others (rank 1's shard frozen,
    so it cannot join) cannot remove the key file itself; rank 1, stopped by srun, removes it."""
    step = cluster.popen(srun("cluster", "--slurm", "--key-dir", str(tmp_path), "--cluster-ns-port",
                              str(free_port())), cwd=str(tmp_path))
    frozen = []
    try:
        deadline = time.monotonic() + 120
        while True:
            assert step.poll() is None and time.monotonic() < deadline, step.communicate()
            jobs = cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()
            ranks = _rank_processes(jobs[0]) if jobs else {}
            shard = [pid for pid, cmd in ranks.get(1, {}).items() if "gensim_distw2v.shard" in cmd]
            if shard:
                os.kill(shard[0], signal.SIGSTOP)  # before it registers: rank 0 waits on
                frozen.append(shard[0])
                break
            time.sleep(0.02)
        keys = [p for p in tmp_path.iterdir() if p.name.endswith(".key")]
        assert len(keys) == 1, keys
        time.sleep(2.0)
        assert keys[0].exists()  # rank 0 still waits for rank 1's shard
        main = [pid for pid, cmd in _rank_processes(jobs[0])[0].items() if " cluster --slurm" in cmd]
        os.kill(main[0], signal.SIGKILL)
        out, err = step.communicate(timeout=90)
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if step.poll() is None:
            cluster.run(["scancel", *cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()])
            step.communicate(timeout=60)
    assert step.returncode != 0, out + err
    assert not keys[0].exists(), f"the key file was left behind: {out + err}"


def test_the_docs_sbatch_script_trains_a_model(cluster, tmp_path, nothing_left):
    """docs/cluster.rst's batch script, as it stands there, through ``sbatch``."""
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "cluster.rst")) as fin:
        text = fin.read()
    block = text.split(":name: sbatch-script", 1)[1].split("\n\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    script = tmp_path / "word2vec.sbatch"
    script.write_text("\n".join(lines).strip() + "\n")
    assert script.read_text().startswith("#!/bin/bash\n#SBATCH") and "srun" in script.read_text()
    env = dict(PYTHON=sys.executable, CORPUS=datapath("lee_background.cor"), OUTPUT=str(tmp_path / "lee.model"),
               HOME=str(tmp_path))
    out = cluster.run(["sbatch", "--wait", "-o", str(tmp_path / "job.out"), str(script)], timeout=600,
                      cwd=str(tmp_path), env=dict(cluster.env, **env))
    log = (tmp_path / "job.out").read_text() if (tmp_path / "job.out").exists() else ""
    assert out.returncode == 0, out.stderr + log[-3000:]
    assert len(GensimWord2Vec.load(str(tmp_path / "lee.model")).wv) > 1000, log[-2000:]
