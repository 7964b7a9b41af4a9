"""``python -m gensim_distw2v train``, end to end in a real process."""
import subprocess
import sys

import gensim.models
from gensim.test.utils import datapath


def run_cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "gensim_distw2v", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_train_saves_a_gensim_model(tmp_path):
    output = tmp_path / "lee.model"
    out = run_cli(["train", datapath("lee_background.cor"), "--output", str(output), "--min-count", "2",
                   "--epochs", "2", "--vector-size", "20", "--sg", "1", "--evaluate", "--quiet"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "vocabulary 4844 words" in out.stdout and "analogy accuracy" in out.stdout, out.stdout
    model = gensim.models.Word2Vec.load(str(output))
    assert type(model) is gensim.models.Word2Vec and model.wv.vectors.shape == (4844, 20) and model.sg == 1


def test_train_refuses_bad_input(tmp_path):
    out = run_cli(["train", str(tmp_path / "missing.txt"), "--output", str(tmp_path / "m")], tmp_path)
    assert out.returncode != 0 and "does not exist" in out.stderr
    empty = tmp_path / "tiny.txt"
    empty.write_text("just a few words\n")
    out = run_cli(["train", str(empty), "--output", str(tmp_path / "m"), "--quiet"], tmp_path)
    assert out.returncode != 0 and "lower --min-count" in out.stderr, out.stderr
