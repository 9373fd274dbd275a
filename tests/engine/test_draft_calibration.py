"""The map from a drafter's path chances to acceptance (``draft_calibration``)."""

from hypothesis import given
from hypothesis import strategies as st

from specpath_engine.draft_calibration import Calibration


@given(st.floats(0.0, 1.0), st.integers(0, 5))
def test_it_starts_as_the_identity(p, depth):
    assert Calibration().chance(p, depth) == __import__("pytest").approx(p)


def test_it_learns_an_under_confident_deep_draft_and_leaves_the_first_alone():
    c = Calibration()
    for _ in range(200):  # deeper drafts put at 0.1 are accepted 3 times in 10
        for ok in (True, False, False, True, False, False, True, False, False, False):
            c.observe(0.1, 2, ok)
    assert abs(c.chance(0.12, 1) - 0.36) < 0.05  # same bin: about three times its estimate
    assert c.chance(0.12, 0) == __import__("pytest").approx(0.12)  # the first draft's map is apart
    assert c.chance(0.6, 3) == __import__("pytest").approx(0.6)  # other bins unchanged


@given(st.floats(0.001, 1.0))
def test_the_least_estimate_reaches_the_chance_asked(want):
    c = Calibration()
    for p, ok in [(0.15, True), (0.15, True), (0.15, False), (0.03, True), (0.6, False), (0.6, True)] * 20:
        c.observe(p, 1, ok)
    least = c.least_estimate(want)
    assert 0.0 <= least <= 1.0
    if least < 1.0:
        assert c.chance(least, 1) >= want * (1 - 1e-9)
