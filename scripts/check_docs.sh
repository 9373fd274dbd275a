#!/usr/bin/env bash
# CI: the configuration reference is up to date and the docs site builds with no warning.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/gen_config_reference.py --check
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
python3 -m mkdocs build --strict --site-dir "$site"  # not --quiet: it hides warnings from --strict
echo "docs ok"
