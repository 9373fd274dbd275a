"""The bridges import their engines only when used: ``specpath_engine.bridges`` and the shared module
pull in no engine, no torch; the core never imports a bridge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ENGINES = ("vllm", "llama_cpp", "transformers", "torch", "sglang")


def _loaded_after(statement: str) -> list[str]:
    probe = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {ENGINES!r})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_bridges_package_and_common_module_are_light():
    assert _loaded_after("import specpath_engine.bridges, specpath_engine.bridges.common") == []


def test_core_never_imports_a_bridge():
    core = Path(__file__).parents[2] / "core" / "specpath"
    offenders = [
        str(p.relative_to(core))
        for p in core.rglob("*.py")
        if "bridges" not in p.parts and "specpath_engine.bridges" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []
