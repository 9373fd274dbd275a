"""warmup_cosine, the one learning-rate schedule of every recipe."""

import math

from hypothesis import given
from hypothesis import strategies as st

from specpath_train.trainer import warmup_cosine


@given(peak=st.floats(1e-5, 1.0), warmup=st.integers(1, 200), floor=st.floats(0.0, 1.0, allow_subnormal=False),
       step=st.integers(0, 10_000), progress=st.floats(-1.0, 2.0))
def test_bounds_and_shape(peak, warmup, floor, step, progress):
    lr = warmup_cosine(step, progress, peak=peak, warmup=warmup, floor=floor)
    assert 0 < lr <= peak * (1 + 1e-12) or (floor == 0 and lr >= 0)
    if step < warmup:
        assert math.isclose(lr, peak * (step + 1) / warmup)
    else:
        later = warmup_cosine(step, min(1.0, max(0.0, progress)) + 0.1, peak=peak, warmup=warmup, floor=floor)
        assert later <= lr + 1e-12  # decays with progress
        assert lr >= floor * peak - 1e-12


def test_end_points():
    assert warmup_cosine(50, 0.0, peak=2.0, warmup=50) == 2.0
    assert math.isclose(warmup_cosine(50, 1.0, peak=2.0, warmup=50), 0.2)
    assert math.isclose(warmup_cosine(500, 5.0, peak=1.0, warmup=10, floor=0.0), 0.0, abs_tol=1e-12)
