"""Make a source tree's distributions discoverable without installing them: for each
``pyproject.toml`` under the tree, a ``NAME-VERSION.dist-info`` (METADATA and entry_points.txt)
in SITE. A GPU machine runs specpath from a copy of the tree on PYTHONPATH, with no package
index and no build backend to trust, but the methods and CLI subcommands are found through
entry points, so their metadata must exist.

    python3 train/gpu/install_tree.py SITE [TREE]
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def write_dist_info(pyproject: Path, site: Path) -> str:
    project = tomllib.loads(pyproject.read_text())["project"]
    name, version = project["name"], project.get("version", "0")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    groups = dict(project.get("entry-points", {}))
    if project.get("scripts"):
        groups["console_scripts"] = project["scripts"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n" for group, points in groups.items()))
    return name


def main(argv: list[str]) -> int:
    site = Path(argv[0])
    tree = Path(argv[1]) if len(argv) > 1 else Path(".")
    names = [write_dist_info(p, site) for p in sorted(tree.glob("**/pyproject.toml"))
             if "build" not in p.parts and not any(part.startswith(".") for part in p.parts)]
    print(f"{len(names)} distributions: {' '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
