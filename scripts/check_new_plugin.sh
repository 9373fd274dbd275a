#!/usr/bin/env bash
# CI: generate a fresh plugin with `specpath new-plugin`, install it into a throw-away venv that
# sees this Python's packages (torch, specpath, pytest), and run the generated plugin's own tests.
# Works from a plain system Python and from a fresh `python3 -m venv` alike: the throw-away venv
# adds this interpreter's site directories (their .pth files included, so editable installs work),
# and the plugin is built without isolation only when the local setuptools can build wheels.
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m specpath.scaffold "${1:-ci-probe}" --dir "$work"
plugin="$(ls -d "$work"/specpath-*)"
python3 -m venv --without-pip "$work/venv"
inner_site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
python3 - "$inner_site/zz_outer_env.pth" <<'PY'
import site, sys, sysconfig
dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
seen = []
for d in dirs:
    if d not in seen:
        seen.append(d)
with open(sys.argv[1], "w") as fh:
    fh.write("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in seen) + "\n")
PY
isolation=(--no-build-isolation)
if ! python3 -c 'import setuptools.command.bdist_wheel' 2>/dev/null && ! python3 -c 'import wheel' 2>/dev/null; then
  isolation=()  # this setuptools cannot build wheels by itself: let pip fetch a build backend
fi
"$work/venv/bin/python" -m pip install -q --no-deps "${isolation[@]}" -e "$plugin"
cd "$plugin" && "$work/venv/bin/python" -m pytest tests
