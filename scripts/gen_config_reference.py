#!/usr/bin/env python3
"""Generate docs/reference/configuration.md from the docstrings where fields are declared.

The reference is never written by hand: every field of ``SpeculativeConfig`` and every
capability of ``SpeculatorConfig`` is documented by the string literal that follows its
declaration in the source. attrs gives the authoritative field list, order and defaults; the
source (read with ``ast``) gives the annotation as written and the docstring. A field without
a docstring is an error, so the reference cannot silently fall behind the code.

    python3 scripts/gen_config_reference.py           # write the page
    python3 scripts/gen_config_reference.py --check   # exit 1 if the page is out of date
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import textwrap
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "reference" / "configuration.md"


class MissingDocstring(Exception):
    pass


def _class_node(cls: type) -> ast.ClassDef:
    source = Path(inspect.getsourcefile(cls)).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return node
    raise LookupError(f"class {cls.__name__} not found in {inspect.getsourcefile(cls)}")


def _declarations(cls: type) -> dict[str, tuple[ast.AnnAssign, str | None]]:
    """name -> (declaration, docstring) for annotated names in ``cls`` and its bases' sources."""
    found: dict[str, tuple[ast.AnnAssign, str | None]] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not klass.__module__.startswith("specpath"):
            continue
        body = _class_node(klass).body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                doc = None
                nxt = body[i + 1] if i + 1 < len(body) else None
                if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                    doc = inspect.cleandoc(nxt.value.value)
                found[node.target.id] = (node, doc)
    return found


def _default(field: attrs.Attribute) -> str:
    default = field.default
    if default is attrs.NOTHING:
        return "required"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        factory = default.factory
        return f"`{getattr(factory, '__name__', repr(factory))}()`"
    return f"`{default!r}`"


def rst_to_markdown(text: str) -> str:
    """Docstrings use reST roles and literals; the site is Markdown."""
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: f"`{m.group(1).split('.')[-1] if m.group(0).count('~') else m.group(1)}`", text)
    return text.replace("``", "`")


def _entry(name: str, annotation: str, default: str, doc: str, level: str = "###") -> list[str]:
    """One field: a heading, its type and default, its docstring."""
    return [f"{level} `{name}`", "", f"*{annotation}* · default {default}" if default else f"*{annotation}*",
            "", doc, ""]


GROUP_TITLES = {
    "source": "Draft source and parallelism",
    "budget": "Budget and dynamic speculation",
    "overrides": "Draft-side overrides",
    "verification": "Verification",
    "special": "Special modes and method-specific options",
    None: "Resolved, read-only",
}
KIND_NOTES = {"derived": " · set during resolution, not an input", "injected": " · injected from the target, not an input"}


def document_fields(cls: type) -> list[str]:
    """Every attrs field of ``cls``, grouped by its ``group`` metadata, in declaration order.

    The text is the field's docstring: ``metadata["doc"]`` where the field is declared with
    one, else the string literal that follows the declaration.
    """
    decls = _declarations(cls)
    groups: dict[object, list[str]] = {}
    missing = []
    for field in attrs.fields(cls):
        node, literal = decls.get(field.name, (None, None))
        doc = field.metadata.get("doc") or literal
        if not doc:
            missing.append(field.name)
            continue
        annotation = ast.unparse(node.annotation) if node is not None else str(field.type)
        group = field.metadata.get("group") if field.init else None
        note = KIND_NOTES.get(field.metadata.get("kind"), "")
        default = (_default(field) + note) if field.init else "none (computed)"
        groups.setdefault(group, []).extend(_entry(field.name, f"`{annotation}`", default, doc))
    if missing:
        raise MissingDocstring(f"{cls.__name__}: fields without a docstring: {', '.join(missing)}")
    lines: list[str] = []
    for group, entries in groups.items():
        lines += [f"## {GROUP_TITLES.get(group, str(group))}", ""] + entries
    return lines


def document_capabilities(cls: type) -> list[str]:
    """ClassVar capability flags and properties of ``cls`` (a SpeculatorConfig base)."""
    decls = _declarations(cls)
    lines: list[str] = ["### Class-level capabilities", ""]
    missing = []
    for name, (node, doc) in decls.items():
        annotation = ast.unparse(node.annotation)
        if not annotation.startswith(("ClassVar", "typing.ClassVar")):
            continue
        if not doc:
            missing.append(name)
            continue
        value = ast.unparse(node.value) if node.value is not None else "unset"
        lines += _entry(name, f"`{annotation}`", f"`{value}`", doc, level="####")
    lines += ["### Properties (depend on the resolved fields)", ""]
    for name, member in inspect.getmembers(cls, lambda m: isinstance(m, property)):
        if name.startswith("_"):
            continue
        doc = inspect.getdoc(member)
        if not doc:
            missing.append(name)
            continue
        lines += [f"#### `{name}`", "", doc, ""]
    lines += ["### Class hooks", ""] + _module_section(cls, "How the class hooks change the configuration")
    if missing:
        raise MissingDocstring(f"{cls.__name__}: members without a docstring: {', '.join(missing)}")
    return lines


def _module_section(cls: type, title: str) -> list[str]:
    """A titled section of the module docstring where ``cls`` is declared (rST underline)."""
    doc = inspect.getdoc(sys.modules[cls.__module__]) or ""
    lines = doc.splitlines()
    try:
        start = lines.index(title) + 2  # skip the title and its underline
    except ValueError:
        raise MissingDocstring(f"{cls.__module__}: no section {title!r} in the module docstring") from None
    body = []
    for i in range(start, len(lines)):
        if i + 1 < len(lines) and lines[i + 1] and set(lines[i + 1]) == {"-"}:
            break  # the next section
        body.append(lines[i])
    text = "\n".join(body).strip().replace("::\n", ":\n")
    return [text, ""]


def render() -> str:
    from specpath.config.speculative import SpeculativeConfig
    from specpath.config.speculator import SpeculatorConfig

    head = [
        "<!-- Generated by scripts/gen_config_reference.py from the field docstrings; do not edit. -->",
        "",
        "# Configuration reference",
        "",
        "Everything on this page is generated from the docstrings written where each field is",
        "declared (`core/specpath/config/`). Pass these fields as `--speculative-config` JSON,",
        "YAML (`@file.yaml`) or keyword arguments; unknown keys, wrong types and out-of-range",
        "values are refused at start-up with a one-line `SpeculativeConfigError`.",
        "",
        textwrap.dedent(inspect.getdoc(SpeculativeConfig) or "").strip(),
        "",
    ]
    body = document_fields(SpeculativeConfig)
    spec = [
        "## The capability contract: `SpeculatorConfig`",
        "",
        textwrap.dedent(inspect.getdoc(SpeculatorConfig) or "").strip(),
        "",
    ] + document_capabilities(SpeculatorConfig)
    text = rst_to_markdown("\n".join(head + body + spec))
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed page is stale")
    args = parser.parse_args(argv)
    try:
        text = render()
    except MissingDocstring as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"error: {OUTPUT.relative_to(ROOT)} is out of date; run scripts/gen_config_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
