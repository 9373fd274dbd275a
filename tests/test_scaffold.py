"""specpath new-plugin: the template is copied with every name replaced."""

import argparse
import ast

import pytest

from specpath import scaffold


def test_names_derive_from_one_method_name():
    names = scaffold.plugin_names("my-method")
    assert names == {
        "specpath-freqgram": "specpath-my-method",
        "Freqgram": "MyMethod",
        "FREQGRAM": "MY_METHOD",
        "freqgram": "my_method",
    }
    assert scaffold.plugin_names("my_method") == names


def test_substitution_never_rewrites_a_replacement():
    names = scaffold.plugin_names("freq")  # "freq" is a prefix of the placeholder
    text = "specpath-freqgram specpath_freqgram FreqgramConfig FREQGRAM_X freqgram"
    assert scaffold.substitute(text, names) == "specpath-freq specpath_freq FreqConfig FREQ_X freq"


@pytest.mark.parametrize(
    ("name", "problem"),
    [("My-Method", "invalid"), ("1abc", "invalid"), ("a--b", "invalid"), ("", "invalid"),
     ("class", "keyword"), ("freqgram", "template's own name"), ("eagle3", "built-in")],
)
def test_bad_names_are_refused_in_one_line(name, problem):
    with pytest.raises(scaffold.ScaffoldError, match=problem) as info:
        scaffold.plugin_names(name)
    assert "\n" not in str(info.value)


def test_generated_plugin_has_no_trace_of_the_template(tmp_path):
    target = scaffold.new_plugin("tok-stats", tmp_path)
    assert target == tmp_path / "specpath-tok-stats"
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert "pyproject.toml" in files and "README.md" in files
    assert "src/specpath_tok_stats/hooks.py" in files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    for path in target.rglob("*"):
        assert "freqgram" not in path.as_posix().lower()
        if path.is_file():
            text = path.read_text()
            assert "freqgram" not in text.lower(), f"{path} still names the template"
            if path.suffix == ".py":
                ast.parse(text, filename=str(path))
    pyproject = (target / "pyproject.toml").read_text()
    assert 'name = "specpath-tok-stats"' in pyproject
    assert 'tok_stats = "specpath_tok_stats.hooks"' in pyproject


def test_existing_destination_is_refused(tmp_path):
    scaffold.new_plugin("tok-stats", tmp_path)
    with pytest.raises(scaffold.ScaffoldError, match="already exists"):
        scaffold.new_plugin("tok-stats", tmp_path)


def test_command_line_entry(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    scaffold.add_arguments(parser)
    assert scaffold.main(parser.parse_args(["my-method", "--dir", str(tmp_path)])) == 0
    out = capsys.readouterr().out
    assert "specpath-my-method" in out
    (hint,) = [line for line in out.splitlines() if line.startswith("next: ")]
    import shlex

    words = shlex.split(hint.removeprefix("next: "))
    assert words[:4] == ["pip", "install", "-e", f"{tmp_path / 'specpath-my-method'}[test]"]  # the extra, quoted for the shell
    assert words[4:7] == ["&&", "python", "-m"]
    import tomllib

    test_extra = tomllib.loads((tmp_path / "specpath-my-method" / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["test"]
    assert any(r.startswith("pytest") for r in test_extra) and any(r.startswith("specpath-engine") for r in test_extra)
    assert scaffold.main(parser.parse_args(["Bad Name", "--dir", str(tmp_path)])) == 1
    assert capsys.readouterr().err.startswith("specpath new-plugin: error: plugin name 'Bad Name' is invalid")


def test_the_template_is_the_example_plugin_and_its_copies_are_not(tmp_path):
    template = (scaffold.template_dir() / "src" / "specpath_freqgram" / "config.py").read_text()
    assert "    example_plugin = True\n" in template
    out = scaffold.new_plugin("my-method", tmp_path)
    config = (out / "src" / "specpath_my_method" / "config.py").read_text()
    assert "    example_plugin = False\n" in config and "example_plugin = True" not in config
