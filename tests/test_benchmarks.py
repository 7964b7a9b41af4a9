"""The benchmarks run end to end on small data (their figures are measured by hand; here: they work).

Each benchmark is a script; these tests run it as a user would, on gensim's small ``lee`` corpus,
and check the JSON it prints, so a change that breaks a benchmark fails CI rather than the next
measurement.
"""
import json
import os
import subprocess
import sys

import pytest
from gensim.test.utils import datapath

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def run(script, *args, timeout=600):
    out = subprocess.run([sys.executable, os.path.join(BENCHMARKS, script), *args], capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def test_compare_gensim_runs_every_mode():
    out = run("compare_gensim.py", "--corpus", datapath("lee_background.cor"), "--workers", "1,2", "--epochs", "1",
              "--seeds", "1", "--vector-size", "20", "--json")
    table = {(row["mode"], row["k"]): row for row in json.loads(out.strip().splitlines()[-1])["table"]}
    assert set(table) == {(m, k) for m in ("gensim", "gensim_cf", "dist", "dist_cf") for k in (1, 2)}
    for row in table.values():
        assert row["raw_wps"] > 0 and -1 <= row["ws353"] <= 1
    for mode in ("dist", "dist_cf"):
        assert table[(mode, 2)]["bytes_up_per_word"] > 0 and table[(mode, 2)]["bytes_down_per_word"] > 0


def test_multihost_builds_its_network_and_removes_it():
    out = run("multihost.py", "--corpus", datapath("lee_background.cor"), "--max-words", "200000", "--workers", "2",
              "--merge", "damp,mean", "--json")
    if "multihost benchmark skipped" in out:  # not Linux, or not root: it must say why and exit 0
        assert os.geteuid() != 0 or not sys.platform.startswith("linux")
        pytest.skip(out.strip())
    result = json.loads(out.strip().splitlines()[-1])
    assert [(r["k"], r["rule"]) for r in result["results"]] == [(2, "damp"), (2, "mean")]
    for row in result["results"]:
        assert 0 < row["merge_share"] < 1 and row["up_per_word_per_worker"] > 0 and row["down_per_word_per_worker"] > 0
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "gmh" not in left, left
