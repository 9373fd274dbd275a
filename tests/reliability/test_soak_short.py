"""A few seconds of ``scripts/soak.py``: random batches over a few methods, every check on."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def _soak_module():
    spec = importlib.util.spec_from_file_location("specpath_soak", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_short_soak_passes_every_check(tmp_path, capsys):
    soak = _soak_module()
    code = soak.main(["--requests", "16", "--seed", "3", "--methods", "ngram,eagle,draft_model",
                      "--out", str(tmp_path)])
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 0, summary
    state = (tmp_path / "state.json").read_text()
    assert '"failures": 0' in state and '"requests": ' in state
    assert '"greedy_checked": 0' not in state
