"""Every input dict either resolves or raises SpeculativeConfigError - never anything else."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core_fakes
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath.registry import register_speculative_method

FIELDS = [f.name for f in SpeculativeConfig.user_fields()]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 12), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["ngram", "[ngram]", "eagle3", "mtp", "deepseek_mtp", "dspark", "suffix", "custom_class",
                     "my_ngram", "fly", "synthetic", "standard", "block", "greedy", "random", "fp8", "eagel3",
                     "", "a:B", "x.y:Z", "/nonexistent/dir"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                      max_leaves=8)
keys = st.one_of(st.sampled_from(FIELDS), st.sampled_from(["prompt_lookup_mx", "tensor-parallel-size", "custom_method",
                                                           "draft_model_config", "target_model_config"]), st.text(max_size=8))
configs = st.dictionaries(keys, values, max_size=6)
plausible = st.fixed_dictionaries(
    {"method": st.sampled_from(["ngram", "[ngram]", "my_ngram", "ngram_gpu", "extract_hidden_states"])},
    optional={
        "num_speculative_tokens": st.integers(-1, 8),
        "num_speculative_tokens_per_batch_size": st.lists(st.lists(st.integers(-1, 10), min_size=2, max_size=4), max_size=3),
        "rejection_sample_method": st.sampled_from(["standard", "synthetic", "block", "fly", "fyl"]),
        "synthetic_acceptance_rates": st.lists(st.floats(-0.5, 1.5), max_size=9),
        "synthetic_acceptance_length": st.floats(-1, 10) | st.just(float("nan")),
        "fly_window_size": st.integers(-1, 9),
        "prompt_lookup_min": st.integers(-1, 6),
        "prompt_lookup_max": st.integers(-1, 6),
        "speculator_options": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        "use_heterogeneous_vocab": st.booleans(),
        "use_local_argmax_reduction": st.booleans(),
        "draft_sample_method": st.sampled_from(["greedy", "random"]),
    },
)


def check(data):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = SpeculativeConfig.from_dict(data)
    except SpeculativeConfigError as err:
        assert "\n" not in str(err)
        return
    assert spec.num_speculative_tokens > 0
    spec.compute_hash()


@pytest.fixture
def fuzz_registry(fake_builtins):
    register_speculative_method("my_ngram", core_fakes.MyNgram)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(configs)
def test_arbitrary_dicts(fuzz_registry, data):
    check(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plausible)
def test_plausible_dicts(fuzz_registry, data):
    check(data)
