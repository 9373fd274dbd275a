"""The docs site: generated pages are current, the strict build passes, and hand-written pages
do not drift from the code they quote."""

import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "scripts"))

import gen_config_reference  # noqa: E402
import mkdocs_hooks  # noqa: E402


def test_configuration_reference_is_current():
    assert gen_config_reference.main(["--check"]) == 0, "run: python3 scripts/gen_config_reference.py"


def test_mkdocs_strict_build(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    assert (site / "reference" / "configuration" / "index.html").exists()
    # Method pages say which plugins exist, as the committed pyprojects declare them.
    plugins = mkdocs_hooks.builtin_plugins()
    for page in (DOCS / "methods").glob("*.md"):
        if page.stem == "index":
            continue
        html = (site / "methods" / page.stem / "index.html").read_text()
        if page.stem in plugins:
            assert f"provided by the built-in plugin <code>{plugins[page.stem][0]}</code>" in html, page.stem
        else:
            assert "not implemented yet" in html, page.stem
    index = (site / "methods" / "index.html").read_text()
    listed = re.findall(r'<li><a href="[^"]+">([a-z0-9_]+)</a>: (.*?)</li>', index)
    assert sorted(m for m, _ in listed) == sorted(p.stem for p in (DOCS / "methods").glob("*.md") if p.stem != "index")
    for method, status in listed:
        assert status == (f"<code>{plugins[method][0]}</code>" if method in plugins else "not implemented yet"), method


def nav_pages(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from nav_pages(value)
    elif isinstance(node, list):
        for item in node:
            yield from nav_pages(item)


def test_every_builtin_method_has_a_page_in_the_nav():
    from specpath.methods import METHOD_DISTRIBUTIONS

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = set(nav_pages(config["nav"]))
    for method, dist in METHOD_DISTRIBUTIONS.items():
        if dist is not None:
            assert f"methods/{method}.md" in pages, f"no page for {method}"
    for name in ("getting-started.md", "concepts.md", "integrating.md", "benchmarks.md",
                 "plugins/writing-a-method-plugin.md", "reference/configuration.md"):
        assert name in pages


def test_options_named_on_method_pages_are_config_fields():
    from specpath.config.speculative import SpeculativeConfig

    fields = {f.name for f in attrs.fields(SpeculativeConfig)}
    for page in (DOCS / "methods").glob("*.md"):
        text = page.read_text()
        if "## Options" not in text:
            continue
        section = text.split("## Options", 1)[1].split("\n## ", 1)[0]
        names = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
        assert names, f"{page.name}: empty options table"
        unknown = sorted(set(names) - fields)
        assert not unknown, f"{page.name} documents options that SpeculativeConfig does not have: {unknown}"


def quoted_excerpts():
    for page in DOCS.rglob("*.md"):
        for block in re.findall(r"```[a-z]*\n(.*?)```", page.read_text(), re.S):
            first, _, body = block.partition("\n")
            match = re.match(r"# file: (\S+)$", first)
            if match:
                yield pytest.param(page, match.group(1), body, id=f"{page.name}:{match.group(1)}")


@pytest.mark.parametrize(("page", "path", "excerpt"), list(quoted_excerpts()))
def test_quoted_code_matches_the_file_it_quotes(page, path, excerpt):
    source = (ROOT / path).read_text()
    assert excerpt.rstrip("\n") in source, f"{page.name} quotes {path}, which no longer reads like that"


def test_every_kit_test_is_documented():
    from specpath_engine.testing import SpeculatorConformance

    page = (DOCS / "plugins" / "conformance-kit.md").read_text()
    missing = [n for n in dir(SpeculatorConformance) if n.startswith("test_") and f"`{n}`" not in page]
    assert not missing, f"docs/plugins/conformance-kit.md does not describe {missing}"


def test_a_nav_entry_for_a_page_not_written_yet_is_left_out(tmp_path):
    (tmp_path / "a.md").write_text("# a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# b")
    nav = [{"A": "a.md"}, {"Later": "later.md"}, {"Group": [{"B": "sub/b.md"}, {"C": "sub/c.md"}]},
           {"Empty": [{"D": "d.md"}]}, {"Site": "https://example.org/x.md"}]
    assert mkdocs_hooks._written_pages_only(nav, tmp_path) == [
        {"A": "a.md"}, {"Group": [{"B": "sub/b.md"}]}, {"Site": "https://example.org/x.md"}]


def test_benchmarks_page_is_rendered_from_the_results():
    """docs/benchmarks.md is exactly what scripts/render_benchmarks.py makes of docs/results/*.json."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_benchmarks.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
