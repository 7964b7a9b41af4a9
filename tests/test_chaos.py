"""The chaos soak (benchmarks/chaos.py): a short one on real processes across network namespaces, and
its summary in process. The ten-minute soak's figures are in docs/failures.rst."""
import json
import os
import subprocess
import sys

import pytest
from gensim.test.utils import datapath

from .benchmark_modules import load

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.mark.system
def test_a_short_soak_kills_freezes_and_cuts_every_role_and_every_run_trains_every_word_once():
    """Faults of every kind on every role, one after the other, while lee trains (150 epochs a run):
    every run finishes, counts every word once, trains again no more than a checkpoint interval and
    the rounds in flight a fault, and no process dies but those killed."""
    out = subprocess.run([sys.executable, os.path.join(BENCHMARKS, "chaos.py"), "--corpus",
                          datapath("lee_background.cor"), "--epochs", "150", "--hosts", "2", "--threads", "2",
                          "--minutes", "2.5", "--every", "3", "--checkpoint-every", "3", "--seed", "3", "--json"],
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    if "nothing run" in out.stdout:  # not Linux, or not root: it says why and exits 0
        assert os.geteuid() != 0 or not sys.platform.startswith("linux")
        pytest.skip(out.stdout.strip())
    result = json.loads(out.stdout.strip().splitlines()[-1])
    summary = result["summary"]
    assert summary["faults"] >= 8, out.stdout[-3000:]
    assert all(summary["kinds"][kind] for kind in ("kill", "freeze", "hang", "cut")), summary["kinds"]
    assert all(summary["targets"][role] for role in ("worker", "shard", "dispatcher", "client")), summary["targets"]
    assert summary["runs_finished"] >= 1 and summary["every_word_once"], out.stdout[-3000:]
    assert summary["self_exits"] == 0, result["self_exits"]
    # training again within two minutes of the user's answer to any fault: no hang
    assert summary["recovered"] >= 1 and summary["recovery_longest"] < 120, summary
    assert summary["retrained_most_in_a_run"] <= summary["expected"], summary
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "gnl" not in left, left


@pytest.mark.unit
def test_the_soak_summary_counts_faults_words_and_quality_against_the_clean_run():
    chaos = load("chaos")
    args = chaos.parse_args(["--corpus", "x", "--epochs", "2", "--checkpoint-every", "1"])
    clean = {"wall": 10.0, "trained": 200, "progress_words": 200, "retrained": 0, "longest_stall": 0.5,
             "attempts": 1, "analogy": 0.5, "ws353": 0.6, "simlex": 0.3}
    faulted = [dict(clean, wall=30.0, faults=2, retrained=40, longest_stall=8.0, attempts=2, raised=1, analogy=0.49),
               dict(clean, wall=20.0, faults=1, trained=180, progress_words=150, retrained=10, longest_stall=3.0,
                    analogy=0.47, simlex=0.25)]
    faults = [{"kind": "kill", "target": "shard", "recovery": 2.0}, {"kind": "cut", "target": "client"},
              {"kind": "kill", "target": "shard", "recovery": 5.0}]  # the cut: the next fault came first
    summary = chaos.summarise(args, 100, {"runs": [clean, *faulted], "faults": faults, "self_exits": []})
    assert summary["expected"] == 200 and summary["faults"] == 3 and summary["runs_finished"] == 2
    assert summary["by_kind"] == {"kill shard": 2, "cut client": 1}
    assert summary["kinds"]["kill"] == 2 and summary["targets"]["client"] == 1 and summary["targets"]["worker"] == 0
    assert not summary["every_word_once"]  # the second faulted run counted 180 of 200
    assert summary["retrained_words"] == 50 and summary["retrained_most_in_a_run"] == 40
    # a checkpoint interval (1 s here) trains 20 words at the clean run's speed: 40 a run of two faults is
    # within it, 10 in a run of one fault too; 41 would not be
    assert summary["checkpoint_interval_words"] == 20.0 and summary["retrained_within_bound"]
    faulted[0]["retrained"] = 41
    assert not chaos.summarise(args, 100, {"runs": [clean, *faulted], "faults": faults,
                                           "self_exits": []})["retrained_within_bound"]
    assert summary["recovered"] == 2 and summary["recovery_median"] == 3.5 and summary["recovery_longest"] == 5.0
    assert summary["longest_stall"] == 8.0 and summary["faulted_seconds"] == 25.0 and summary["client_attempts"] == 3
    assert summary["client_raised"] == 1  # of the three starts, one after train() raised
    assert summary["quality_delta_mean"]["analogy"] == pytest.approx(-0.02)
    assert summary["quality_delta_worst"]["simlex"] == pytest.approx(-0.05)


@pytest.mark.unit
def test_the_fault_plan_covers_every_kind_and_every_target_in_each_block():
    chaos = load("chaos")
    soak = chaos.Soak.__new__(chaos.Soak)  # the plan alone: no network, no process
    soak.rng, soak.plan, soak.blocks = __import__("random").Random(1), [], 0
    soak.kinds, soak.targets = list(chaos.KINDS), list(chaos.TARGETS)
    blocks = [soak._block() for _ in range(4)]
    for block in blocks:
        assert sorted(k for k, _ in block) == sorted(chaos.KINDS)
        assert sorted(t for _, t in block) == sorted(chaos.TARGETS)
    assert len({pair for block in blocks for pair in block}) == 16  # four blocks: every kind on every target
    soak.kinds, soak.blocks = ["kill"], 0
    assert sorted(soak._block()) == [("kill", t) for t in sorted(chaos.TARGETS)]
