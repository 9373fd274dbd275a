#!/usr/bin/env bash
# Installs specpath, every built-in method plugin, the plugin template and the test tools into the current Python.
# torch is pinned to the local CPU build first so nothing pulls a multi-GB CUDA wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q torch==2.13.0
plugins=()
for d in builtin_methods/*/ plugin_template/; do [ -f "$d/pyproject.toml" ] && plugins+=(-e "$d"); done
python3 -m pip install -q -e '.[test,docs]' "${plugins[@]}"
