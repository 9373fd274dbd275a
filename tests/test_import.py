"""`import specpath` and config resolution stay light: no torch, no triton, no plugin modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("torch", "triton", "numpy", "numba", "transformers", "safetensors", "specpath_engine", "specpath_engine.sample")

PROBE = """
import json, sys, time
heavy_prefixes = tuple(json.loads(sys.argv[1]))
t0 = time.perf_counter()
import specpath
t1 = time.perf_counter()
for name in specpath.__all__:
    getattr(specpath, name)
import core_fakes
from specpath import plugins
plugins.reset(search_path=[])
plugins.get_plugin_manager().register(core_fakes.BuiltinFakesPlugin())
specpath.SpeculativeConfig(method="ngram", num_speculative_tokens=3).compute_hash()
t2 = time.perf_counter()
heavy = sorted(m for m in sys.modules if m == heavy_prefixes or m.startswith(heavy_prefixes))
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "resolve_ms": (t2 - t1) * 1e3, "heavy": heavy}))
"""


def test_import_and_resolution_import_nothing_heavy():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY)], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["heavy"] == []
    # Reported, not asserted (no timing assertions): see `pytest -s`.
    print(f"import specpath: {data['import_ms']:.1f} ms; public API + resolution: {data['resolve_ms']:.1f} ms")


def test_lazy_exports_resolve_and_unknown_names_fail():
    import specpath

    assert specpath.SpeculativeConfig.__name__ == "SpeculativeConfig"
    assert specpath.hookimpl.project_name == "specpath"
    assert set(specpath.__all__) >= {
        "SpeculativeConfig", "SpeculatorConfig", "DraftModelSpeculatorConfig", "register_speculative_method",
        "registered_speculative_methods", "get_custom_speculator_config_class", "create_speculative_config",
        "create_speculator", "hookimpl", "EngineConfig", "ModelConfig", "SpeculativeConfigError",
    }
    try:
        specpath.not_a_name
    except AttributeError as exc:
        assert "not_a_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
