"""mkdocs hooks: facts that change with the repository are filled in when the site is built.

* Each method page carries a ``**Status:**`` line and ``docs/methods/index.md`` a status list;
  both are written here from the entry points that the committed
  ``builtin_methods/*/pyproject.toml`` files declare, so a page says a plugin exists only when
  one does, and nobody has to remember to regenerate anything when a plugin lands.
* The nav may name a page another area has not written yet (e.g. ``default-model.md``): such
  an entry is left out of the build, with a note in the log, instead of failing it.
"""

from __future__ import annotations

import logging
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("mkdocs.hooks.specpath")
STATUS = re.compile(r"^\*\*Status:\*\*.*$", re.M)
LIST = re.compile(r"(<!-- status-list:start -->\n).*?(<!-- status-list:end -->)", re.S)
METHODS_DIR = "methods/"


def plugin_projects() -> list[Path]:
    """``builtin_methods/*/pyproject.toml``: the committed ones in a git checkout (a plugin
    someone is still writing is not "provided" yet), else every one on disk."""
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
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
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


def status_list(methods: list[str], plugins: dict[str, tuple[str, str]]) -> str:
    return "\n".join(f"- [{m}]({m}.md): " + (f"`{plugins[m][0]}`" if m in plugins else "not implemented yet")
                     for m in sorted(methods))


def _written_pages_only(nav, docs_dir: Path):
    """``nav`` without the entries whose Markdown file does not exist yet."""
    if isinstance(nav, list):
        kept = [_written_pages_only(item, docs_dir) for item in nav]
        return [item for item in kept if item not in (None, [], {})]
    if isinstance(nav, dict):
        kept = {title: _written_pages_only(target, docs_dir) for title, target in nav.items()}
        return {title: target for title, target in kept.items() if target not in (None, [], {})}
    if isinstance(nav, str) and nav.endswith(".md") and "://" not in nav and not (docs_dir / nav).exists():
        log.info("nav: %s is not written yet; left out of this build", nav)
        return None
    return nav


def on_config(config):
    config["nav"] = _written_pages_only(config["nav"], Path(config["docs_dir"]))
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:
    src = page.file.src_uri
    if not src.startswith(METHODS_DIR):
        return markdown
    plugins = builtin_plugins()
    if src == METHODS_DIR + "index.md":
        methods = [f.src_uri[len(METHODS_DIR):-3] for f in files
                   if f.src_uri.startswith(METHODS_DIR) and f.src_uri.endswith(".md") and not f.src_uri.endswith("index.md")]
        return LIST.sub(lambda m: m.group(1) + status_list(methods, plugins) + "\n" + m.group(2), markdown)
    method = src[len(METHODS_DIR):-3]
    return STATUS.sub(lambda _m: status_line(method, plugins), markdown, count=1)
