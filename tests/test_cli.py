"""The ``specpath`` command (in-process through ``main(argv)``; one real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specpath import cli

pytestmark = pytest.mark.usefixtures("fake_builtins")


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_methods_json_lists_every_built_in_with_capabilities(capsys, fresh_plugins):
    import core_fakes
    from specpath import register_speculative_method

    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    code, out, _ = run(capsys, "methods", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    required = {"name", "distribution", "installed", "config_class", "uses_target_hidden_states",
                "uses_separate_workspace_lane", "draft_has_own_vocab", "supports_pcp", "num_lookahead_tokens",
                "max_num_new_slots_for_drafting"}
    assert all(required <= set(r) for r in rows.values())
    assert {"ngram", "eagle3", "mtp", "dflash", "dspark", "suffix", "custom_class", "my_eagle3"} <= set(rows)
    assert (rows["dflash"]["num_lookahead_tokens"], rows["draft_model"]["max_num_new_slots_for_drafting"]) == (5, 1)
    assert rows["dspark"]["uses_separate_workspace_lane"] and rows["mtp"]["supports_pcp"]
    assert rows["eagle3"]["config_class"] == "core_fakes:FakeEagle3" and rows["eagle3"]["installed"]
    assert rows["my_eagle3"]["base_method"] == "eagle3" and not rows["my_eagle3"]["builtin"]
    assert rows["suffix"]["installed"] is False and rows["suffix"]["uses_target_hidden_states"] is None
    assert "deepseek_mtp" in rows["mtp"]["aliases"]


def test_methods_table_shows_missing_plugins_and_lossy_modes(capsys, fresh_plugins):
    code, out, _ = run(capsys, "methods")
    assert code == 0
    assert "synthetic (LOSSY)" in out and "fly (LOSSY)" in out and "block (lossless)" in out
    assert "dflash" in out and "FakeDFlash" in out


def test_methods_shows_a_missing_distribution(capsys, monkeypatch):
    from specpath import plugins

    plugins.reset(search_path=[])  # no fakes bound
    code, out, _ = run(capsys, "methods")
    assert code == 0 and "eagle3: not installed: pip install ./builtin_methods/eagle3 from a specpath checkout" in out


def test_plugins_json(capsys):
    code, out, _ = run(capsys, "plugins", "--json")
    assert code == 0
    (record,) = json.loads(out)
    assert record["name"] == "builtin-fakes" and record["status"] == "loaded" and "eagle3" in record["methods"]
    assert set(record) == {"name", "value", "distribution", "version", "status", "methods", "error"}


def test_explain_json_shows_the_resolution_path(capsys, make_checkpoint):
    target = make_checkpoint("target")
    head = make_checkpoint("my-eagle3-head")
    config = json.dumps({"model": head, "num_speculative_tokens": 3})
    code, out, _ = run(capsys, "explain", "--speculative-config", config, "--model", target, "--json")
    assert code == 0
    data = json.loads(out)
    steps = [s["step"] for s in data["steps"]]
    assert steps[0] == "input" and "infer" in steps and "class" in steps and steps[-1] == "result"
    assert data["method"] == "eagle3" and data["speculator"]["config_class"] == "core_fakes:FakeEagle3"
    assert data["speculator"]["num_lookahead_tokens"] == 3 and len(data["hash"]) == 64
    assert data["config"]["num_speculative_tokens"] == 3


def test_explain_text_and_alias_warning(capsys):
    code, out, _ = run(capsys, "explain", "--spec-method", "[ngram]", "--spec-tokens", "4",
                       "--speculative-config", '{"rejection-sample-method": "fly"}')
    assert code == 0
    assert "alias" in out and "verification:   fly (LOSSY)" in out and "LossyVerificationWarning" in out


def test_validate_ok_and_error(capsys):
    code, out, _ = run(capsys, "validate", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}')
    assert (code, out.strip()) == (0, "ok: method=ngram K=2 class=FakeNgram")
    code, out, err = run(capsys, "validate", "--speculative-config", '{"method": "ngram", "prompt_lookup_mx": 2}')
    assert code == 1 and out == ""
    assert err == "specpath: error: speculative_config: unknown key 'prompt_lookup_mx' (did you mean 'prompt_lookup_max'?)\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["validate"],
        ["validate", "--speculative-config", "{nope"],
        ["explain", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}', "--model", "/no/such/dir"],
        ["bogus"],
        ["methods", "--bad-flag"],
    ],
)
def test_every_error_is_one_line_and_exit_1(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 1 and err.count("\n") == 1 and err.startswith("specpath")


def _command_entry_points(monkeypatch, *modules: tuple[str, str]) -> None:
    """``specpath.commands`` holds exactly these (module, distribution) pairs."""
    import importlib
    from importlib import metadata
    from types import SimpleNamespace

    eps = [SimpleNamespace(name=m, value=m, dist=SimpleNamespace(name=d),
                           load=lambda m=m: importlib.import_module(m)) for m, d in modules]
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points",
                        lambda **kw: eps if kw.get("group") == cli.COMMANDS_GROUP else real(**kw))


def test_a_missing_distribution_says_what_to_install(capsys, monkeypatch):
    _command_entry_points(monkeypatch)
    code, _, err = run(capsys, "demo")
    assert code == 1 and err.count("\n") == 1
    assert "specpath demo: error: not available (specpath-engine is not installed: pip install ./engine" in err


def test_a_broken_command_module_says_why(capsys, monkeypatch):
    _command_entry_points(monkeypatch, ("specpath_not_a_module_xyz", "specpath-engine"))
    code, _, err = run(capsys, "demo")
    assert code == 1 and "specpath demo: error: not available" in err and "specpath_not_a_module_xyz" in err


def test_command_modules_can_add_commands(capsys, monkeypatch, tmp_path):
    (tmp_path / "fake_cli_mod.py").write_text(
        "def add_subcommands(sub):\n"
        "    p = sub.add_parser('hello')\n"
        "    p.add_argument('--name', default='x')\n"
        "    p.set_defaults(func=lambda args: print('hello', args.name) or 0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _command_entry_points(monkeypatch, ("fake_cli_mod", "fake-dist"))
    code, out, _ = run(capsys, "hello", "--name", "world")
    assert (code, out) == (0, "hello world\n")
    sys.modules.pop("fake_cli_mod", None)


def test_unexpected_exceptions_become_one_line(capsys, monkeypatch):
    def boom(args):
        raise RuntimeError("kaput\nsecond line")

    monkeypatch.setattr(cli, "cmd_methods", boom)
    code, _, err = run(capsys, "methods")
    assert code == 1 and err == "specpath: error: RuntimeError: kaput second line (SPECPATH_DEBUG=1 for the traceback)\n"


def test_the_installed_console_script(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from specpath.cli import main; sys.exit(main())", "validate",
         "--speculative-config", '{"method": "eagel3"}'],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "did you mean 'eagle3'?" in result.stderr


def test_methods_and_plugins_show_a_broken_plugin(capsys, fake_site):
    fake_site.add("specpath-eagle3", {"eagle3": "fake_broken_eagle3"}, {"fake_broken_eagle3": "import not_here_xyz\n"})
    fake_site.rescan()
    code, out, _ = run(capsys, "methods", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and not rows["eagle3"]["installed"]
    assert rows["eagle3"]["note"] == "plugin specpath-eagle3 is broken: ModuleNotFoundError: No module named 'not_here_xyz'"
    code, out, _ = run(capsys, "plugins")
    assert code == 0 and "broken" in out and "specpath-eagle3" in out and "not_here_xyz" in out


def test_fields_lists_the_five_groups_with_docs(capsys):
    code, out, _ = run(capsys, "fields", "--json")
    rows = json.loads(out)
    assert code == 0 and {r["group"] for r in rows} == {"source", "budget", "overrides", "verification", "special"}
    assert all(r["doc"] for r in rows)
    by_name = {r["name"]: r for r in rows}
    assert by_name["num_speculative_tokens_per_batch_size"]["group"] == "budget"
    assert by_name["dspark_draft_topk"]["method_specific"] and not by_name["model"]["method_specific"]
    assert "custom_method" not in by_name and "target_model_config" not in by_name
    code, out, _ = run(capsys, "fields")
    assert code == 0 and out.startswith("draft source and parallelism:")


def test_python_dash_m():
    result = subprocess.run([sys.executable, "-m", "specpath", "fields", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and json.loads(result.stdout)


def test_explain_says_what_the_draft_length_policy_does(capsys):
    from specpath.cli import main

    assert main(["explain", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("draft length:"))
    assert "adaptive: from measured costs per batch: 0..3 per request and step" in line and "model-free" in line
    config = '{"method": "ngram", "num_speculative_tokens": 3, "draft_length_policy": "fixed"}'
    assert main(["explain", "--speculative-config", config]) == 0
    assert "draft length:   fixed: up to K=3 every step" in capsys.readouterr().out
    config = '{"method": "ngram", "num_speculative_tokens": 3, "draft_pass_cost": 0.5}'
    assert main(["explain", "--speculative-config", config]) == 0
    assert "pinned at 0.5 of a measured plain target step (configured)" in capsys.readouterr().out


def test_train_without_its_distribution_says_what_to_install(capsys, monkeypatch):
    _command_entry_points(monkeypatch)
    code, _, err = run(capsys, "train", "eagle3", "--target", "x", "--out", "y")
    assert code == 1 and err.count("\n") == 1
    assert "specpath train: error: not available (specpath-train is not installed: pip install ./train" in err


def test_an_unknown_command_is_prefixed_once(capsys):
    code, _, err = run(capsys, "bogus")
    assert code == 1 and err.startswith("specpath: error: argument COMMAND: invalid choice: 'bogus'")
    assert err.count("specpath") == 1 and err.count("\n") == 1


def test_every_option_of_every_command_has_help():
    """A flag without help is one a user must guess at (--json, --top-k, --seed, ...)."""
    import argparse

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, p in sub.choices.items():
        if p.prefix_chars == "\0":  # a stand-in for a command whose distribution is missing
            continue
        for action in p._actions:
            if action.option_strings and not action.help:
                missing.append(f"{name} {action.option_strings[-1]}")
    assert missing == []
    run_parser = sub.choices["run"]
    helps = {a.option_strings[-1]: a.help for a in run_parser._actions if a.option_strings}
    assert {"--json", "--top-k", "--top-p", "--seed", "--enable-prefix-caching"} <= set(helps)


def test_explain_model_help_names_every_kind_of_target():
    import argparse

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    (model,) = [a for a in sub.choices["explain"]._actions if "--model" in a.option_strings]
    assert ".gguf file" in model.help and "named model" in model.help and "directory" in model.help


def test_fields_renders_every_type_one_way_and_hides_refused_fields(capsys):
    code, out, _ = run(capsys, "fields")
    assert code == 0
    assert "<class" not in out and "typing." not in out and "Optional[" not in out
    assert "  disable_padded_drafter_batch: bool = False" in out
    assert "  parallel_drafting: bool | None\n" in out
    assert "  draft_lm_head_quantization: Literal['fp8', 'nvfp4'] | None" in out
    assert "  model_free_drafter: Mapping[str, Any] | None" in out
    assert "  draft_load_config: LoadConfig | None" in out
    names = [line.split(":")[0].strip() for line in out.splitlines() if line.startswith("  ") and ":" in line]
    assert "tensor_parallel_size" not in names and "draft_tensor_parallel_size" in names
    code, out, _ = run(capsys, "fields", "--json")
    assert "tensor_parallel_size" not in {r["name"] for r in json.loads(out)}


def test_methods_columns_are_explained_and_match_the_docs(capsys, fresh_plugins):
    from pathlib import Path

    code, out, _ = run(capsys, "methods")
    assert code == 0
    header = out.splitlines()[0]
    page = (Path(__file__).resolve().parents[1] / "docs" / "methods" / "index.md").read_text()
    doc_header = next(line for line in page.splitlines() if line.startswith("| method | config class"))
    doc_columns = [c.strip() for c in doc_header.strip("|").split("|")]
    for head, key, meaning in cli.METHOD_COLUMNS:
        assert head in header and head in doc_columns  # the same names in both places
        assert f"  {head}: {meaning} ({key})" in out  # and each explained under the table
    for old in ("own lane", "tail drop"):
        assert old not in header


def test_explain_prints_a_config_classes_notes(capsys, fresh_plugins):
    import attrs
    import core_fakes
    from specpath import register_speculative_method

    @attrs.frozen(kw_only=True)
    class Noted(core_fakes.MyNgram):
        notes = ("state outlives a call",)

    register_speculative_method("noted_ngram", Noted)
    code, out, _ = run(capsys, "explain", "--speculative-config", '{"method": "noted_ngram", "num_speculative_tokens": 2}')
    assert code == 0 and "note:           state outlives a call" in out
    code, out, _ = run(capsys, "explain", "--json", "--speculative-config", '{"method": "noted_ngram", "num_speculative_tokens": 2}')
    assert json.loads(out)["speculator"]["notes"] == ["state outlives a call"]
