"""specpath.verification: the mode sets and the acceptance-rate maths that config and sampler share."""

from __future__ import annotations

import math
import sys
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpath import verification as v
from specpath_engine.sample import rejection


def test_modes_split_into_lossless_and_lossy():
    assert v.VERIFICATION_MODES == ("standard", "synthetic", "block", "fly")
    assert v.LOSSLESS_METHODS | v.LOSSY_METHODS == set(v.VERIFICATION_MODES)
    assert v.LOSSY_METHODS == {"synthetic", "fly"} and not v.LOSSLESS_METHODS & v.LOSSY_METHODS


def test_the_sampler_and_the_config_read_the_same_modes():
    from specpath.config import speculative

    assert set(rejection.METHOD_OPTIONS) == set(v.VERIFICATION_MODES)
    assert rejection.LOSSLESS_METHODS is v.LOSSLESS_METHODS
    assert speculative.LOSSY_REJECTION_SAMPLE_METHODS is v.LOSSY_METHODS


def test_importing_it_imports_no_torch():
    code = "import sys, specpath.verification; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "False"


@given(st.floats(1.0, 20.0), st.integers(1, 16))
def test_min_variance_rates_have_the_mean_and_the_shape(length, k):
    rates = v.acceptance_length_to_rates(length, k)
    assert len(rates) == k and v.check_rates(rates) == rates
    assert sum(rates) == pytest.approx(min(length - 1, k))
    assert sum(0.0 < r < 1.0 for r in rates) <= 1  # at most one fractional position: least variance


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12).map(lambda r: sorted(r, reverse=True)))
def test_conditional_rates_multiply_back_to_the_unconditional_ones(rates):
    conditional = v.conditional_rates(rates)
    assert all(0.0 <= c <= 1.0 for c in conditional)
    product = 1.0
    for rate, c in zip(rates, conditional):
        product *= c
        assert product == pytest.approx(rate, abs=1e-9) or rate == 0.0


@pytest.mark.parametrize("rates", [[0.5, 0.7], [1.2], [-0.1]])
def test_bad_rates_are_refused(rates):
    with pytest.raises(ValueError):
        v.check_rates(rates)


@pytest.mark.parametrize("length", [0.5, math.inf, math.nan, "2"])
def test_bad_lengths_are_refused(length):
    with pytest.raises(ValueError):
        v.acceptance_length_to_rates(length, 3)


def test_conditional_rates():
    assert v.conditional_rates([0.8, 0.4, 0.0]) == pytest.approx([0.8, 0.5, 0.0])
    assert v.conditional_rates([0.0, 0.0]) == [0.0, 0.0]
