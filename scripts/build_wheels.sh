#!/usr/bin/env bash
# Builds a wheel of every specpath distribution (the core, the engine, the training toolkit, each
# built-in method plugin, the plugin template) into DIR (default: dist/wheels), without
# dependencies: install them with one pip command (see README "Install from wheels").
# Usage: scripts/build_wheels.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist/wheels}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
dists=(. engine train)
for d in builtin_methods/*/ plugin_template/; do [ -f "$d/pyproject.toml" ] && dists+=("${d%/}"); done
for d in "${dists[@]}"; do
  # --no-build-isolation: setuptools from this Python, so the build needs no index
  python3 -m pip wheel -q --no-deps --no-build-isolation --wheel-dir "$out" "./$d"
  rm -rf "$d/build"
done
ls "$out"
