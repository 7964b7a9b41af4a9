"""The lanes' order, clock and the unit lane's budget: in-process, and through a real pytest run."""
import os
import shutil
import subprocess
import sys

import pytest

from .lanes import UNIT_BUDGET, LaneClock

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.unit
def test_the_clock_times_each_lane_from_its_first_start_to_its_last_end():
    clock = LaneClock({"a": "unit", "b": "unit", "c": "cluster"})
    clock.ran("a", 10.0, 11.0)
    clock.ran("b", 11.0, 13.5)
    clock.ran("c", 14.0, 20.0)
    clock.ran("not collected", 0.0, 99.0)
    assert clock.summary() == {"unit": {"tests": 2, "wall_s": 3.5, "sum_s": 3.5},
                               "cluster": {"tests": 1, "wall_s": 6.0, "sum_s": 6.0}}
    assert clock.wall("system") is None
    assert clock.over_budget(3.5) is None
    message = clock.over_budget(3.0)
    assert message.startswith("the unit lane took 3.5 s, over its 3 s") and "b 2.5 s, a 1.0 s" in message
    assert LaneClock({}).over_budget() is None and UNIT_BUDGET == 180.0


_MINI = '''import time
import pytest


@pytest.mark.system
def test_system_first_in_the_file():
    open("order.txt", "a").write("system\\n")


@pytest.mark.cluster
def test_cluster_second():
    open("order.txt", "a").write("cluster\\n")


@pytest.mark.unit
def test_unit_last_and_slow():
    time.sleep(1.2)
    open("order.txt", "a").write("unit\\n")
'''

_INI = '''[tool.pytest.ini_options]
addopts = "--import-mode=importlib --strict-markers"
markers = ["unit: u", "cluster: c", "system: s"]
'''


@pytest.mark.cluster
def test_a_run_takes_the_unit_lane_first_and_fails_when_it_is_over_its_budget(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("conftest.py", "lanes.py"):
        shutil.copy(os.path.join(HERE, name), tests / name)
    (tests / "test_mini.py").write_text(_MINI)
    (tmp_path / "pyproject.toml").write_text(_INI)

    def run(budget):
        (tmp_path / "order.txt").unlink(missing_ok=True)
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--unit-budget", str(budget)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
        return out, (tmp_path / "order.txt").read_text().split()

    out, order = run(60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert order == ["unit", "cluster", "system"]
    assert "unit: 1 tests in 1." in out.stdout and "cluster: 1 tests in" in out.stdout, out.stdout
    out, order = run(0.5)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "3 passed" in out.stdout, out.stdout
    assert "FAILED: the unit lane took 1." in out.stdout and "over its 0.5 s" in out.stdout, out.stdout
    assert "tests/test_mini.py::test_unit_last_and_slow 1.2 s" in out.stdout, out.stdout
