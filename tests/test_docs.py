"""The docs: the Sphinx site builds without a warning, its measurement tables come from the
benchmarks' JSON with their command and date, and nothing in the repository points outside it."""
import importlib.util
import os
import re
import subprocess
import sys
import textwrap

import pytest

from .lanes import UNIT_BUDGET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

pytest.importorskip("sphinx", reason="the docs need sphinx: pip install '.[test]'")


def sphinx_build(source, out, builder="html"):
    # -P: not the working directory on sys.path, so that autodoc imports the installed package (the
    # checkout's has no compiled modules)
    return subprocess.run([sys.executable, "-P", "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder, source,
                           out], capture_output=True, text=True, timeout=600, cwd=os.path.dirname(out))


@pytest.mark.system
def test_the_docs_build_without_warnings_and_every_table_names_its_command_and_date(tmp_path):
    done = sphinx_build(DOCS, str(tmp_path / "html"))
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr and "ERROR" not in done.stderr, done.stderr[-4000:]
    pages = {name: (tmp_path / "html" / name).read_text(encoding="utf-8")
             for name in os.listdir(tmp_path / "html") if name.endswith(".html")}
    for page in ("index.html", "concepts.html", "cluster.html", "design.html", "merge_rule.html",
                 "benchmarks.html", "api.html", "settings.html", "security.html"):
        assert page in pages, sorted(pages)
    # every directive renders its table and, under it, when and how it was measured
    sources = {name: open(os.path.join(DOCS, name), encoding="utf-8").read()
               for name in os.listdir(DOCS) if name.endswith(".rst")}
    for name, text in sources.items():
        tables = text.count(".. measurements::")
        html = pages[name.replace(".rst", ".html")]
        assert html.count("measurements-provenance") == tables + sum(
            len(m.group(1).split()) - 1 for m in re.finditer(r"\.\. measurements:: (.+)", text)), name
        assert len(re.findall(r"Measured \d{4}-\d\d-\d\d \(", html)) >= tables, name
    # the API reference is generated from the installed package's docstrings
    assert "gensim_distw2v.dispatcher.service.Dispatcher" in pages["api.html"]


def load_extension():
    spec = importlib.util.spec_from_file_location("measurements", os.path.join(DOCS, "_ext", "measurements.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.unit
def test_table_cells_reach_into_records_compute_and_leave_missing_fields_empty():
    ext = load_extension()
    formatter = ext.Formatter()
    record = {"K": 4, "us": 0.5, "delta": {"analogy": -0.0123}, "nan": float("nan"), "up": None}
    assert formatter.cell("{K} x {us:.2f}", record) == "4 x 0.50"
    assert formatter.cell("{delta.analogy:+.3f}", record) == "-0.012"
    assert formatter.cell("{=delta.analogy * 100:+.2f} points", record) == "-1.23 points"
    assert formatter.cell("{=us / K * 1e3:.1f}", record) == "125.0"
    assert formatter.cell("{up} / {nan}", record) == ""  # every field missing: an empty cell
    assert formatter.cell("{up} / {K}", record) == " / 4"
    # keys in brackets, a colon among them (before_after's summaries, scaling's "gensim:2")
    keyed = {"us": {"ratio": 1.5}, "vs_gensim": {"gensim:2": 0.8349}}
    assert formatter.cell("{us[ratio]:.2f} / {us.ratio:.1f}", keyed) == "1.50 / 1.5"
    assert formatter.cell("{vs_gensim[gensim:2]:.2f}", keyed) == "0.83"
    assert formatter.cell("{vs_gensim[gensim:4]:.2f}", keyed) == ""
    with pytest.raises(ValueError, match="not allowed"):
        formatter.cell("{=__import__('os')}", record)
    rows = ext.walk({"runs": {"a": {"result": [{"x": 1}]}, "b": {"result": [{"x": 2}]}}}, "runs/*/result")
    assert [(value, [k for k, _v in keys]) for value, _seen, keys in rows] == \
        [([{"x": 1}], ["a"]), ([{"x": 2}], ["b"])]


@pytest.mark.system
def test_a_table_whose_file_names_no_command_or_date_fails_the_build(tmp_path):
    source = tmp_path / "src"
    (source / "m").mkdir(parents=True)
    (source / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.join(DOCS, "_ext")!r})
        extensions = ["measurements"]
    """))
    (source / "m" / "good.json").write_text('{"date": "2026-11-25", "command": "python b.py --json", '
                                            '"runs": [{"K": 2, "us": 0.25}, {"K": 8, "us": 0.5}]}')
    (source / "m" / "bare.json").write_text('{"runs": [{"K": 2, "us": 0.25}]}')
    table = ".. measurements:: m/{}\n   :rows: runs\n\n   K | {{K}}\n   CPU µs | {{us:.3f}}\n"
    (source / "index.rst").write_text("Index\n=====\n\n" + table.format("good.json"))
    done = sphinx_build(str(source), str(tmp_path / "out"), builder="text")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / "index.txt").read_text(encoding="utf-8")
    assert "0.250" in text and "0.500" in text and "Measured 2026-11-25 (good.json)" in text
    assert "python b.py --json" in text
    (source / "index.rst").write_text("Index\n=====\n\n" + table.format("bare.json"))
    done = sphinx_build(str(source), str(tmp_path / "out2"), builder="text")
    assert done.returncode != 0 and "bare.json names no date" in done.stderr, done.stderr
    # a column that no record fills is a misspelt field, not a measurement
    (source / "index.rst").write_text("Index\n=====\n\n" + table.format("good.json").replace("{us:", "{usd:"))
    done = sphinx_build(str(source), str(tmp_path / "out3"), builder="text")
    assert done.returncode != 0 and "no record fills the column(s) ['CPU µs']" in done.stderr, done.stderr


def tracked_files():
    try:
        names = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True,
                               timeout=60).stdout.split()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [n for n in names if n.endswith((".py", ".pyx", ".rst", ".txt", ".toml", ".cfg", ".h", ".md", ".ipynb"))
            or n.startswith(".ci/")]


@pytest.mark.system
def test_nothing_in_the_repository_points_outside_it():
    outside = re.compile(r"\.\./shared|shared/tools|shared/corpora|DESIGN\.md|MERGESIM_DIR")
    found = []
    for name in tracked_files():
        if name == "tests/test_docs.py":
            continue
        with open(os.path.join(ROOT, name), encoding="utf-8", errors="replace") as fin:
            for number, line in enumerate(fin, 1):
                if outside.search(line):
                    found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


@pytest.mark.unit
def test_the_readme_is_short_and_its_test_command_is_the_one_ci_runs():
    with open(os.path.join(ROOT, "README.rst"), encoding="utf-8") as fin:
        lines = fin.read().splitlines()
    assert len(lines) <= 250, f"README.rst has {len(lines)} lines: move the detail to docs/"
    marker = lines.index(".. test-command")
    command = next(line.strip() for line in lines[marker + 1:] if line.startswith("    "))
    assert command == "python3 -m venv .venv && .venv/bin/pip install -q '.[test]' && .venv/bin/pytest -q"
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as fin:
        assert ".. test-command" in fin.read()
    minutes = {60.0: "a minute", 120.0: "two minutes", 180.0: "three minutes"}[UNIT_BUDGET]
    promise = " ".join(lines[marker:marker + 12])
    assert f"the run fails if the lane takes over {minutes}" in promise, "README.rst's promise of the unit lane " \
        "is tests/lanes.py UNIT_BUDGET, which the run enforces"
