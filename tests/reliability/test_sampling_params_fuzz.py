"""``SamplingParams``: any input is either a fully valid value or one SamplingParamsError line."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.request import SamplingParams, SamplingParamsError

anything = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4), st.lists(st.one_of(st.none(), st.integers(-3, 300), st.text(max_size=3), st.floats()), max_size=3),
    st.just(10**5000),
)
FIELDS = ["temperature", "top_k", "top_p", "max_tokens", "seed", "stop", "stop_token_ids", "ignore_eos"]


@settings(max_examples=800, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), anything, max_size=4))
def test_params_are_valid_or_one_line(kwargs):
    try:
        p = SamplingParams(**kwargs)
    except SamplingParamsError as exc:
        text = str(exc)
        assert "\n" not in text and len(text) < 200 and text.startswith("SamplingParams.")
        return
    assert isinstance(p.temperature, float) and math.isfinite(p.temperature) and p.temperature >= 0
    assert isinstance(p.top_p, float) and 0 < p.top_p <= 1
    assert type(p.top_k) is int and p.top_k >= 0
    assert type(p.max_tokens) is int and p.max_tokens >= 1
    assert p.seed is None or type(p.seed) is int
    assert all(isinstance(s, str) and s for s in p.stop)
    assert all(type(t) is int and t >= 0 for t in p.stop_token_ids)
    assert isinstance(p.ignore_eos, bool)
