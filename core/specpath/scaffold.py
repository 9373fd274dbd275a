"""``specpath new-plugin NAME``: copy the plugin template with every name replaced.

The template (``plugin_template/`` in the repository, shipped in the wheel as
``specpath/templates/plugin_template``) is a working plugin whose names all derive from one
placeholder method, ``freqgram``. Scaffolding is a plain copy plus four string
substitutions, applied to file contents and to file and folder names:

===================  =====================  ============================
in the template      for ``NAME=my-method``  what it names
===================  =====================  ============================
``specpath-freqgram`` ``specpath-my-method``  the distribution
``freqgram``          ``my_method``           method, package suffix, modules
``Freqgram``          ``MyMethod``            class names
``FREQGRAM``          ``MY_METHOD``           constants, environment variables
===================  =====================  ============================

Only the standard library is imported, so the CLI can build its parser cheaply.
"""

from __future__ import annotations

import argparse
import keyword
import re
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path

PLACEHOLDER = "freqgram"
"""The method name the template is written for; every derived name starts from it."""

_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*$")
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis", "build", "dist", ".venv"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".egg-info")


class ScaffoldError(ValueError):
    """A bad plugin name or destination; the message is one line for the user."""


def plugin_names(name: str) -> dict[str, str]:
    """The substitutions for ``name`` (``my-method`` or ``my_method``), longest key first."""
    if not _NAME_RE.match(name):
        raise ScaffoldError(
            f"plugin name {name!r} is invalid: use lower-case letters, digits, '-' or '_', "
            "starting with a letter (e.g. 'my-method')"
        )
    method = name.replace("-", "_")
    if keyword.iskeyword(method):
        raise ScaffoldError(f"plugin name {name!r} is a Python keyword; pick another")
    if method == PLACEHOLDER:
        raise ScaffoldError(f"plugin name {name!r} is the template's own name; pick another")
    _refuse_builtin(method)
    words = method.split("_")
    return {
        f"specpath-{PLACEHOLDER}": "specpath-" + "-".join(words),
        PLACEHOLDER.capitalize(): "".join(w.capitalize() for w in words),
        PLACEHOLDER.upper(): method.upper(),
        PLACEHOLDER: method,
    }


def _refuse_builtin(method: str) -> None:
    """Built-in method names are bound by their own plugins; a third party must pick another."""
    try:
        from specpath.methods import BUILTIN_METHODS  # light module: no torch
    except ImportError:  # the core is older or still being assembled: nothing to compare with
        return
    if method in BUILTIN_METHODS:
        raise ScaffoldError(
            f"plugin name {method!r} is a built-in speculative method; third-party plugins "
            "register a new name (e.g. 'my_" + method + "')"
        )


def template_dir() -> Path:
    """The template to copy: the packaged copy, or the repository's ``plugin_template/``."""
    packaged = resources.files("specpath") / "templates" / "plugin_template"
    if packaged.is_dir():
        return Path(str(packaged))
    in_repo = Path(__file__).resolve().parents[2] / "plugin_template"
    if in_repo.is_dir():
        return in_repo
    raise ScaffoldError("the plugin template is missing from this specpath installation")


_NOT_AN_EXAMPLE = {"example_plugin = True": "example_plugin = False"}
"""The template's method is labelled the example plugin; a plugin made from it is not."""


def substitute(text: str, names: dict[str, str]) -> str:
    """Replace every placeholder in one pass, so a replacement is never replaced again."""
    pattern = re.compile("|".join(re.escape(k) for k in names))
    return pattern.sub(lambda m: names[m.group(0)], text)


def _copied(path: Path) -> bool:
    return not (set(path.parts) & _SKIP_DIRS or path.name.endswith(_SKIP_SUFFIXES)
                or any(p.endswith(".egg-info") for p in path.parts))


def new_plugin(name: str, dest_dir: str | Path = ".") -> Path:
    """Write a new plugin named ``name`` into ``dest_dir``; return the plugin's folder."""
    names = plugin_names(name)
    source = template_dir()
    target = Path(dest_dir) / names[f"specpath-{PLACEHOLDER}"]
    if target.exists():
        raise ScaffoldError(f"{target} already exists; choose another --dir or name")
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if not _copied(rel) or path.is_dir():
            continue
        out = target / substitute(str(rel), names)
        out.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        try:
            out.write_text(substitute(data.decode("utf-8"), {**names, **_NOT_AN_EXAMPLE}), encoding="utf-8")
        except UnicodeDecodeError:  # a binary asset: copy as is
            out.write_bytes(data)
        shutil.copymode(path, out)
    return target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``specpath new-plugin``."""
    parser.add_argument("name", help="method name of the new plugin, e.g. my-method or my_method")
    parser.add_argument("--dir", default=".", help="folder to create the plugin in (default: .)")


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``new-plugin`` to the ``specpath`` command (see :mod:`specpath.cli`)."""
    parser = subparsers.add_parser(
        "new-plugin",
        help="create a method plugin from the template, every name replaced",
        description="Copy the plugin template (a working, tested method plugin) into DIR/specpath-NAME "
        "with its distribution, package, method and class names derived from NAME.",
    )
    add_arguments(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run ``specpath new-plugin``; 0 on success, 1 with a one-line error."""
    try:
        target = new_plugin(args.name, args.dir)
    except ScaffoldError as exc:
        print(f"specpath new-plugin: error: {exc}", file=sys.stderr)
        return 1
    names = plugin_names(args.name)
    print(f"created {target}")
    print(f"  distribution {names['specpath-' + PLACEHOLDER]}, package specpath_{names[PLACEHOLDER]}, "
          f"method {names[PLACEHOLDER]!r}")
    # the [test] extra brings pytest and the engine's conformance kit, which a wheel-only venv lacks
    print(f"next: pip install -e {shlex.quote(f'{target}[test]')} && python -m pytest {shlex.quote(f'{target}/tests')}")
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="specpath new-plugin", description=__doc__.splitlines()[0])
    add_arguments(_parser)
    sys.exit(main(_parser.parse_args()))
