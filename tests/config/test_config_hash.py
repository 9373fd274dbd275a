"""compute_hash(): every graph-affecting field changes it; other fields leave it alone."""

from __future__ import annotations

import warnings

import pytest

import core_fakes
from specpath.config.model import ModelConfig, ParallelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.registry import register_speculative_method

pytestmark = pytest.mark.usefixtures("fake_builtins")


@pytest.fixture
def build(make_checkpoint):
    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    paths = {
        "head": make_checkpoint("eagle3-head"),
        "other": make_checkpoint("eagle3-other"),
        "wider": make_checkpoint("eagle3-wider", hidden_size=128),
        "mtp": make_checkpoint("mtp-head", model_type="mtp"),
    }
    target = ModelConfig(model=make_checkpoint("target"))
    parallel = ParallelConfig(tensor_parallel_size=2)

    def make(**changes) -> str:
        data = {"method": "eagle3", "model": paths["head"], "num_speculative_tokens": 3, **changes}
        if data.get("model") in paths:
            data["model"] = paths[data["model"]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = SpeculativeConfig.from_dict(data, target_model_config=target, target_parallel_config=parallel)
        return spec.compute_hash()

    return make


GRAPH_CHANGES = {
    "method": dict(method="eagle"),
    "custom_method": dict(method="my_eagle3"),
    "model path": dict(model="other"),
    "draft architecture": dict(model="wider"),
    "num_speculative_tokens": dict(num_speculative_tokens=4),
    "parallel_drafting": dict(parallel_drafting=True),
    "disable_padded_drafter_batch": dict(disable_padded_drafter_batch=True),
    "draft_tensor_parallel_size": dict(draft_tensor_parallel_size=1),
    "quantization": dict(quantization="fp8"),
    "revision": dict(revision="v2"),
    "moe_backend": dict(moe_backend="triton"),
    "attention_backend": dict(attention_backend="flex"),
    "kv_cache_dtype": dict(kv_cache_dtype="fp8"),
    "draft_lm_head_quantization": dict(draft_lm_head_quantization="fp8"),
    "use_local_argmax_reduction": dict(use_local_argmax_reduction=True),
    "eagle_aux_hidden_state_layer_ids": dict(eagle_aux_hidden_state_layer_ids=[0, 1, 2]),
}

NON_GRAPH_CHANGES = {
    "rejection_sample_method": dict(rejection_sample_method="block"),
    "synthetic": dict(rejection_sample_method="synthetic", synthetic_acceptance_length=2.0),
    "fly": dict(rejection_sample_method="fly", fly_window_size=1, fly_entropy_threshold=0.5),
    "dynamic K table": dict(num_speculative_tokens_per_batch_size=[[1, 8, 2]]),
    "disable_eagle_block_drop": dict(disable_eagle_block_drop=True),
    "disable_lookahead_block_hashes": dict(disable_lookahead_block_hashes=True),
    "draft_sample_method": dict(draft_sample_method="random"),
    "enable_adaptive_verification": dict(enable_adaptive_verification=True),
    "prompt_lookup": dict(prompt_lookup_min=2, prompt_lookup_max=3),
    "max_model_len": dict(max_model_len=256),
    "draft_load_config": dict(draft_load_config={"load_format": "safetensors"}),
    "model_free_drafter": dict(model_free_drafter={"method": "ngram"}, model_free_min_tokens=3),
}


def test_the_hash_is_stable(build):
    assert build() == build()
    assert len(build()) == 64


@pytest.mark.parametrize("name", sorted(GRAPH_CHANGES))
def test_each_graph_affecting_field_changes_the_hash(build, name):
    assert build(**GRAPH_CHANGES[name]) != build()


NON_GRAPH_BASES = {
    "enable_adaptive_verification": dict(method="dflash"),  # options of the methods that take them
    "prompt_lookup": dict(method="ngram"),
}


@pytest.mark.parametrize("name", sorted(NON_GRAPH_CHANGES))
def test_fields_that_do_not_affect_the_graph_leave_it_equal(build, name):
    base = NON_GRAPH_BASES.get(name, {})
    assert build(**base, **NON_GRAPH_CHANGES[name]) == build(**base)


def test_speculator_options_of_a_custom_method_are_hashed(build):
    assert build(method="my_eagle3", speculator_options={"depth": 2}) != build(method="my_eagle3")
    assert build(method="my_eagle3", speculator_options={"depth": 2}) != build(
        method="my_eagle3", speculator_options={"depth": 3}
    )


def test_class_hash_factors_are_included(build):
    # MTP hashes index_share_for_mtp_iteration, DSpark hashes enable_adaptive_verification
    assert build(method="mtp", model="mtp", index_share_for_mtp_iteration=True) != build(
        method="mtp", model="mtp", index_share_for_mtp_iteration=False
    )
    assert build(method="dspark", model="head", enable_adaptive_verification=True) != build(
        method="dspark", model="head"
    )
