"""Every input dict either resolves or raises SpeculativeConfigError - never anything else."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, event, given, settings
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
verification = st.one_of(
    st.just({}),
    st.just({"rejection_sample_method": "block"}),
    st.fixed_dictionaries({"rejection_sample_method": st.just("fly")}, optional={"fly_window_size": st.integers(0, 8)}),
    st.fixed_dictionaries({"rejection_sample_method": st.just("synthetic"),
                           "synthetic_acceptance_length": st.floats(0, 10) | st.just(float("nan"))}),
    st.fixed_dictionaries({"rejection_sample_method": st.just("synthetic"),
                           "synthetic_acceptance_rates": st.lists(st.floats(-0.1, 1.1), max_size=9).map(
                               lambda r: sorted(r, reverse=True))}),
    st.fixed_dictionaries({"rejection_sample_method": st.sampled_from(["fyl", "standard"]),
                           "synthetic_acceptance_rates": st.lists(st.floats(0, 1), max_size=3)}),
)
plausible = st.builds(
    lambda base, verify: {**base, **verify},
    st.fixed_dictionaries(
        {"method": st.sampled_from(["ngram", "[ngram]", "my_ngram", "ngram_gpu", "extract_hidden_states"]),
         "num_speculative_tokens": st.integers(0, 8)},
        optional={
            "num_speculative_tokens_per_batch_size": st.lists(
                st.lists(st.integers(0, 12), min_size=2, max_size=4), max_size=3),
            "prompt_lookup_min": st.integers(0, 6),
            "prompt_lookup_max": st.integers(0, 6),
            "speculator_options": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
            "use_heterogeneous_vocab": st.booleans(),
            "use_local_argmax_reduction": st.booleans(),
            "draft_sample_method": st.sampled_from(["greedy", "random"]),
        },
    ),
    verification,
)


def check(data):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = SpeculativeConfig.from_dict(data)
    except SpeculativeConfigError as err:
        assert "\n" not in str(err)
        event("rejected")
        return
    event("resolved")
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


@pytest.fixture
def draft_world(fuzz_registry, make_checkpoint):
    from specpath.config.model import ModelConfig

    paths = [
        make_checkpoint("eagle-head"),
        make_checkpoint("eagle3-head", head_dtype="float16"),
        make_checkpoint("mtp-head", model_type="deepseek_mtp", n_predict=2, num_nextn_predict_layers=2),
        make_checkpoint("dspark-draft", num_experts=4),
        make_checkpoint("small-vocab", vocab_size=100, rope_scaling={"rope_type": "yarn"}),
        make_checkpoint("declares", speculator_config_class="eagel3"),
        "/no/such/checkpoint",
    ]
    return paths, ModelConfig(model=make_checkpoint("target", max_position_embeddings=1024))


draft_dicts = st.fixed_dictionaries(
    {"model": st.sampled_from([0, 0, 1, 2, 2, 3, 4, 5, 6])},
    optional={
        "method": st.sampled_from(["eagle", "eagle3", "mtp", "deepseek_mtp", "dflash", "dspark", "draft_model"]),
        "num_speculative_tokens": st.integers(0, 6),
        "draft_tensor_parallel_size": st.integers(0, 2),
        "max_model_len": st.integers(0, 4096),
        "quantization": st.sampled_from(["fp8", "awq"]),
        "draft_lm_head_quantization": st.sampled_from(["fp8", "nvfp4", "int4"]),
        "index_share_for_mtp_iteration": st.booleans(),
        "dspark_draft_topk": st.integers(0, 4),
        "dspark_anchor_sampling": st.booleans(),
        "use_heterogeneous_vocab": st.booleans(),
        "eagle_aux_hidden_state_layer_ids": st.lists(st.integers(-1, 5), max_size=3),
        "parallel_drafting": st.booleans(),
    },
)
parallels = st.builds(
    lambda tp, dp, ep, pcp: (tp, dp, ep, pcp), st.integers(1, 2), st.integers(1, 2), st.booleans(), st.integers(1, 2)
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(draft_dicts, parallels)
def test_draft_model_dicts(draft_world, data, parallel):
    from specpath.config.model import ParallelConfig

    paths, target = draft_world
    data = {**data, "model": paths[data["model"]]}
    tp, dp, ep, pcp = parallel
    parallel_config = ParallelConfig(tensor_parallel_size=tp, data_parallel_size=dp, enable_expert_parallel=ep,
                                     prefill_context_parallel_size=pcp)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = SpeculativeConfig.from_dict(data, target_model_config=target, target_parallel_config=parallel_config)
    except SpeculativeConfigError as err:
        assert "\n" not in str(err)
        event("rejected")
        return
    event("resolved")
    assert spec.draft_model_config is not None and spec.num_speculative_tokens > 0
    assert spec.draft_tensor_parallel_size in (1, tp)
    spec.compute_hash()
