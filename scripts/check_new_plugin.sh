#!/usr/bin/env bash
# CI: generate a fresh plugin with `specpath new-plugin`, install it into a throw-away venv that
# reuses this Python's packages (torch, specpath), and run the generated plugin's own tests.
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m specpath.scaffold "${1:-ci-probe}" --dir "$work"
plugin="$(ls -d "$work"/specpath-*)"
python3 -m venv --system-site-packages --without-pip "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$plugin"
cd "$plugin" && "$work/venv/bin/python" -m pytest tests
