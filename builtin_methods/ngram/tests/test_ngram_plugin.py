"""The distribution's entry points, its light hooks module, and life without it."""

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

from specpath import plugins
from specpath.registry import get_registry
from specpath_ngram.config import NgramGPUSpeculatorConfig, NgramSpeculatorConfig


def test_entry_points_name_the_methods_and_the_hooks_module():
    found = {
        ep.name: (ep.value, ep.dist.metadata["Name"])
        for ep in metadata.entry_points(group="specpath.methods")
        if ep.dist is not None and ep.dist.metadata["Name"] == "specpath-ngram"
    }
    assert found == {
        "ngram": ("specpath_ngram.hooks", "specpath-ngram"),
        "ngram_gpu": ("specpath_ngram.hooks", "specpath-ngram"),
    }


def test_plugin_index_loads_both_methods():
    plugins.load("ngram")
    records = {r.name: r for r in plugins.plugin_records() if r.distribution == "specpath-ngram"}
    assert set(records) == {"ngram", "ngram_gpu"}
    assert records["ngram"].status == "loaded", records["ngram"].error
    assert records["ngram"].methods == ["ngram", "ngram_gpu"]
    assert get_registry().get("ngram").config_class is NgramSpeculatorConfig
    assert get_registry().get("ngram_gpu").config_class is NgramGPUSpeculatorConfig


def run_python(code, **env):
    """Run ``code`` in a fresh interpreter (plugins are indexed once per process)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SPECPATH_")}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


RESOLVE_WITHOUT_HEAVY_IMPORTS = """
import json, sys
from specpath.config.speculative import SpeculativeConfig
spec = SpeculativeConfig.from_dict({"method": "ngram_gpu", "num_speculative_tokens": 4})
spec = SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 4})
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "numba", "triton"))
print(json.dumps({"class": type(spec.speculator_config).__name__, "heavy": heavy}))
"""


def test_resolving_imports_nothing_heavy():
    result = run_python(RESOLVE_WITHOUT_HEAVY_IMPORTS)
    assert result == {"class": "NgramSpeculatorConfig", "heavy": []}


# Simulates an uninstalled specpath-ngram: its entry points are invisible and its package
# cannot be imported.
HIDE_THE_DISTRIBUTION = """
import importlib.metadata as metadata, sys
sys.modules["specpath_ngram"] = None
entry_points = metadata.entry_points
def without_ngram(**params):
    found = entry_points(**params)
    keep = [ep for ep in found if ep.dist is None or ep.dist.metadata["Name"] != "specpath-ngram"]
    return metadata.EntryPoints(keep)
metadata.entry_points = without_ngram
"""

RESOLVE_NGRAM = """
import json
import specpath
from specpath import plugins
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
errors = []
for fields in ({"method": "ngram"}, {"method": "ngram_gpu"}, {"model": "[ngram]"}):
    try:
        SpeculativeConfig.from_dict({**fields, "num_speculative_tokens": 4})
    except SpeculativeConfigError as exc:
        errors.append(str(exc))
indexed = sorted(r.name for r in plugins.plugin_records())
print(json.dumps({"errors": errors, "indexed": indexed, "broken": len(plugins.broken_plugins())}))
"""


def test_without_the_distribution_ngram_fails_with_the_install_hint():
    result = run_python(HIDE_THE_DISTRIBUTION + RESOLVE_NGRAM)
    assert len(result["errors"]) == 3
    for error in result["errors"]:
        assert "pip install --find-links WHEELS_DIR specpath-ngram" in error and "\n" not in error
    assert "ngram" not in result["indexed"] and "ngram_gpu" not in result["indexed"]
    assert result["broken"] == 0  # the core keeps working; nothing is reported broken


@pytest.mark.parametrize(
    ("env", "why"),
    [({"SPECPATH_PLUGINS": "none"}, "blocked: SPECPATH_PLUGINS"),
     ({"SPECPATH_DISABLE_PLUGIN_AUTOLOAD": "1"}, "disabled: SPECPATH_DISABLE_PLUGIN_AUTOLOAD")],
)
def test_a_blocked_or_disabled_plugin_says_so(env, why):
    result = run_python(RESOLVE_NGRAM, **env)
    assert len(result["errors"]) == 3
    for error in result["errors"]:
        assert "'specpath-ngram', which is installed but " + why in error
        assert "not installed" not in error and "\n" not in error


def test_the_distribution_declares_both_of_its_methods():
    """``ngram_gpu`` has its own entry point: it never resolves only through a fallback scan."""
    from importlib import metadata

    names = {ep.name for ep in metadata.distribution("specpath-ngram").entry_points if ep.group == "specpath.methods"}
    assert names == {"ngram", "ngram_gpu"}
