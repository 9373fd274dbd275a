"""The core's modules import each other without a cycle, at load time and at type-check time.

Edges are the imports a module runs when it is loaded (module level, including inside
``try``/``if`` blocks) plus those under ``if TYPE_CHECKING:``; imports inside functions are
deferred on purpose and not edges. Parsed with ``ast``, so nothing is imported here.
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
