"""The built-in distributions' shape: every method plugin depends on the core and at most the
shared drafting library, in its pyproject and in its imports (code, tests and benchmarks)."""

import ast
import re
import tomllib
from pathlib import Path

import pytest

BUILTINS = Path(__file__).resolve().parents[1] / "builtin_methods"
LIBRARY = "specpath-drafting"
DISTRIBUTIONS = sorted(p.parent for p in BUILTINS.glob("*/pyproject.toml"))


def project(directory: Path) -> dict:
    return tomllib.loads((directory / "pyproject.toml").read_text())["project"]


def own_packages(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("specpath_*") if p.is_dir() and not p.name.endswith(".egg-info")}


def imported_specpath_packages(directory: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in directory.rglob("*.py"):
        if ".egg-info" in str(path):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                if top.startswith("specpath_"):
                    found.setdefault(top, set()).add(str(path.relative_to(directory)))
    return found


@pytest.mark.parametrize("directory", DISTRIBUTIONS, ids=lambda d: d.name)
def test_depends_on_the_core_and_at_most_the_drafting_library(directory):
    deps = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0] for d in project(directory).get("dependencies", [])}
    specpath_deps = {d for d in deps if d.startswith("specpath")}
    allowed = {"specpath"} if project(directory)["name"] == LIBRARY else {"specpath", LIBRARY}
    assert "specpath" in specpath_deps and specpath_deps <= allowed, specpath_deps


@pytest.mark.parametrize("directory", DISTRIBUTIONS, ids=lambda d: d.name)
def test_imports_no_other_method_plugin(directory):
    allowed = own_packages(directory) | {"specpath_drafting"}
    foreign = {pkg: files for pkg, files in imported_specpath_packages(directory).items() if pkg not in allowed}
    assert not foreign, f"{directory.name} imports other method plugins: {foreign}"


def test_the_library_is_not_a_method():
    library = BUILTINS / "drafting"
    assert project(library)["name"] == LIBRARY
    assert "specpath.methods" not in project(library).get("entry-points", {})
