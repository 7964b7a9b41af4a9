"""The package's layout, read from its source: sizes, import cycles, constants defined once, leaves.

These read the checkout's files (not the installed package): they are about how the code is laid
out, and fail naming the module, class or import that breaks the rule.
"""
import ast
import os
import subprocess
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gensim_distw2v")
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400
# the layers, lowest first: a module may import from its own layer or a lower one (the roles and the
# client side sit above the rest; see docs/design.rst)
LAYERS = {"versions": 0, "_build_info": 0, "config": 0, "build": 0, "protocol": 1, "core": 2, "projection": 2, "count_projection": 2, "machine_projection": 2, "io": 3, "member": 4, "dispatcher": 4,
          "shard": 4, "worker": 4, "nameserver": 4, "options": 4, "client": 5, "launch": 5, "model": 6, "__init__": 7, "__main__": 7}


def _modules():
    """``{dotted name: path}`` of every Python module of the package."""
    out = {}
    for root, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


def _imports(path, modules):
    """The package's modules that ``path`` imports, at any depth of its code (lazy imports count)."""
    tree = ast.parse(open(path).read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from pkg import mod`` imports pkg.mod (pkg's __init__ is already under way or done);
            # ``from mod import name`` imports mod
            subs = [f"{node.module}.{alias.name}" for alias in node.names if f"{node.module}.{alias.name}" in modules]
            names = subs if len(subs) == len(node.names) else [node.module] + subs
        else:
            continue
        for name in names:
            if name in modules:
                found.add(name)
    return found


@pytest.mark.unit
def test_no_module_and_no_class_is_too_long():
    too_long = []
    for name, path in _modules().items():
        source = open(path).read()
        lines = source.count("\n")
        if lines > MAX_MODULE_LINES:
            too_long.append(f"module {name}: {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                too_long.append(f"class {name}.{node.name}: {node.end_lineno - node.lineno + 1} lines "
                                f"(at most {MAX_CLASS_LINES})")
    assert not too_long, "split these:\n" + "\n".join(too_long)


def _cycle(graph):
    """One import cycle of ``graph`` as a list of modules, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


@pytest.mark.unit
def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.unit
def test_no_import_cycle_among_the_packages_modules():
    modules = _modules()
    graph = {name: {m for m in _imports(path, modules) if m != name} for name, path in modules.items()}
    graph.pop("gensim_distw2v", None)  # the top package's __init__ imports the API it exports, and nothing imports it
    for deps in graph.values():
        deps.discard("gensim_distw2v")
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph))}"


@pytest.mark.unit
def test_no_import_cycle_among_the_packages_parts():
    """Each part of the package (a sub-package, or a loose module) as one node: importing any module of a
    part runs that part's ``__init__``, so a cycle between two parts is a cycle even where no two modules
    import each other (``protocol.session`` importing the settings that import ``protocol.constants``)."""
    modules = _modules()

    def part(name):
        return name.split(".")[1] if "." in name else None

    graph = {}
    for name, path in modules.items():
        if part(name) is None:
            continue
        deps = graph.setdefault(part(name), set())
        deps.update(part(dep) for dep in _imports(path, modules) if part(dep) not in (None, part(name)))
    assert _cycle(graph) is None, f"import cycle between parts of the package: {' -> '.join(_cycle(graph))}"


@pytest.mark.unit
def test_the_role_packages_export_their_servers_explicitly_and_not_their_command_lines():
    """``gensim_distw2v.worker`` (dispatcher, shard) gives its server class; its command line is
    ``python -m`` (``__main__`` imports the ``daemon``), which the package does not load."""
    for role, names in (("worker", {"Worker", "SessionLost"}), ("dispatcher", {"Dispatcher"}), ("shard", {"Shard"})):
        path = os.path.join(PACKAGE, role, "__init__.py")
        tree = ast.parse(open(path).read())
        imported = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert all(isinstance(n, ast.ImportFrom) and n.module == f"gensim_distw2v.{role}.service"
                   and "*" not in {a.name for a in n.names} for n in imported), f"{role}/__init__.py: " \
            f"import the server's names from gensim_distw2v.{role}.service by name, and nothing else"
        assert {a.name for n in imported for a in n.names} == names


def _layer(module):
    part = module.split(".")[1] if "." in module else "__init__"
    return LAYERS.get(part)


@pytest.mark.unit
def test_no_module_imports_from_a_layer_above_its_own():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        if name == "gensim_distw2v" or _layer(name) is None:
            continue
        for dep in _imports(path, modules):
            if dep != "gensim_distw2v" and _layer(dep) is not None and _layer(dep) > _layer(name):
                wrong.append(f"{name} (layer {_layer(name)}) imports {dep} (layer {_layer(dep)})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.unit
def test_every_module_is_in_a_layer():
    missing = sorted(name for name in _modules() if name != "gensim_distw2v" and _layer(name) is None)
    assert not missing, f"give these a layer in LAYERS (and docs/design.rst): {missing}"


@pytest.mark.unit
def test_each_public_constant_is_defined_once():
    where = {}
    for name, path in _modules().items():
        for node in ast.parse(open(path).read()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper() and not target.id.startswith("_"):
                    where.setdefault(target.id, []).append(name)
    twice = {const: mods for const, mods in where.items() if len(mods) > 1}
    assert not twice, f"constants defined in more than one module: {twice}"


def _compared_by_name(names, word):
    """Comparisons outside protocol.constants of an expression naming ``word`` with one of ``names``' strings."""
    found = []
    for name, path in _modules().items():
        if name == "gensim_distw2v.protocol.constants":
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if not isinstance(node, ast.Compare):
                continue
            values = [node.left, *node.comparators]
            strings = {v.value for part in values for v in ast.walk(part)
                       if isinstance(v, ast.Constant) and isinstance(v.value, str)}
            if strings & set(names) and any(word in ast.unparse(part) for part in values):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.unit
def test_no_module_decides_by_a_sync_modes_or_a_sessions_state_name():
    """What differs between sync modes is config.choices.SYNC's flags, and a session's states are its
    constants: a module comparing the setting with a mode's name (``sync == "bsp"``) or a state with a bare
    string is one more place to find when a mode or a state is added."""
    from gensim_distw2v.config.choices import SYNC_MODES
    from gensim_distw2v.protocol.constants import SESSION_STATES

    found = _compared_by_name(SYNC_MODES, "sync")
    assert not found, "decide by config.choices.SYNC[...]'s flags instead: " + "; ".join(found)
    found = _compared_by_name(SESSION_STATES, "state")
    assert not found, "compare with protocol.constants' RUNNING, FAILED, ... instead: " + "; ".join(found)


def _decided_by_text(source):
    """``line: code`` of each test, in an ``except ... as err`` block, of ``str(err)`` / ``repr(err)`` /
    ``err.args`` (a decision on an error's message rather than its type or code)."""
    found = []
    for handler in ast.walk(ast.parse(source)):
        if not isinstance(handler, ast.ExceptHandler) or not handler.name:
            continue
        for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
            if not isinstance(node, ast.Compare):
                continue
            for part in ast.walk(node):
                text_of = (isinstance(part, ast.Call) and isinstance(part.func, ast.Name)
                           and part.func.id in ("str", "repr") and len(part.args) == 1
                           and isinstance(part.args[0], ast.Name) and part.args[0].id == handler.name)
                args_of = (isinstance(part, ast.Attribute) and part.attr == "args"
                           and isinstance(part.value, ast.Name) and part.value.id == handler.name)
                if text_of or args_of:
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
                    break
    return found


@pytest.mark.unit
def test_no_module_decides_by_an_errors_message():
    """Errors are told apart by their type or their ``code`` (protocol.errors); a test of their text breaks
    when a message is reworded, and a peer chooses the text."""
    assert _decided_by_text("try:\n    f()\nexcept OSError as err:\n    if 'hmac' in str(err).lower():\n"
                            "        pass\n") == ["4: 'hmac' in str(err).lower()"]  # the check can fail
    found = [f"{name}:{line}" for name, path in _modules().items() for line in _decided_by_text(open(path).read())]
    assert not found, "decide by the error's class or .code instead: " + "; ".join(found)


@pytest.mark.cluster
def test_versions_is_a_leaf_and_the_members_do_not_load_the_dispatcher():
    modules = _modules()
    assert _imports(modules["gensim_distw2v.versions"], modules) == set()
    code = ("import sys, gensim_distw2v.worker, gensim_distw2v.shard; "
            "print(sorted(m for m in sys.modules if m.startswith(('gensim_distw2v.dispatcher', "
            "'gensim_distw2v.io.statuspage'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"a worker or shard process loads {out.stdout.strip()}"
