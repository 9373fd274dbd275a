"""ModelConfig from local checkpoints and the draft's derived configs."""

from __future__ import annotations

import json

import attrs
import pytest

from specpath.config.model import (
    AttentionConfig,
    CacheConfig,
    HFConfig,
    KernelConfig,
    ModelConfig,
    ParallelConfig,
    compose_draft_hf_overrides,
)
from specpath.config.draft import (
    apply_draft_overrides,
    create_draft_parallel_config,
    resolve_num_speculative_tokens,
    verify_and_get_draft_tp,
)
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError


def test_missing_path_and_missing_config_json_are_one_line_errors(tmp_path):
    with pytest.raises(SpeculativeConfigError) as info:
        ModelConfig(model=str(tmp_path / "nope"))
    assert str(info.value).startswith("model_config.model: no such local checkpoint directory")
    assert "never downloads" in str(info.value)
    with pytest.raises(SpeculativeConfigError, match="has no config.json"):
        ModelConfig(model=str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(SpeculativeConfigError, match="cannot read config.json"):
        ModelConfig(model=str(tmp_path))
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(SpeculativeConfigError, match="must hold a JSON object"):
        ModelConfig(model=str(tmp_path))


def test_model_config_reads_the_checkpoint(make_checkpoint):
    path = make_checkpoint("m", num_experts=8, rope_scaling={"rope_type": "yarn"})
    config = ModelConfig(model=path)
    assert (config.dtype, config.max_model_len, config.tokenizer, config.model_weights) == ("float32", 512, path, path)
    assert (config.vocab_size, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads) == (256, 4, 4, 2)
    assert config.is_moe and config.rope_type == "yarn" and config.model_type == "llama"
    assert config.hf_config.vocab_size == 256 and config.hf_config["hidden_size"] == 64
    with pytest.raises(AttributeError):
        config.hf_config.vocab_size = 3
    with pytest.raises(SpeculativeConfigError, match="exceeds the model's context length 512"):
        ModelConfig(model=path, max_model_len=1024)
    with pytest.raises(SpeculativeConfigError, match="unknown dtype"):
        ModelConfig(model=path, dtype="fp7")
    assert ModelConfig(model=path, dtype="half").dtype == "float16"


def test_hf_overrides_dicts_and_callables(make_checkpoint):
    path = make_checkpoint("m")

    def double_layers(config):
        config["num_hidden_layers"] *= 2
        return config

    config = ModelConfig(model=path, hf_overrides=[{"rope_scaling": {"rope_type": "linear"}}, double_layers])
    assert config.rope_type == "linear" and config.num_hidden_layers == 8
    composed = compose_draft_hf_overrides([{"num_hidden_layers": 1}, double_layers])
    assert composed.parts == (double_layers,)
    assert compose_draft_hf_overrides({"a": 1}) is None and compose_draft_hf_overrides(None) is None


def test_hf_config_is_a_read_only_mapping():
    hf = HFConfig({"a": {"b": 1}})
    data = hf.to_dict()
    data["a"]["b"] = 2
    assert hf["a"] == {"b": 1} and dict(hf) == {"a": {"b": 1}} and "a" in hf
    with pytest.raises(AttributeError):
        hf.missing


@pytest.fixture
def fakes(fake_builtins):
    return fake_builtins


def draft_spec(target, draft_path, **kw):
    return SpeculativeConfig.from_dict(
        {"method": "draft_model", "model": draft_path, "num_speculative_tokens": 2, **kw}, target_model_config=target
    )


def test_draft_model_config_field_categories(fakes, make_checkpoint):
    def runtime_switch(config):
        config["use_fancy_rope"] = True
        return config

    target = ModelConfig(
        model=make_checkpoint("target", max_position_embeddings=1024),
        dtype="bfloat16", seed=7, trust_remote_code=True, enforce_eager=True, max_logprobs=5, tokenizer_mode="slow",
        hf_overrides=[{"num_hidden_layers": 2}, runtime_switch], max_model_len=1000,
    )
    draft_path = make_checkpoint("draft", num_hidden_layers=1)
    spec = SpeculativeConfig.from_dict(
        {"method": "draft_model", "model": draft_path, "num_speculative_tokens": 2, "revision": "r1",
         "quantization": "fp8", "max_model_len": 800},
        target_model_config=target,
    )
    draft = spec.draft_model_config
    # inherited
    assert (draft.dtype, draft.seed, draft.trust_remote_code, draft.enforce_eager, draft.max_logprobs, draft.tokenizer_mode) == (
        "bfloat16", 7, True, True, 5, "slow"
    )
    assert draft.tokenizer == target.tokenizer
    # draft-specific
    assert (draft.model, draft.revision, draft.quantization) == (draft_path, "r1", "fp8")
    # special
    assert (draft.runner, draft.max_model_len, draft.spec_target_max_model_len) == ("draft", 800, 1000)
    assert draft.hf_config["use_fancy_rope"] is True and draft.num_hidden_layers == 1  # callables only


@pytest.mark.parametrize(("rope", "raised"), [(None, True), ({"rope_type": "llama3"}, True), ({"type": "linear"}, True),
                                              ({"rope_type": "yarn"}, False), ({"rope_type": "dynamic"}, False),
                                              ({"rope_type": "longrope"}, False), ({"rope_type": "deepseek"}, False)])
def test_max_position_embeddings_raised_only_for_cache_only_rope(fakes, make_checkpoint, rope, raised):
    target = ModelConfig(model=make_checkpoint("target", max_position_embeddings=4096))
    draft_path = make_checkpoint("draft", max_position_embeddings=1024, rope_scaling=rope)
    spec = draft_spec(target, draft_path)
    expected = 4096 if raised else 1024
    assert spec.draft_model_config.max_position_embeddings == expected
    assert spec.draft_model_config.max_model_len == expected
    assert spec.speculator_config.max_model_len == expected


def test_no_raise_when_the_class_does_not_share_positions(fakes, make_checkpoint):
    @attrs.frozen(kw_only=True)
    class OwnPositions(fakes.FakeStandalone):
        shares_target_positions = False

    from specpath import register_speculative_method

    register_speculative_method("own_positions", OwnPositions)
    target = ModelConfig(model=make_checkpoint("target", max_position_embeddings=4096))
    spec = SpeculativeConfig.from_dict(
        {"method": "own_positions", "model": make_checkpoint("draft", max_position_embeddings=1024),
         "num_speculative_tokens": 2},
        target_model_config=target,
    )
    assert spec.draft_model_config.max_position_embeddings == 1024


def test_n_predict_rules(make_checkpoint):
    draft = ModelConfig(model=make_checkpoint("mtp", n_predict=2), runner="draft")
    assert resolve_num_speculative_tokens(None, draft) == 2
    assert resolve_num_speculative_tokens(1, draft) == 1
    assert resolve_num_speculative_tokens(4, draft) == 4
    with pytest.raises(SpeculativeConfigError, match=r"num_speculative_tokens:\d+ must be divisible by n_predict=2"):
        resolve_num_speculative_tokens(3, draft)
    plain = ModelConfig(model=make_checkpoint("plain"), runner="draft")
    assert resolve_num_speculative_tokens(None, plain) is None and resolve_num_speculative_tokens(3, plain) == 3


def test_draft_tp_rule():
    target = ParallelConfig(tensor_parallel_size=4)
    assert verify_and_get_draft_tp(None, target) == 4
    assert verify_and_get_draft_tp(1, target) == 1 and verify_and_get_draft_tp(4, target) == 4
    with pytest.raises(SpeculativeConfigError) as info:
        verify_and_get_draft_tp(2, target)
    assert str(info.value) == (
        "speculative_config.draft_tensor_parallel_size: must be 1 or the target's tensor_parallel_size (4) "
        "(got 2; allowed: 1, 4)"
    )


def test_draft_parallel_config_has_expert_parallelism_only_for_moe_drafts(make_checkpoint):
    target = ParallelConfig(tensor_parallel_size=2, data_parallel_size=2, enable_expert_parallel=True)
    dense = ModelConfig(model=make_checkpoint("dense"), runner="draft")
    moe = ModelConfig(model=make_checkpoint("moe", n_routed_experts=8), runner="draft")
    assert not create_draft_parallel_config(target, 1, dense).enable_expert_parallel
    draft_parallel = create_draft_parallel_config(target, 2, moe)
    assert draft_parallel.enable_expert_parallel and draft_parallel.tensor_parallel_size == 2
    assert draft_parallel.data_parallel_size == 2 and draft_parallel.pipeline_parallel_size == 1


def test_draft_parallel_checks_run_at_start_up(fakes, make_checkpoint):
    target = ModelConfig(model=make_checkpoint("target", num_attention_heads=8, num_key_value_heads=8))
    draft = make_checkpoint("draft", num_attention_heads=3, num_key_value_heads=3)
    with pytest.raises(SpeculativeConfigError, match="3 attention heads, not divisible by tensor_parallel_size"):
        SpeculativeConfig.from_dict(
            {"method": "draft_model", "model": draft, "num_speculative_tokens": 2},
            target_model_config=target, target_parallel_config=ParallelConfig(tensor_parallel_size=2),
        )
    ok = SpeculativeConfig.from_dict(
        {"method": "draft_model", "model": draft, "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1},
        target_model_config=target, target_parallel_config=ParallelConfig(tensor_parallel_size=2),
    )
    assert ok.draft_parallel_config.tensor_parallel_size == 1


def test_verify_with_parallel_config_experts(make_checkpoint):
    moe = ModelConfig(model=make_checkpoint("moe", num_experts=6))
    with pytest.raises(SpeculativeConfigError, match="6 experts, not divisible"):
        moe.verify_with_parallel_config(ParallelConfig(tensor_parallel_size=2, data_parallel_size=2, enable_expert_parallel=True))
    dense = ModelConfig(model=make_checkpoint("dense"))
    with pytest.raises(SpeculativeConfigError, match="has no experts"):
        dense.verify_with_parallel_config(ParallelConfig(enable_expert_parallel=True))


def test_apply_draft_overrides_only_overlays_what_is_set(fakes):
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=2, kv_cache_dtype="fp8", attention_backend="flex")
    cache = CacheConfig(block_size=32, kv_cache_dtype="auto")
    out = apply_draft_overrides(spec, cache_config=cache, kernel_config=KernelConfig(moe_backend="triton"))
    assert out.cache_config == CacheConfig(block_size=32, kv_cache_dtype="fp8")
    assert out.kernel_config.moe_backend == "triton"  # not set in the spec: inherited
    assert out.attention_config == AttentionConfig(backend="flex")
    assert cache.kv_cache_dtype == "auto"  # copies, never the target's own


def test_parallel_config_validates_sizes():
    with pytest.raises(SpeculativeConfigError, match="tensor_parallel_size: must be an integer >= 1"):
        ParallelConfig(tensor_parallel_size=0)
    assert ParallelConfig(tensor_parallel_size=2, pipeline_parallel_size=2).world_size == 4


def test_draft_load_config_structures_strictly(fakes):
    spec = SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 2,
                                        "draft_load_config": {"load_format": "safetensors"}})
    assert spec.draft_load_config.load_format == "safetensors"
    with pytest.raises(SpeculativeConfigError, match="draft_load_config: unknown key 'laod_format'"):
        SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 2,
                                     "draft_load_config": {"laod_format": "safetensors"}})
    json.dumps(spec.to_dict())


@pytest.mark.parametrize("bad", ["12", 3.5, -1, True, [4]])
def test_damaged_sizes_in_config_json_are_one_line_errors(make_checkpoint, bad):
    with pytest.raises(SpeculativeConfigError, match="'num_attention_heads' must be a non-negative integer"):
        ModelConfig(model=make_checkpoint("damaged", num_attention_heads=bad))
