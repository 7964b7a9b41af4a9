"""The tutorial notebook runs, start to end, in a real kernel (on gensim's small test corpus)."""
import os

import pytest

pytestmark = pytest.mark.system

nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")

NOTEBOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "tutorial.ipynb")


def test_tutorial_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("TUTORIAL_EPOCHS", "5")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                     for output in cell.get("outputs", []))
    assert "status page: http://127.0.0.1:" in text
    assert "held-out countries accepted" in text and "raw words/s" in text
    assert (tmp_path / "out" / "loss-and-accuracy.png").stat().st_size > 10_000
    assert list((tmp_path / "out" / "tensorboard").glob("events.out.tfevents.*"))
