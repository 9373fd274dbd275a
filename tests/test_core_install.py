"""The core alone, in a fresh venv without torch: configs resolve, the core commands run, and an
engine command says which distribution to install."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

RESOLVE = textwrap.dedent("""
    import sys
    import specpath
    spec = specpath.create_speculative_config('{"method": "ngram", "num_speculative_tokens": 4}')
    assert spec.speculator_config.num_lookahead_tokens == 0, spec
    print(spec.method, spec.num_speculative_tokens, len(spec.compute_hash()))
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "triton", "numpy", "specpath_engine"})
    assert not heavy, heavy
""")


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of this checkout's own


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory):
    venv = tmp_path_factory.mktemp("core-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The ngram plugin's config is attrs only; --no-deps keeps its numba/torch out of the venv.
    for args in ([str(ROOT)], ["--no-deps", str(ROOT / "builtin_methods" / "ngram")]):
        subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True, capture_output=True, env=ENV)
    return venv


def run(venv: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], capture_output=True, text=True,
                          cwd=venv.parent, env=ENV)


def test_the_core_installs_without_torch(core_venv):
    result = run(core_venv, "python", "-c", "import importlib.util as u; print(u.find_spec('torch'))")
    assert result.stdout.strip() == "None", result


def test_configs_resolve_without_heavy_imports(core_venv):
    result = run(core_venv, "python", "-c", RESOLVE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ngram 4 ")


@pytest.mark.parametrize("argv", [("methods",), ("plugins",), ("fields",),
                                  ("validate", "--spec-method", "ngram", "--spec-tokens", "4"),
                                  ("explain", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}')])
def test_core_commands_run(core_venv, argv):
    result = run(core_venv, "specpath", *argv)
    assert result.returncode == 0, result.stderr
    assert result.stdout


def test_an_engine_command_names_the_distribution_to_install(core_venv):
    result = run(core_venv, "specpath", "run", "--prompt", "x", "--speculative-config", "{}")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "specpath-engine is not installed: pip install ./engine" in result.stderr


def test_train_names_the_training_distribution_to_install(core_venv):
    result = run(core_venv, "specpath", "train", "eagle3", "--target", "x", "--out", "y")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "specpath-train is not installed: pip install ./train" in result.stderr
