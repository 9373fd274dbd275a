"""Configuration rules of draft_model: what the draft ModelConfig inherits, which target overrides
reach it, the RoPE-dependent max_position_embeddings rule, draft TP and EP, the method table
(PARD slots), PARD's mask token, the vocabulary rule and the shipped defaults."""

import json

import pytest

import tiny_drafts
from specpath.config.model import ModelConfig, ParallelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath_draft_model.config import StandaloneARSpeculatorConfig, shipped_draft


def draft_dir(tmp_path, name="draft", **fields):
    """A draft checkpoint directory with only a config.json (resolution reads nothing else)."""
    config = {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
        "max_position_embeddings": 256, "torch_dtype": "float32", **fields,
    }
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def resolve(model, target=None, parallel=None, **fields):
    return SpeculativeConfig.from_dict(
        {"method": "draft_model", "model": model, "num_speculative_tokens": 3, **fields},
        target_model_config=target, target_parallel_config=parallel,
    )


def target_config(**options):
    return ModelConfig(model=tiny_drafts.target(), **options)


def test_draft_model_config_inherits_runtime_fields_and_runs_as_a_draft(tmp_path):
    target = target_config(seed=7, enforce_eager=True, max_logprobs=5, tokenizer_mode="slow")
    draft = resolve(draft_dir(tmp_path, revision_note="x"), target, revision="r1", quantization="fp8").draft_model_config
    assert draft.runner == "draft"
    assert (draft.seed, draft.enforce_eager, draft.max_logprobs, draft.tokenizer_mode) == (7, True, 5, "slow")
    assert (draft.dtype, draft.trust_remote_code, draft.config_format) == (target.dtype, False, target.config_format)
    assert (draft.revision, draft.quantization) == ("r1", "fp8")  # the draft's own fields
    assert draft.tokenizer == target.tokenizer  # same vocabulary: the target's tokenizer
    assert draft.spec_target_max_model_len == target.max_model_len


def test_a_heterogeneous_draft_keeps_its_own_tokenizer(tmp_path):
    path = draft_dir(tmp_path, vocab_size=320)
    spec = resolve(path, target_config(), use_heterogeneous_vocab=True)
    assert spec.draft_model_config.tokenizer == path


def test_only_callable_target_overrides_reach_the_draft(tmp_path):
    def mark(config):
        config["runtime_switch"] = "on"
        return config

    target = target_config(hf_overrides=[{"rms_norm_eps": 0.125}, mark])
    assert target.hf_config["rms_norm_eps"] == 0.125 and target.hf_config["runtime_switch"] == "on"
    draft = resolve(draft_dir(tmp_path), target).draft_model_config
    assert draft.hf_config["runtime_switch"] == "on"
    assert draft.hf_config.get("rms_norm_eps") != 0.125


@pytest.mark.parametrize("rope_type, raised", [("default", True), ("linear", True), ("llama3", True),
                                               ("yarn", False), ("dynamic", False), ("longrope", False)])
def test_max_position_embeddings_is_raised_only_for_cache_only_rope(tmp_path, rope_type, raised):
    scaling = None if rope_type == "default" else {
        "rope_type": rope_type, "factor": 2.0, "original_max_position_embeddings": 128,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    target = target_config()
    assert target.max_model_len > 256
    draft = resolve(draft_dir(tmp_path, rope_scaling=scaling), target).draft_model_config
    expected = target.max_model_len if raised else 256
    assert draft.hf_config["max_position_embeddings"] == expected


def test_draft_tensor_parallel_size_is_one_or_the_targets(tmp_path):
    path, parallel = draft_dir(tmp_path), ParallelConfig(tensor_parallel_size=2)
    assert resolve(path, parallel=parallel).draft_tensor_parallel_size == 2  # default: the target's
    assert resolve(path, parallel=parallel, draft_tensor_parallel_size=1).draft_parallel_config.tensor_parallel_size == 1
    with pytest.raises(SpeculativeConfigError, match="draft_tensor_parallel_size.*1 or the target"):
        resolve(path, parallel=parallel, draft_tensor_parallel_size=4)


def test_expert_parallel_reaches_only_a_moe_draft(tmp_path):
    parallel = ParallelConfig(tensor_parallel_size=2, enable_expert_parallel=True)
    dense = resolve(draft_dir(tmp_path, "dense"), parallel=parallel).draft_parallel_config
    moe = resolve(draft_dir(tmp_path, "moe", num_experts=4), parallel=parallel).draft_parallel_config
    assert dense.enable_expert_parallel is False
    assert moe.enable_expert_parallel is True
    plain = resolve(draft_dir(tmp_path, "moe2", num_experts=4), parallel=ParallelConfig(tensor_parallel_size=2))
    assert plain.draft_parallel_config.enable_expert_parallel is False


@pytest.mark.parametrize("k", range(1, 9))
def test_method_table_slots(tmp_path, k):
    plain = resolve(draft_dir(tmp_path, "ar"), num_speculative_tokens=k).speculator_config
    pard = resolve(draft_dir(tmp_path, "pard", pard_token_id=255), num_speculative_tokens=k,
                   parallel_drafting=True).speculator_config
    assert (plain.num_lookahead_tokens, plain.max_num_new_slots_for_drafting) == (k, 1)
    assert (pard.num_lookahead_tokens, pard.max_num_new_slots_for_drafting) == (k, k)
    for config in (plain, pard):
        assert config.num_prefill_lookahead_tokens == 0 and config.draft_has_own_vocab
        assert not config.uses_target_hidden_states and not config.draft_kv_depends_on_next_token
    assert pard.pard_token_id == 255 and pard.is_parallel and not plain.is_parallel


@pytest.mark.parametrize("fields, text", [
    ({}, "declares None"),
    ({"pard_token_id": 256}, "below vocab_size=256"),
    ({"pard_token_id": "255"}, "declares '255'"),
])
def test_pard_needs_its_mask_token(tmp_path, fields, text):
    with pytest.raises(SpeculativeConfigError, match=text) as info:
        resolve(draft_dir(tmp_path, **fields), parallel_drafting=True)
    assert "parallel_drafting" in str(info.value) and "\n" not in str(info.value)


def test_pard_with_a_heterogeneous_vocabulary_is_refused(tmp_path):
    with pytest.raises(SpeculativeConfigError, match="use_heterogeneous_vocab"):
        resolve(draft_dir(tmp_path, pard_token_id=1), parallel_drafting=True, use_heterogeneous_vocab=True)


def test_a_different_vocabulary_needs_the_heterogeneous_flag(tmp_path):
    path = draft_dir(tmp_path, vocab_size=320)
    with pytest.raises(SpeculativeConfigError, match="set use_heterogeneous_vocab=true"):
        resolve(path, target_config())
    assert resolve(path, target_config(), use_heterogeneous_vocab=True).use_heterogeneous_vocab


def test_hash_follows_the_vocabulary_mode(tmp_path):
    path = draft_dir(tmp_path)
    assert resolve(path).compute_hash() != resolve(path, use_heterogeneous_vocab=True).compute_hash()


@pytest.mark.parametrize("fields, kind", [({}, "autoregressive"), ({"parallel_drafting": True}, "parallel"),
                                          ({"use_heterogeneous_vocab": True}, "heterogeneous")])
def test_the_shipped_draft_of_each_shape_is_the_default(fields, kind):
    spec = SpeculativeConfig.from_dict({"method": "draft_model", "num_speculative_tokens": 4, **fields},
                                       target_model_config=target_config())
    assert spec.model == shipped_draft(kind) is not None
    assert type(spec.speculator_config) is StandaloneARSpeculatorConfig


def test_no_default_draft_for_a_target_of_another_vocabulary(tmp_path):
    target = ModelConfig(model=draft_dir(tmp_path, vocab_size=32000, max_position_embeddings=512))
    with pytest.raises(SpeculativeConfigError, match="required for method 'draft_model'"):
        SpeculativeConfig.from_dict({"method": "draft_model", "num_speculative_tokens": 2},
                                    target_model_config=target)


def test_the_demo_hook_runs_the_shipped_autoregressive_draft_at_k6():
    from specpath.demo import demo_for

    demo = demo_for("draft_model", StandaloneARSpeculatorConfig)
    assert demo.skip is None and "parallel_drafting" not in demo.config
    spec = SpeculativeConfig.from_dict({**demo.config, "method": "draft_model"})
    assert spec.num_speculative_tokens == 6 and spec.model.endswith("ar")
