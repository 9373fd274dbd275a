#!/usr/bin/env bash
# Builds a wheel of every specpath distribution (the core, the engine, the training toolkit, each
# built-in method plugin, the plugin template) into DIR (default: dist/wheels), without
# dependencies: install them with one pip command (see README "Install from wheels").
# Usage: scripts/build_wheels.sh [DIR]   ($PYTHON: the Python that builds, default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist/wheels}"
py="${PYTHON:-python3}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
dists=(. engine train)
for d in builtin_methods/*/ plugin_template/; do [ -f "$d/pyproject.toml" ] && dists+=("${d%/}"); done
for d in "${dists[@]}"; do
  # First with this Python's setuptools (no index needed), else in pip's isolated build env.
  "$py" -m pip wheel -q --no-deps --no-build-isolation --wheel-dir "$out" "./$d" 2>/dev/null \
    || "$py" -m pip wheel -q --no-deps --wheel-dir "$out" "./$d"
  rm -rf "$d/build"
done
ls "$out"
