"""``python -m gensim_distw2v train``, end to end in a real process."""
import os
import re
import shlex
import subprocess
import sys

import gensim.models
import pytest
from gensim.test.utils import datapath

pytestmark = pytest.mark.cluster


def run_cli(args, cwd, text=True):
    """The command's result; ``text=False``: its output as str without newline translation (a progress bar's
    ``\\r`` updates stay on their line, as a terminal shows them)."""
    out = subprocess.run([sys.executable, "-m", "gensim_distw2v", *args], capture_output=True, text=text,
                         cwd=cwd, timeout=300)
    if not text:
        out.stdout, out.stderr = out.stdout.decode("utf8"), out.stderr.decode("utf8")
    return out


def test_train_saves_a_gensim_model(tmp_path):
    output = tmp_path / "lee.model"
    out = run_cli(["train", datapath("lee_background.cor"), "--output", str(output), "--min-count", "2",
                   "--epochs", "2", "--vector-size", "20", "--sg", "1", "--evaluate", "--compare-gensim",
                   "--probe", "government,police", "--quiet"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "vocabulary 4844 words" in out.stdout and "analogy accuracy" in out.stdout, out.stdout
    assert "on a local cluster of 2 workers x 1 threads" in out.stdout and "merges:" in out.stdout, out.stdout
    # plain gensim side by side: its speed, its scores, and both models' neighbours of the probe words
    lines = out.stdout.splitlines()
    training = next(line for line in lines if line.startswith("training "))
    assert training.count("raw words/s") == 2 and "(workers=2)" in training, out.stdout
    table = lines[lines.index(next(line for line in lines if line.startswith("nearest"))) + 1:]
    probes = [line.split()[0] for line in table[:table.index("")]]
    assert probes == ["government", "police"], out.stdout
    assert "scores mean little this small" in out.stdout
    shared = re.search(r"shared with plain gensim: (\d+)% \(plain gensim with seeds 1 and 2: (\d+)%\)", out.stdout)
    assert shared and all(0 <= int(share) <= 100 for share in shared.groups()), out.stdout
    model = gensim.models.Word2Vec.load(str(output))
    assert type(model) is gensim.models.Word2Vec and model.wv.vectors.shape == (4844, 20) and model.sg == 1


README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.rst")


def readme_demo():
    """The options of README's first command (the corpus, a shell substitution, left out)."""
    with open(README, encoding="utf8") as fin:
        line = next(row.strip() for row in fin if row.strip().startswith("python3 -m venv")
                    and "gensim-distw2v train" in row)
    return shlex.split(line.split("gensim-distw2v train", 1)[1])[1:]


def test_readme_demo_fits_one_screen_with_its_summary(tmp_path):
    """Issue 37: quiet by default (progress bars, no INFO lines), at most 60 lines, the closing summary, vectors
    that are not degenerate, and the agreement figure beside gensim's own seed-to-seed one."""
    args = readme_demo()
    args[args.index("--output") + 1] = str(tmp_path / "lee.model")
    out = run_cli(["train", datapath("lee_background.cor"), *args], tmp_path, text=False)
    assert out.returncode == 0, out.stderr
    lines = (out.stdout + out.stderr).count("\n")  # the lines a terminal shows (a bar redraws its own)
    assert lines <= 60, f"{lines} lines:\n{out.stdout}{out.stderr}"
    assert "INFO" not in out.stderr and "Skipping line" not in out.stderr, out.stderr[-2000:]
    assert "counting the vocabulary" in out.stderr and "training" in out.stderr  # the bars
    for part in ("per trained word: workers' kernels", "at scale (an estimate from these costs", "why slower here"):
        assert part in out.stdout, out.stdout
    shared = re.search(r"shared with plain gensim: (\d+)% \(plain gensim with seeds 1 and 2: (\d+)%\)", out.stdout)
    assert shared, out.stdout
    table = out.stdout[out.stdout.index("nearest neighbours"):]
    cosines = [float(c) for c in re.findall(r" (0\.\d{3})", table.split("\n\n")[0])]
    assert len(cosines) >= 16 and sum(cosines) / len(cosines) < 0.9, table  # not all alike (near 1)


def test_train_with_workers_reading_the_file(tmp_path):
    output = tmp_path / "cf.model"
    out = run_cli(["train", datapath("lee_background.cor"), "--output", str(output), "--min-count", "2",
                   "--epochs", "2", "--vector-size", "20", "--corpus-file", "--quiet"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "vocabulary 4844 words" in out.stdout and "119780 raw" in out.stdout, out.stdout  # 2 epochs, every word
    assert gensim.models.Word2Vec.load(str(output)).wv.vectors.shape == (4844, 20)


def test_train_on_a_running_cluster_and_without_one(tmp_path):
    from gensim_distw2v import LocalCluster

    with LocalCluster(n_workers=1, hmac_key=False) as cluster:  # unkeyed: --ns-port alone reaches it
        out = run_cli(["train", datapath("lee_background.cor"), "--output", str(tmp_path / "a.model"),
                       "--min-count", "2", "--epochs", "1", "--ns-port", str(cluster.ns_conf["port"]), "--quiet"],
                      tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"on the cluster at 127.0.0.1:{cluster.ns_conf['port']}" in out.stdout
    key = tmp_path / "key"
    key.write_bytes(b"a key of the cluster's own\n")
    with LocalCluster(n_workers=1, hmac_key=b"a key of the cluster's own") as cluster:
        args = ["train", datapath("lee_background.cor"), "--output", str(tmp_path / "k.model"), "--min-count", "2",
                "--epochs", "1", "--ns-port", str(cluster.ns_conf["port"]), "--quiet"]
        out = run_cli(args + ["--hmac-key-file", str(key)], tmp_path)
        assert out.returncode == 0 and "on the cluster at" in out.stdout, out.stderr
        refused = run_cli(args, tmp_path)  # no key: refused, with an error and no traceback
        assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
        assert "refuses this client: it gave no HMAC key; pass the cluster's key" in refused.stderr, refused.stderr
    out = run_cli(["train", datapath("lee_background.cor"), "--output", str(tmp_path / "b.model"),
                   "--min-count", "2", "--epochs", "1", "--no-cluster", "--quiet"], tmp_path)
    assert out.returncode == 0 and "local threads" in out.stdout, out.stderr
    # no cluster where one is named: a clear error, no traceback
    out = run_cli(["train", datapath("lee_background.cor"), "--output", str(tmp_path / "c.model"),
                   "--ns-port", str(cluster.ns_conf["port"]), "--quiet"], tmp_path)
    assert out.returncode != 0 and "no Pyro4 name server answers" in out.stderr and "Traceback" not in out.stderr


def test_train_refuses_bad_input(tmp_path):
    out = run_cli(["train", str(tmp_path / "missing.txt"), "--output", str(tmp_path / "m")], tmp_path)
    assert out.returncode != 0 and "does not exist" in out.stderr
    empty = tmp_path / "tiny.txt"
    empty.write_text("just a few words\n")
    out = run_cli(["train", str(empty), "--output", str(tmp_path / "m"), "--quiet"], tmp_path)
    assert out.returncode != 0 and "lower --min-count" in out.stderr, out.stderr


def test_checkpoints_from_the_command_line(tmp_path):
    folder = tmp_path / "checkpoints"
    args = ["train", datapath("lee_background.cor"), "--output", str(tmp_path / "m"), "--min-count", "2",
            "--epochs", "2", "--vector-size", "20", "--quiet", "--checkpoint-dir", str(folder)]
    out = run_cli(args, tmp_path)
    assert out.returncode == 0, out.stderr
    # one checkpoint per epoch end, the last marks the run finished: a fresh cluster reads it from disk
    assert sorted(p.name for p in (folder / "dispatcher").iterdir()) == ["ckpt-00000001", "ckpt-00000002"]
    assert sorted(p.name for p in (folder / "shard-0-of-1").iterdir()) == ["ckpt-00000001", "ckpt-00000002"]
    # resuming the finished run hands its trained model back (its client died before saving it, say)
    (tmp_path / "m").unlink()
    out = run_cli(args + ["--resume"], tmp_path)
    assert out.returncode == 0 and (tmp_path / "m").exists(), out.stderr
    out = run_cli(args[:-2] + ["--resume"], tmp_path)
    assert out.returncode != 0 and "--resume needs --checkpoint-dir" in out.stderr, out.stderr


def test_daemons_refuse_a_heartbeat_the_dispatcher_would_not_wait_for(tmp_path):
    for daemon in ("worker", "shard"):
        out = subprocess.run([sys.executable, "-m", f"gensim_distw2v.{daemon}", "--heartbeat", "10"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert out.returncode == 2 and "--heartbeat must be in (0, 5] seconds" in out.stderr, out.stderr


def test_daemons_refuse_a_bad_option_naming_it_and_what_it_allows(tmp_path):
    for daemon, argv, message in (
            ("dispatcher", ["--status-port", "70000"], "--status-port must be an int in [0, 65535]"),
            ("worker", ["--threads", "0"], "--threads must be a positive int, got 0"),
            ("nameserver", ["-p", "-1"], "--port must be an int in [0, 65535], got -1")):
        out = subprocess.run([sys.executable, "-m", f"gensim_distw2v.{daemon}", *argv],
                             capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
