"""The distributions' shape: the core depends on attrs, cattrs, pluggy and pyyaml and imports no
other distribution and no torch; the engine imports no method plugin; no runtime package imports
the training distribution; every method plugin depends on the core and at most the shared
drafting library and the engine, in its pyproject and in its imports (code, tests, benchmarks)."""

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILTINS = ROOT / "builtin_methods"
LIBRARY = "specpath-drafting"
ENGINE = "specpath-engine"
DISTRIBUTIONS = sorted(p.parent for p in BUILTINS.glob("*/pyproject.toml"))


def project(directory: Path) -> dict:
    return tomllib.loads((directory / "pyproject.toml").read_text())["project"]


def own_packages(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("specpath_*") if p.is_dir() and not p.name.endswith(".egg-info")}


def imported_packages(directory: Path, *, runtime_only: bool = False) -> dict[str, set[str]]:
    """Top-level package -> the files under ``directory`` that import it (at any depth)."""
    found: dict[str, set[str]] = {}
    for path in directory.rglob("*.py"):
        rel = path.relative_to(directory)
        if ".egg-info" in str(path) or (runtime_only and {"tests", "benchmarks", "scripts"} & set(rel.parts)):
            continue
        for node in _run_time_nodes(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(rel))
    return found


def _run_time_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (annotations only, never imported)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            yield from (n for child in node.orelse for n in [child, *_run_time_nodes(child)])
            continue
        yield node
        yield from _run_time_nodes(node)


def imported_specpath_packages(directory: Path) -> dict[str, set[str]]:
    return {k: v for k, v in imported_packages(directory).items() if k.startswith("specpath_")}


def test_the_core_depends_on_four_light_libraries():
    deps = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0] for d in project(ROOT)["dependencies"]}
    assert project(ROOT)["name"] == "specpath" and deps == {"attrs", "cattrs", "pluggy", "pyyaml"}


def test_the_core_imports_no_other_distribution_and_no_torch():
    imported = imported_packages(ROOT / "core" / "specpath")
    foreign = {k: v for k, v in imported.items() if k.startswith("specpath_") or k in {"torch", "triton", "numpy"}}
    assert not foreign, foreign


def test_the_engine_imports_no_method_plugin_and_no_training():
    assert project(ROOT / "engine")["name"] == ENGINE
    foreign = {k: v for k, v in imported_specpath_packages(ROOT / "engine").items() if k != "specpath_engine"}
    assert not foreign, foreign


@pytest.mark.parametrize("directory", [ROOT / "core", ROOT / "engine", *DISTRIBUTIONS], ids=lambda d: d.name)
def test_no_runtime_package_imports_the_training_distribution(directory):
    users = imported_packages(directory, runtime_only=True).get("specpath_train")
    assert not users, users


@pytest.mark.parametrize("directory", DISTRIBUTIONS, ids=lambda d: d.name)
def test_depends_on_the_core_and_at_most_the_drafting_library_and_the_engine(directory):
    deps = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0] for d in project(directory).get("dependencies", [])}
    specpath_deps = {d for d in deps if d.startswith("specpath")}
    allowed = {"specpath", ENGINE} if project(directory)["name"] == LIBRARY else {"specpath", LIBRARY, ENGINE}
    assert "specpath" in specpath_deps and specpath_deps <= allowed, specpath_deps


@pytest.mark.parametrize("directory", DISTRIBUTIONS, ids=lambda d: d.name)
def test_imports_no_other_method_plugin(directory):
    allowed = own_packages(directory) | {"specpath_drafting", "specpath_engine"}
    foreign = {pkg: files for pkg, files in imported_specpath_packages(directory).items() if pkg not in allowed}
    assert not foreign, f"{directory.name} imports other method plugins: {foreign}"


def test_the_library_is_not_a_method():
    library = BUILTINS / "drafting"
    assert project(library)["name"] == LIBRARY
    assert "specpath.methods" not in project(library).get("entry-points", {})


MACHINE_PATHS = re.compile(r"(?<![\w.~])/(?:work|root|home|tmp)/")
SHIPPED_TEXT = ("*.py", "*.sh", "*.toml", "*.json", "*.md", "*.c", "*.h", "*.yaml")


def test_no_machine_paths_in_shipped_files():
    """No default, script or shipped checkpoint names a directory of the machine that made it."""
    roots = [ROOT / "core", ROOT / "engine", ROOT / "train", ROOT / "benchmarks", ROOT / "scripts",
             ROOT / "plugin_template", *BUILTINS.glob("*")]
    hits = []
    for root in roots:
        for pattern in SHIPPED_TEXT:
            for path in root.rglob(pattern):
                if ".egg-info" in str(path) or "__pycache__" in str(path):
                    continue
                text = path.read_text(errors="replace")
                hits += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in MACHINE_PATHS.finditer(text)]
    assert not hits, hits[:10]
