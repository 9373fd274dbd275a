"""CI's downstream check: a freshly generated plugin installs into a new environment and
passes its own tests (the kit's conformance suite included)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_generated_plugin_installs_and_passes_its_tests():
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check_new_plugin.sh"), "probe-method"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "created" in output and "specpath-probe-method" in output
    summary = done.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "failed" not in summary and "skipped" not in summary, summary
