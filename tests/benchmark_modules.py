"""The benchmarks' modules (``benchmarks/`` is not a package: its scripts import each other by name), for
the tests that check their logic in process."""
import importlib
import os
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def load(name):
    """The module ``benchmarks/<name>.py`` (its siblings importable while it loads)."""
    sys.path.insert(0, BENCHMARKS)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(BENCHMARKS)
