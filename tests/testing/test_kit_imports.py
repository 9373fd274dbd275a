"""The kit is opt-in: importing specpath (or building the CLI) never imports pytest or torch
through it, and the scaffold is stdlib-only."""

import subprocess
import sys


def imported_after(statement):
    code = f"import sys; {statement}; print(' '.join(sorted(m for m in ('pytest', 'torch', 'specpath_engine.testing.conformance') if m in sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_importing_the_package_loads_no_test_machinery():
    assert imported_after("import specpath, specpath_engine.testing") == []


def test_the_scaffold_is_light():
    assert imported_after("import specpath.scaffold") == []


def test_the_suite_is_importable_by_name():
    assert "pytest" in imported_after("from specpath_engine.testing import SpeculatorConformance")
