"""specpath demo's report of where a method's greedy output parts from the baseline's."""

import torch

from specpath_engine.cli_run import _divergence_margins, _identity_cell


class CountingModel:
    """Logits whose top-2 gap is the prefix length / 10; counts its passes."""

    def __init__(self):
        self.calls = 0

    def forward_batch(self, ids, *, last_only=False):
        self.calls += 1
        logits = torch.zeros(1, 1, 8)
        logits[0, 0, 3] = ids.shape[-1] / 10
        return logits


def test_margins_are_taken_where_each_prompt_parts_once_per_prefix():
    model = CountingModel()
    tokens = {"baseline": [[1, 2, 3], [4, 5]], "a": [[1, 9, 9], [4, 5]], "b": [[1, 7], [4, 5, 6]]}
    got = _divergence_margins(model, [[0, 0], [0]], tokens)
    assert got["baseline"] == [] and got["a"] == [{"prompt": 0, "token": 1, "margin": 0.30000001192092896}]
    assert [(m["prompt"], m["token"]) for m in got["b"]] == [(0, 1)]  # a longer output than the baseline's is not a divergence
    assert model.calls == 1  # a and b part at the same prefix: one pass


def test_the_identity_cell_names_the_margins():
    row = {"greedy_identical": False, "num_prompts": 6, "identical_prompts": 4,
           "divergence_margins": [{"prompt": 1, "token": 9, "margin": 0.0625}, {"prompt": 4, "token": 30, "margin": 0.0}]}
    assert _identity_cell(row) == "NO (2/6 differ; top-2 margin 0.06 0.00)"
    assert _identity_cell({**row, "greedy_identical": True}) == "yes"
    assert _identity_cell({**row, "divergence_margins": []}) == "NO (2/6 differ)"


def test_a_failing_demo_erases_its_progress_bar_before_the_error(capsys, monkeypatch):
    from specpath import cli
    from specpath_engine import harness

    def compare(runs, *, progress, **kw):
        progress("baseline")
        progress("ngram")
        raise RuntimeError("boom")

    monkeypatch.setattr(harness, "compare", compare)
    assert cli.main(["demo", "--model", "embedded", "--methods", "ngram"]) == 1
    err = capsys.readouterr().err
    (line,) = [line for line in err.split("\n") if "boom" in line]
    shown = line.split("\r")[-1]  # what a terminal shows: the bar is overwritten by blanks, then the error
    assert shown.startswith("specpath: error: RuntimeError: boom") and "specpath demo:" not in shown
    assert "\r" in line  # the bar was drawn and then cleared


def test_run_llm_and_demo_share_the_default_model():
    import argparse

    from specpath_engine.cli_run import _threads, demo_target
    from specpath_engine.modeling.named_models import embedded_model_path, resolve_model_path

    model, _ = demo_target(None)
    assert model is None and resolve_model_path(model) == embedded_model_path()  # LLM(None) and run's default
    assert _threads(argparse.Namespace(threads=None, model=model)) is None  # LLM chooses for the model:
    from specpath.config.model import load_hf_config
    from specpath_engine.llm import _is_small
    from specpath_engine.threads import machine_threads

    small = _is_small(load_hf_config(str(embedded_model_path())))
    assert small and machine_threads(None, small_model=small).num_threads == 1  # one thread for the embedded one
    assert demo_target("smollm2-135m") == ("smollm2-135m", None)


def test_run_chat_on_a_model_without_a_template_says_what_to_do(capsys):
    from specpath import cli

    assert cli.main(["run", "--chat", "--prompt", "hi", "--max-tokens", "2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("specpath run: error: --chat: the embedded model has no chat template")
    assert "drop --chat" in err and "--model smollm2-135m" in err and "generate()" not in err


def test_the_getting_started_example_reads_as_code():
    """The documented first `run` on the embedded model prints code, not a line of spaces."""
    import re
    import shlex
    from pathlib import Path

    from specpath_engine.llm import LLM, SamplingParams

    page = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text()
    (line,) = [line for line in page.splitlines() if line.startswith("specpath run --prompt")]
    quoted = re.search(r"--prompt \$'([^']*)'", line).group(1)
    prompt = quoted.encode().decode("unicode_escape")
    assert "--spec-method ngram --spec-tokens 4" in line and shlex.split(line.split("$")[0])
    text = LLM(None, {"method": "ngram", "num_speculative_tokens": 4}, num_threads=1).generate(
        [prompt], SamplingParams(max_tokens=128))[0].text
    words = re.findall(r"[A-Za-z_]{2,}", text)
    assert len(words) >= 10 and sum(not c.isspace() for c in text) >= 0.5 * len(text)  # text, not padding


def test_demo_configs_report_a_plugins_reason_and_a_broken_answer(fresh_plugins):
    import core_fakes
    from specpath import demo
    from specpath.hookspecs import hookimpl
    from specpath_engine.cli_run import demo_configs

    class Demos:
        @hookimpl
        def specpath_demo(self, method):
            if method == "ngram":
                return demo.leave_out("not today")
            if method == "ngram_gpu":
                return "garbage"
            return demo.run(num_speculative_tokens=2) if method == "eagle" else None

    pm = fresh_plugins.get_plugin_manager()
    pm.register(core_fakes.BuiltinFakesPlugin())
    pm.register(Demos())
    runs, skipped = demo_configs(5, {"ngram", "ngram_gpu", "eagle", "mtp"})
    reasons = dict(skipped)
    assert reasons["ngram"] == "not today"
    assert reasons["ngram_gpu"].startswith("its specpath_demo hook failed: specpath_demo for 'ngram_gpu' returned str")
    assert dict(runs)["eagle"] == {"num_speculative_tokens": 2, "method": "eagle"}  # the hook's K wins
    assert dict(runs)["mtp"] == {"num_speculative_tokens": 5, "method": "mtp"}  # nobody answers: the core's default
