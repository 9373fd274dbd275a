"""Every entry to a SpeculativeConfig (``SpeculativeConfig(**kw)``, ``from_dict``,
``create_speculative_config``) passes one validation path: for any input all three resolve
alike or raise the same one-line SpeculativeConfigError, whatever the values hold (integers of
thousands of digits, values that contain themselves, 3,000-deep nesting)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specpath import create_speculative_config
from specpath.config.loading import MAX_NESTING
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError

FIELDS = [f.name for f in SpeculativeConfig.user_fields()]


def deep(levels: int, leaf=1):
    value = leaf
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def self_list():
    x = [1]
    x.append(x)
    return x


def self_dict():
    x = {"a": 1}
    x["b"] = [x]
    return x


HOSTILE = {
    "huge int": lambda: 10**5000,
    "huge negative int": lambda: -(10**5000),
    "3000-deep": lambda: deep(3000),
    "self-referential list": self_list,
    "self-referential dict": self_dict,
}

ENTRIES = {
    "keywords": lambda data: SpeculativeConfig(**data),
    "from_dict": SpeculativeConfig.from_dict,
    "create_speculative_config": create_speculative_config,
}


def outcome(entry, data):
    """("ok", K) or ("error", the one line) for one entry; anything else fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            spec = ENTRIES[entry](dict(data))
        except SpeculativeConfigError as exc:
            text = str(exc)
            assert "\n" not in text and len(text) < 2000
            return ("error", text)
    return ("ok", spec.num_speculative_tokens)


def same_everywhere(data):
    results = {entry: outcome(entry, data) for entry in ENTRIES}
    assert len(set(results.values())) == 1, results
    return results["from_dict"]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("field", FIELDS)
def test_a_hostile_value_in_any_field_is_one_line_the_same_from_every_entry(field, kind):
    base = {"method": "ngram", "num_speculative_tokens": 2}
    status, text = same_everywhere({**base, field: HOSTILE[kind]()})
    assert status == "error"
    assert text.startswith(f"speculative_config.{field}:"), text  # names the field it came in


@given(levels=st.integers(MAX_NESTING + 1, 3000), field=st.sampled_from(["speculator_options", "num_speculative_tokens",
                                                                           "method", "model_free_drafter"]))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_nesting_past_the_limit_is_refused_alike(levels, field):
    status, text = same_everywhere({"method": "ngram", "num_speculative_tokens": 2, field: deep(levels)})
    assert status == "error" and f"nested too deeply (at most {MAX_NESTING} levels)" in text


@given(digits=st.integers(4301, 20000), field=st.sampled_from(FIELDS))
@settings(max_examples=25, deadline=None)
def test_integers_past_the_digit_limit_are_refused_alike(digits, field):
    status, text = same_everywhere({"method": "ngram", "num_speculative_tokens": 2, field: 10 ** digits})
    assert status == "error" and text == f"speculative_config.{field}: integer too large (more than 4300 digits)"


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.integers(), st.floats(),
                    st.sampled_from(["ngram", "suffix", "standard", "block", "greedy", ""]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                         max_size=3), max_leaves=6)


@given(extra=st.dictionaries(st.sampled_from(FIELDS), values, max_size=4),
       method=st.sampled_from(["ngram", "suffix", "ngram_gpu"]), k=st.integers(-2, 2000))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_plain_input_resolves_or_fails_the_same_way_from_every_entry(extra, method, k):
    same_everywhere({"method": method, "num_speculative_tokens": k, **extra})
