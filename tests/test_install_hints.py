"""Install hints name commands that work from this repository: no specpath distribution is on a
public index, so a hint points at the distribution's directory in a checkout or at the wheels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specpath.methods import METHOD_DISTRIBUTIONS, install_hint, source_dir

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("dist", sorted({d for d in METHOD_DISTRIBUTIONS.values() if d}
                                        | {"specpath", "specpath-engine", "specpath-train", "specpath-freqgram"}))
def test_every_hint_names_the_directory_that_builds_the_distribution(dist):
    text = (ROOT / source_dir(dist) / "pyproject.toml").read_text()  # no tomllib on Python 3.10
    assert re.search(r'^name = "([^"]+)"', text, re.M).group(1) == dist
    hint = install_hint(dist)
    assert f"pip install ./{source_dir(dist)}" in hint and "scripts/build_wheels.sh" in hint
    assert f"pip install {dist}" not in hint  # the bare index command that fails


def test_no_shipped_file_links_a_pypi_page():
    shipped = [*ROOT.glob("core/specpath/templates/**/*.md"), *ROOT.glob("core/specpath/templates/**/*.toml"),
               ROOT / "plugin_template" / "README.md"]
    assert shipped and not [p for p in shipped if "pypi.org/project/specpath" in p.read_text()]
