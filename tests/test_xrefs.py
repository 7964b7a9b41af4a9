"""Cross-references resolve: every ``:func:``, ``:class:``, ``:meth:``, ``:attr:``, ``:data:``, ``:mod:``
and ``:exc:`` of the package's docstrings, and every one of docs/*.rst naming the package, names
something that exists, as Sphinx would look it up (the module, its package, its classes)."""
import ast
import builtins
import importlib
import inspect
import os
import re
import textwrap

import pytest

import gensim_distw2v

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.dirname(gensim_distw2v.__file__)  # the installed one (the checkout's has no compiled parts)
ROLE = re.compile(r":(func|class|meth|attr|data|mod|exc|obj|const):`~?([^`<>]+?)(?:\s*<([^>]+)>)?`")


def _assigned(cls):
    """The attributes a class's own source sets on ``self`` (instance attributes are not on the class)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return set()
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name) and node.value.id == "self"}


def resolves(dotted):
    """Whether ``dotted`` names a module, or an attribute, field or instance attribute reached from one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for j, name in enumerate(parts[i:], start=i):
            if hasattr(obj, name):
                obj = getattr(obj, name)
                continue
            # a dataclass field without a default, or an instance attribute: the last name only
            return j == len(parts) - 1 and inspect.isclass(obj) and (
                name in getattr(obj, "__annotations__", {}) or name in _assigned(obj))
        return True
    return False


def unresolved(module, source):
    """``(where, role, target)`` of the references in ``source``'s docstrings (module ``module``) that resolve
    neither as written nor in the module, its package or one of its classes."""
    tree = ast.parse(source)
    classes = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    package = module.rsplit(".", 1)[0]
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for role, target, explicit in ROLE.findall(ast.get_docstring(node, clean=False) or ""):
            name = (explicit or target).strip().lstrip("~").rstrip("()").lstrip(".")
            places = [name, f"{module}.{name}", f"{package}.{name}"] + [f"{module}.{c}.{name}" for c in classes]
            if not hasattr(builtins, name) and not any(resolves(place) for place in places):
                bad.append((f"{module}:{getattr(node, 'name', '<module>')}", role, name))
    return bad


def modules():
    for folder, _dirs, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py") and name != "__main__.py":  # (a __main__ runs when imported)
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].split(os.sep)
                yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


@pytest.mark.unit
def test_the_checker_finds_a_reference_to_nothing():
    source = '"""See :func:`gensim_distw2v.core.schedule.hot_rows`, :class:`Here` and :attr:`Here.size`."""\n' \
             'class Here:\n    """:meth:`gone`, :attr:`kept` and :func:`~gensim_distw2v.core.schedule.no_such`."""\n' \
             '    def __init__(self):\n        self.kept = 1\n'
    module = "gensim_distw2v.core.schedule"  # (its own names resolve; Here is the source's, not the module's)
    found = {target for _where, _role, target in unresolved(module, source)}
    assert found == {"Here", "Here.size", "gone", "kept", "gensim_distw2v.core.schedule.no_such"}
    assert resolves("gensim_distw2v.core.replica.Replica.take_delta") and resolves("gensim_distw2v.io.meter")
    assert resolves("gensim_distw2v.worker.training._Training.merger")  # an instance attribute its class sets
    assert not resolves("gensim_distw2v.core.replica.Replica.no_such")


@pytest.mark.unit
def test_every_docstrings_cross_reference_resolves():
    bad = []
    for module, path in modules():
        importlib.import_module(module)
        with open(path, encoding="utf8") as f:
            bad += unresolved(module, f.read())
    assert not bad, "cross-references to nothing (name them in full, ~ to show the last part):\n" + "\n".join(
        f"  {where}  :{role}:`{target}`" for where, role, target in bad)


@pytest.mark.unit
def test_every_reference_of_the_docs_pages_to_the_package_resolves():
    bad = []
    folder = os.path.join(ROOT, "docs")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".rst"):
            with open(os.path.join(folder, name), encoding="utf8") as f:
                for role, target, explicit in ROLE.findall(f.read()):
                    target = (explicit or target).strip().lstrip("~").rstrip("()")
                    if target.startswith("gensim_distw2v") and not resolves(target):
                        bad.append(f"  docs/{name}  :{role}:`{target}`")
    assert not bad, "references to nothing in the docs:\n" + "\n".join(bad)
