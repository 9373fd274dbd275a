#!/usr/bin/env python3
"""Regenerate every generated part of the docs, or check that they are current.

* ``docs/reference/configuration.md`` from the field docstrings (``gen_config_reference.py``);
* the **Status** line of each ``docs/methods/<method>.md`` page and the list in
  ``docs/methods/index.md``, from the entry points that the committed
  ``builtin_methods/*/pyproject.toml`` files declare: a page says a plugin exists only when
  one does.

    python3 scripts/gen_docs.py           # write
    python3 scripts/gen_docs.py --check   # exit 1 if anything is stale (CI)
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_config_reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
METHOD_PAGES = ROOT / "docs" / "methods"
STATUS = re.compile(r"^\*\*Status:\*\* .*$", re.M)
LIST = re.compile(r"(<!-- status-list:start -->\n).*?(<!-- status-list:end -->)", re.S)


def plugin_projects() -> list[Path]:
    """``builtin_methods/*/pyproject.toml`` files, only those committed when this is a git
    checkout (a plugin someone is still writing is not "provided" yet)."""
    import subprocess

    try:
        listed = subprocess.run(["git", "ls-files", "builtin_methods/*/pyproject.toml"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return sorted((ROOT / "builtin_methods").glob("*/pyproject.toml"))
    return sorted(ROOT / name for name in listed)


def builtin_plugins() -> dict[str, tuple[str, str]]:
    """method -> (distribution, folder) for every entry point of a built-in plugin here."""
    found = {}
    for pyproject in plugin_projects():
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        project = data.get("project", {})
        for method in project.get("entry-points", {}).get("specpath.methods", {}):
            found[method] = (project.get("name", "?"), pyproject.parent.name)
    return found


def status_line(method: str, plugins: dict[str, tuple[str, str]]) -> str:
    from specpath.methods import METHOD_DISTRIBUTIONS

    if method in plugins:
        dist, folder = plugins[method]
        return (f"**Status:** provided by the built-in plugin `{dist}` (`builtin_methods/{folder}/`); "
                "see [Benchmarks](../benchmarks.md) for what has been measured.")
    planned = METHOD_DISTRIBUTIONS.get(method)
    where = f" (planned distribution `{planned}`)" if planned else ""
    return (f"**Status:** not implemented yet. No plugin in this repository binds `{method}`{where}, so "
            "resolving it fails at start-up with a one-line error; the description below is the contract a "
            "plugin must meet, not a measured result.")


def method_pages() -> dict[Path, str]:
    """Every method page (and the index) as it should read now."""
    plugins = builtin_plugins()
    out = {}
    for page in sorted(METHOD_PAGES.glob("*.md")):
        if page.name == "index.md":
            continue
        text = page.read_text(encoding="utf-8")
        out[page] = STATUS.sub(lambda _m: status_line(page.stem, plugins), text, count=1)
    index = METHOD_PAGES / "index.md"
    rows = [f"- [{m}]({m}.md): " + (f"`{plugins[m][0]}`" if m in plugins else "not implemented yet")
            for m in sorted(p.stem for p in out)]
    out[index] = LIST.sub(lambda m: m.group(1) + "\n".join(rows) + "\n" + m.group(2), index.read_text(encoding="utf-8"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a generated part is stale")
    args = parser.parse_args(argv)
    failed = False
    pages = method_pages()
    try:
        pages[gen_config_reference.OUTPUT] = gen_config_reference.render()
    except gen_config_reference.MissingDocstring as exc:
        print(f"error: {exc}", file=sys.stderr)
        failed = True
    stale = [p for p, text in pages.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"error: {path.relative_to(ROOT)} is out of date; run python3 scripts/gen_docs.py", file=sys.stderr)
        return 1 if stale or failed else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pages[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
