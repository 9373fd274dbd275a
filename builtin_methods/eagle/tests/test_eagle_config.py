"""The eagle and extract_hidden_states configs: method-table values, checkpoint detection in the
article's order, mismatch errors naming both methods, aux-layer defaults and the start-up
option checks (fp8 head dtype rule, local argmax greedy-only)."""

import json

import pytest

from specpath.config.engine import CacheConfig, EngineConfig
from specpath.errors import SpeculativeConfigError
from specpath_drafting.config import declared_aux_layer_ids, default_aux_layer_ids, engine_layers
from specpath_drafting.testing import config_variant, random_head, resolve, drafting_target
from specpath_eagle.config import EagleSpeculatorConfig
from specpath_eagle.head import EagleHead
from specpath_eagle.recognise import is_eagle_checkpoint, path_says_eagle, says_eagle


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = tmp_path_factory.mktemp("target")
    return path, drafting_target(path, num_layers=6)


@pytest.fixture(scope="module")
def eagle_head(target, tmp_path_factory):
    return random_head(EagleHead, target[1], tmp_path_factory.mktemp("h") / "head")


def write_checkpoint(path, **config):
    path.mkdir(parents=True, exist_ok=True)
    base = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
            "vocab_size": 64, "torch_dtype": "float32"}
    (path / "config.json").write_text(json.dumps({**base, **config}))
    return str(path)


@pytest.mark.parametrize("k", [1, 3, 8])
def test_method_table_row(eagle_head, target, k):
    spec = resolve({"method": "eagle", "model": str(eagle_head), "num_speculative_tokens": k}, target[0])
    sc = spec.speculator_config
    assert type(sc) is EagleSpeculatorConfig
    assert (sc.num_lookahead_tokens, sc.max_num_new_slots_for_drafting, sc.num_prefill_lookahead_tokens) == (k, 0, 1)
    assert sc.uses_target_hidden_states and sc.supports_watermarking and not sc.uses_aux_hidden_states
    engine = EngineConfig(speculative_config=spec, cache_config=CacheConfig(enable_prefix_caching=True))
    assert engine.use_eagle_block_drop and engine.num_hash_lookahead_tokens == 1
    no_drop = resolve({"method": "eagle", "model": str(eagle_head), "num_speculative_tokens": k,
                       "disable_eagle_block_drop": True}, target[0])
    assert not EngineConfig(speculative_config=no_drop).use_eagle_block_drop


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"architectures": ["EagleLlamaForCausalLM"]}, "eagle"),
        ({"architectures": ["EAGLEModel"]}, "eagle"),
        ({"model_type": "eagle"}, "eagle"),
        ({"architectures": ["Eagle3LlamaForCausalLM"]}, "eagle3"),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, "eagle3"),
        ({"model_type": "eagle3"}, "eagle3"),
        ({"speculators_model_type": "eagle3", "architectures": ["LlamaForCausalLM"]}, "eagle3"),
        ({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, None),
    ],
)
def test_detection_from_config(config, expected):
    # EAGLE-3 heads say "eagle" too: they are the eagle3 plugin's, and no path hint is asked for them
    assert is_eagle_checkpoint(config) == (expected == "eagle")
    assert says_eagle(config) == (expected is not None)


def test_path_hints_follow_the_article_order():
    assert path_says_eagle("/m/yuhuili/EAGLE-LLaMA3-Instruct-8B")
    assert not path_says_eagle("/m/eagle3-llama-head")
    assert path_says_eagle("/m/my-eagle-eagle3-head")  # eagle is tried first
    assert not path_says_eagle("/m/llama-68m")


def test_no_method_detects_from_config_json(tmp_path, target):
    eagle = write_checkpoint(tmp_path / "a", architectures=["EagleLlamaForCausalLM"])
    eagle3 = write_checkpoint(tmp_path / "b", model_type="eagle3")
    assert resolve({"model": eagle, "num_speculative_tokens": 2}).method == "eagle"
    assert resolve({"model": eagle3, "num_speculative_tokens": 2}).method == "eagle3"


def test_no_method_detects_from_path_last(tmp_path):
    by_path = write_checkpoint(tmp_path / "org-eagle-head", architectures=["LlamaForCausalLM"], model_type="llama")
    assert resolve({"model": by_path, "num_speculative_tokens": 2}).method == "eagle"
    # Config evidence wins over a misleading path.
    misleading = write_checkpoint(tmp_path / "eagle-named", architectures=["Eagle3LlamaForCausalLM"])
    assert resolve({"model": misleading, "num_speculative_tokens": 2}).method == "eagle3"
    plain = write_checkpoint(tmp_path / "small-llama", architectures=["LlamaForCausalLM"], model_type="llama")
    assert resolve({"model": plain, "num_speculative_tokens": 2}).method == "draft_model"


def test_explicit_method_that_disagrees_with_the_checkpoint_names_both(tmp_path):
    eagle3 = write_checkpoint(tmp_path / "c", architectures=["Eagle3LlamaForCausalLM"])
    with pytest.raises(SpeculativeConfigError) as info:
        resolve({"method": "eagle", "model": eagle3, "num_speculative_tokens": 2})
    message = str(info.value)
    assert "'eagle'" in message and "'eagle3'" in message and "\n" not in message


def test_shipped_checkpoints_declare_themselves(eagle_head):
    config = json.loads((eagle_head / "config.json").read_text())
    assert config["speculator_config_class"] == "eagle"
    assert config["architectures"] == ["EagleLlamaForCausalLM"] and config["model_type"] == "eagle"
    with pytest.raises(SpeculativeConfigError, match="'eagle3'.*'eagle'|'eagle'.*'eagle3'"):
        resolve({"method": "eagle3", "model": str(eagle_head), "num_speculative_tokens": 2})


def test_default_aux_layers():
    """vLLM/SGLang convention: id i is the state entering decoder layer i."""
    assert default_aux_layer_ids(6) == (2, 3, 5)
    assert default_aux_layer_ids(32) == (2, 16, 29)  # vLLM's (2, N//2, N-3)
    assert engine_layers(default_aux_layer_ids(32)) == (1, 15, 28)  # outputs of layers 1, 15, 28
    for n in range(2, 40):
        ids = default_aux_layer_ids(n)
        assert len(ids) == 3 and list(ids) == sorted(ids) and all(1 <= i < n for i in ids)
        assert all(0 <= layer < n - 1 for layer in engine_layers(ids))  # the final output is never tapped


def test_nested_eagle_config_ids_are_read():
    assert declared_aux_layer_ids({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}) == (1, 29, 57)
    assert declared_aux_layer_ids({"eagle_aux_hidden_state_layer_ids": [2, 3, 5], "eagle_config": {}}) == (2, 3, 5)
    assert declared_aux_layer_ids({"eagle_config": {"eagle_aux_hidden_state_layer_ids": ["1"]}}) is None
    assert declared_aux_layer_ids({}) is None


def test_extract_hidden_states_defaults_taps_from_target_and_hashes_them(target):
    spec = resolve({"method": "extract_hidden_states"}, target[0])
    assert spec.eagle_aux_hidden_state_layer_ids == (2, 3, 5)
    assert spec.speculator_config.proposes_draft_tokens is False
    other = resolve({"method": "extract_hidden_states", "eagle_aux_hidden_state_layer_ids": [1, 2, 5]}, target[0])
    assert other.compute_hash() != spec.compute_hash()
    with pytest.raises(SpeculativeConfigError, match="eagle_aux_hidden_state_layer_ids"):
        resolve({"method": "extract_hidden_states", "eagle_aux_hidden_state_layer_ids": [1, 7]}, target[0])
    with pytest.raises(SpeculativeConfigError, match="entering decoder layer i"):
        resolve({"method": "extract_hidden_states", "eagle_aux_hidden_state_layer_ids": [0, 2]}, target[0])


def test_fp8_head_needs_the_head_in_the_model_dtype(tmp_path, eagle_head, target):
    ok = resolve({"method": "eagle", "model": str(eagle_head), "num_speculative_tokens": 2,
                  "draft_lm_head_quantization": "fp8"}, target[0])
    assert ok.draft_lm_head_quantization == "fp8"
    low = config_variant(eagle_head, tmp_path / "head-bf16-lm-head", head_dtype="bfloat16")
    with pytest.raises(SpeculativeConfigError, match="draft_lm_head_quantization.*model dtype"):
        resolve({"method": "eagle", "model": str(low), "num_speculative_tokens": 2,
                 "draft_lm_head_quantization": "fp8"}, target[0])
    # EAGLE-1 drafts through the target's head: its dtype counts too.
    tgt_cfg = json.loads((target[0] / "config.json").read_text())
    low_target = tmp_path / "target-bf16-head"
    low_target.mkdir()
    (low_target / "config.json").write_text(json.dumps({**tgt_cfg, "head_dtype": "bfloat16"}))
    with pytest.raises(SpeculativeConfigError, match="shared LM head"):
        resolve({"method": "eagle", "model": str(eagle_head), "num_speculative_tokens": 2,
                 "draft_lm_head_quantization": "fp8"}, low_target)
    nvfp4 = resolve({"method": "eagle", "model": str(eagle_head), "num_speculative_tokens": 2,
                     "draft_lm_head_quantization": "nvfp4"}, target[0])
    assert nvfp4.draft_lm_head_quantization == "nvfp4"


def test_local_argmax_is_greedy_only(eagle_head):
    spec = resolve({"method": "eagle", "model": str(eagle_head), "num_speculative_tokens": 2,
                    "use_local_argmax_reduction": True})
    assert spec.use_local_argmax_reduction
    with pytest.raises(SpeculativeConfigError, match="greedy"):
        resolve({"method": "eagle", "model": str(eagle_head), "num_speculative_tokens": 2,
                 "use_local_argmax_reduction": True, "draft_sample_method": "random"})
