"""``benchmarks/train_to_vllm.py``: its plumbing always (the commands it runs, the prompts file,
the τ it reads off ``specpath run --json``, the tables, the four steps in order with each one
faked), and opt-in the real path, jsonl -> ``specpath train`` -> ``specpath export`` -> vLLM::

    SPECPATH_VLLM_PYTHON=~/.cache/specpath/venvs/vllm/bin/python python -m pytest tests/train/test_train_to_vllm.py -q

The real test is collected only when the variable names an interpreter: it trains on SmolLM2 and
starts a vLLM engine (minutes on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_train.prompts import read_prompts

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("train_to_vllm", ROOT / "benchmarks" / "train_to_vllm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def _args(**kw) -> argparse.Namespace:
    base = dict(minutes=4.0, max_new_tokens=96, window=128, eval_prompts=3, eval_tokens=48, max_tokens=64, k=4)
    return argparse.Namespace(**{**base, **kw})


def test_the_prompts_file_is_one_specpath_train_reads_in_both_forms(tmp_path):
    t = _script()
    n = t.write_prompts(tmp_path / "prompts.jsonl")
    prompts = read_prompts(tmp_path / "prompts.jsonl")
    assert len(prompts) == n == len(t.TRAIN_PROMPTS) + len(t.CODE_PREFIXES)
    assert {p.text is None for p in prompts} == {True, False}  # chat messages and plain text
    assert not set(t.EVAL_PROMPTS) & set(t.TRAIN_PROMPTS)  # the served prompts are not trained on


def test_the_four_commands_are_the_user_commands(tmp_path):
    t = _script()
    train = t.train_command(tmp_path / "p.jsonl", tmp_path / "run", _args(minutes=2.5))
    assert train[:3] == ["specpath", "train", "eagle3"]
    assert train[train.index("--target") + 1] == "smollm2-135m"
    assert train[train.index("--data") + 1] == str(tmp_path / "p.jsonl")
    assert train[train.index("--out") + 1] == str(tmp_path / "run")
    assert train[train.index("--minutes") + 1] == "2.5"
    assert t.export_command(tmp_path / "run", tmp_path / "x")[:5] == ["specpath", "export", str(tmp_path / "run"),
                                                                       "--format", "vllm"]
    spec = t.specpath_run_command("hi", tmp_path / "run", _args(k=3))
    config = json.loads(spec[spec.index("--speculative-config") + 1])
    assert config == {"model": str(tmp_path / "run"), "num_speculative_tokens": 3, "draft_length_policy": "fixed"}
    assert spec[spec.index("--dtype") + 1] == "float32" and "--chat" in spec and "--json" in spec
    assert "--speculative-config" not in t.specpath_run_command("hi", None, _args())
    job = t.vllm_job(tmp_path / "x", "/target", [[1, 2]], _args())
    assert job["method"] == "eagle3" and job["format"] == "vllm" and job["ignore_eos"] is False
    assert t.shell(["specpath", "run", "--prompt", "a b"]) == "specpath run --prompt 'a b'"


def _run_json(drafts: int, accepted: list[int]) -> dict:
    return {"token_ids": [5], "metrics": {"num_drafts": drafts, "num_accepted_tokens": sum(accepted),
                                          "acceptance_rate_by_position": [a / drafts for a in accepted]}}


@settings(deadline=None)  # a loaded shared machine; the property, not the speed, is tested
@given(st.lists(st.tuples(st.integers(1, 50), st.lists(st.integers(0, 50), min_size=4, max_size=4)),
                min_size=1, max_size=5))
def test_specpath_tau_is_counted_as_vllm_counts_it(runs):
    """Accepted at depth i over all drafting steps, pooled over prompts (not a mean of means)."""
    runs = [(d, sorted((min(a, d) for a in acc), reverse=True)) for d, acc in runs]
    out = SCRIPT.specpath_summary([_run_json(d, acc) for d, acc in runs], 4)
    drafts = sum(d for d, _ in runs)
    assert out["tau"] == round(1 + sum(sum(acc) for _, acc in runs) / drafts, 3)
    for i in range(4):
        assert abs(out["acceptance_by_position"][i] - sum(acc[i] for _, acc in runs) / drafts) <= 0.0011


def test_an_eos_at_the_end_does_not_make_replies_differ():
    same = _script().same_tokens
    assert same([4, 5, 2], [4, 5], 2) and same([4, 5], [4, 5, 2], 2) and same([4, 5, 2], [4, 5, 2], 2)
    assert not same([4, 6], [4, 5], 2) and not same([4, 5, 2, 7], [4, 5], 2)


def test_tables():
    t = _script()
    table = t.format_table([{"step": "1. specpath train", "seconds": 312.04, "load_before": 4.4, "load_after": 5.13}])
    assert table.splitlines()[0] == "| step | seconds | load average (1 min) before -> after |"
    assert table.splitlines()[2] == "| 1. specpath train | 312.0 | 4.40 -> 5.13 |"
    cmp = t.format_comparison({"tau": 1.2, "acceptance_by_position": [0.2, 0.0]},
                              {"tau": 1.25, "acceptance_by_position": [0.25, 0.0], "equal_plain": 3}, 2, 3)
    assert "| vLLM, exported head | 1.200 | 0.200 / 0.000 | 2/3 |" in cmp
    assert "| specpath, the run's checkpoint | 1.250 | 0.250 / 0.000 | 3/3 |" in cmp


def test_without_a_vllm_interpreter_it_says_what_to_pass(tmp_path, capsys):
    assert _script().main(["--vllm-python", str(tmp_path / "none"), "--work", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--vllm-python" in err and str(tmp_path / "none") in err


def test_the_four_steps_run_in_order_and_compare(tmp_path, monkeypatch, capsys):
    """Every step faked: train writes metrics.json, vLLM returns the plain reply with an EOS on
    one prompt and another reply on a second."""
    t = _script()
    calls: list[list[str]] = []
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"eos_token_id": 2}))

    def fake_specpath(cmd):
        calls.append(cmd)
        if cmd[1] == "train":
            out = Path(cmd[cmd.index("--out") + 1])
            out.mkdir(parents=True)
            (out / "metrics.json").write_text(json.dumps({"steps": 7, "timings": {"data_s": 1, "train_s": 2},
                                                          "heldout": {"tau": 1.1, "acceptance_by_position": [0.1]}}))
        stdout = ""
        if cmd[1] == "run":
            which = t.EVAL_PROMPTS.index(cmd[cmd.index("--prompt") + 1])
            stdout = json.dumps(_run_json(10, [3, 1, 0, 0]) | {"token_ids": [9, which]})
        return subprocess.CompletedProcess(cmd, 0, stdout, "")

    class FakeVllm:
        @staticmethod
        def vllm_run(python, job, timeout):
            assert python == exe and job["prompts"] == [[1]] * 3 and job["target"] == str(target)
            return {"token_ids": [[9, 0, 2], [9, 1], [8]], "tau": 1.4, "acceptance_by_position": [0.3, 0.1, 0, 0],
                    "seconds": 1.0}

    import specpath_engine.modeling.named_models as named

    monkeypatch.setattr(t, "run_specpath", fake_specpath)
    monkeypatch.setattr(t, "_export_vllm", lambda: FakeVllm)
    monkeypatch.setattr(t, "chat_prompt_ids", lambda target, prompts: [[1]] * len(prompts))
    monkeypatch.setattr(named, "hf_checkpoint_dir", lambda name: target)
    exe = sys.executable
    assert t.main(["--vllm-python", exe, "--work", str(tmp_path / "w"), "--json"]) == 0
    assert [c[1] for c in calls] == ["train", "export"] + ["run"] * 6
    assert calls[1][2] == calls[0][calls[0].index("--out") + 1]  # export reads the run train wrote
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [s["step"].split()[0] for s in result["steps"]] == ["1.", "2.", "3.", "4.", "specpath"]
    assert result["vllm_equals_specpath_plain"] == 2 and result["specpath"]["equal_plain"] == 3
    assert result["specpath"]["tau"] == 1.4 and result["train_metrics"]["steps"] == 7


def test_a_failing_step_is_one_line(tmp_path, monkeypatch, capsys):
    t = _script()
    proc = subprocess.CompletedProcess([], 2, "", "Traceback ...\nspecpath train: error: --data x: no such file\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: proc)
    assert t.main(["--vllm-python", sys.executable, "--work", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("train_to_vllm: error: specpath train exited 2:") and "no such file" in err


if os.environ.get("SPECPATH_VLLM_PYTHON"):

    def test_jsonl_to_vllm_for_real(tmp_path, capsys):
        """A one-minute drafter: vLLM serves the export with greedy output equal to specpath's
        plain output on every prompt and τ within 3% of specpath's for the same head."""
        assert _script().main(["--work", str(tmp_path), "--minutes", "1", "--max-new-tokens", "48",
                               "--max-tokens", "32", "--json"]) == 0
        result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert result["vllm_equals_specpath_plain"] == result["prompts"] == result["specpath"]["equal_plain"]
        assert abs(result["vllm"]["tau"] - result["specpath"]["tau"]) <= 0.03 * result["specpath"]["tau"]
