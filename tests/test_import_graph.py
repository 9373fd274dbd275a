"""The core's modules import each other without a cycle, at load time and at type-check time.

Edges are the imports a module runs when it is loaded (module level, including inside
``try``/``if`` blocks) plus those under ``if TYPE_CHECKING:``; imports inside functions are
deferred on purpose and not edges. Parsed with ``ast``, so nothing is imported there.

Then every module of every distribution is imported for real, each first, in a subprocess: a
load-time cycle across distributions (or one the static graph misses) fails there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import specpath

ROOT = Path(specpath.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements outside function and class bodies (``if``/``try`` blocks included)."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    todo.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return found


def _targets(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    assert not node.level, "the core uses absolute imports"
    names = {f"{node.module}.{alias.name}" for alias in node.names}
    return {n for n in names if n in MODULES} or {node.module}


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges = set()
        for node in _top_level_imports(tree):
            for target in _targets(node):
                if target in MODULES and target != module and not module.startswith(target + "."):
                    edges.add(target)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_type_checking_imports():
    graph = import_graph()
    assert "specpath.config.checkpoint" in graph["specpath.hookspecs"]  # under TYPE_CHECKING
    assert "specpath.registry" in graph["specpath.plugins"]


def test_no_import_cycle_among_core_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# -- every distribution, at load time, for real ------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = sorted({p.parent for p in REPO.glob("*/specpath*/__init__.py")}
                      | {p.parent for p in REPO.glob("builtin_methods/*/specpath_*/__init__.py")}
                      | {p.parent for p in REPO.glob("plugin_template/src/specpath_*/__init__.py")})
"""The top-level package of every distribution in the checkout (core, engine, train, each
method plugin, the template)."""

CYCLE_MARKERS = ("circular import", "partially initialized module")
"""How Python words an ImportError that an import cycle caused."""

ISOLATED_IMPORTS = r'''
import importlib, json, sys, traceback
failures = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0].startswith("specpath")]:
        del sys.modules[loaded]  # each module first, as a fresh interpreter would load it
    try:
        importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - reported, judged by the test
        failures[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failures))
'''


def all_modules() -> list[str]:
    """Every module of every distribution's package (``__main__`` modules run a CLI: left out)."""
    names = []
    for package in PACKAGE_DIRS:
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(package.parent).with_suffix("").parts
            if "__pycache__" in parts or parts[-1] == "__main__":
                continue
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_distribution_is_seen():
    names = {p.name for p in PACKAGE_DIRS}
    assert {"specpath", "specpath_engine", "specpath_train", "specpath_drafting", "specpath_suffix"} <= names
    modules = all_modules()
    assert "specpath_suffix.drafts" in modules and "specpath_engine.model_config" in modules


def test_every_module_imports_first_without_a_cycle():
    """Each module imported as the first of the project's modules in its interpreter (the
    project's modules are dropped between imports; third-party ones stay loaded, for speed):
    an import cycle shows up as an ImportError only for some entry points, so each is one."""
    modules = all_modules()
    failures = isolated_import_failures(modules)
    cycles = {name: error for name, error in failures.items() if any(m in error for m in CYCLE_MARKERS)}
    assert not cycles, "\n".join(f"{name}: {error}" for name, error in cycles.items())
    # anything else that fails is an optional third-party dependency not installed here
    other = {name: error for name, error in failures.items()
             if not (error.startswith("ModuleNotFoundError: No module named '")
                     and not error.split("'")[1].startswith("specpath"))}
    assert not other, other
    assert len(modules) > 100


def isolated_import_failures(modules: list[str], *, path: str | None = None) -> dict[str, str]:
    """``{module: "ErrorType: message"}`` for the modules that fail :data:`ISOLATED_IMPORTS`."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, env.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "-c", ISOLATED_IMPORTS, json.dumps(modules)],
                         capture_output=True, text=True, timeout=900, check=True, env=env)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_load_time_cycle_fails_the_isolated_import(tmp_path):
    package = tmp_path / "specpath_cycle_demo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from specpath_cycle_demo.b import B\nA = 1\n")
    (package / "b.py").write_text("from specpath_cycle_demo.a import A\nB = 2\n")
    failures = isolated_import_failures(["specpath_cycle_demo.a", "specpath_cycle_demo.b"], path=str(tmp_path))
    assert set(failures) == {"specpath_cycle_demo.a", "specpath_cycle_demo.b"}
    assert all(any(m in error for m in CYCLE_MARKERS) for error in failures.values()), failures
