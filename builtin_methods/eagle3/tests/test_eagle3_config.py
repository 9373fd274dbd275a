"""Eagle3SpeculatorConfig: P-EAGLE's K-1 extra slots, aux taps (default from the target's depth,
the head's own, or the user's; all hashed), and the start-up checks specific to EAGLE-3."""

import json

import pytest

from specpath.errors import SpeculativeConfigError
from specpath_drafting.heads import HeadConfig
from specpath_drafting.testing import config_variant, random_head, resolve, drafting_target
from specpath_eagle3.head import Eagle3Head
from specpath_eagle3.config import Eagle3SpeculatorConfig


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("e3")
    target = drafting_target(root / "target", num_layers=6)
    chain = random_head(Eagle3Head, target, root / "chain", seed=1)
    parallel = random_head(Eagle3Head, target, root / "parallel", seed=2, parallel_drafting=True, draft_vocab_size=40,
                           aux_layer_ids=(1, 3, 4))
    return root / "target", chain, parallel


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_slots_chain_and_parallel(files, k):
    target, chain, parallel = files
    sc = resolve({"method": "eagle3", "model": str(chain), "num_speculative_tokens": k}, target).speculator_config
    assert type(sc) is Eagle3SpeculatorConfig
    assert (sc.num_lookahead_tokens, sc.max_num_new_slots_for_drafting, sc.num_prefill_lookahead_tokens) == (k, 0, 1)
    sp = resolve({"method": "eagle3", "model": str(parallel), "num_speculative_tokens": k, "parallel_drafting": True},
                 target).speculator_config
    assert (sp.num_lookahead_tokens, sp.max_num_new_slots_for_drafting) == (k, k - 1)


def test_aux_taps_resolution_and_hash(files):
    target, chain, parallel = files
    base = {"method": "eagle3", "num_speculative_tokens": 3}
    default = resolve({**base, "model": str(chain)}, target)
    assert default.eagle_aux_hidden_state_layer_ids == (2, 3, 5)  # entering layers 2, 3, 5 of 6
    assert resolve({**base, "model": str(chain)}).eagle_aux_hidden_state_layer_ids == (2, 3, 5)  # from the head
    trained = resolve({**base, "model": str(parallel)}, target)
    assert trained.eagle_aux_hidden_state_layer_ids == (1, 3, 4)  # what the head was trained on
    given = resolve({**base, "model": str(chain), "eagle_aux_hidden_state_layer_ids": [1, 3, 4]}, target)
    assert given.eagle_aux_hidden_state_layer_ids == (1, 3, 4)
    assert given.compute_hash() != default.compute_hash()
    assert given.speculator_config.uses_aux_hidden_states


def test_eagle3_checks(files):
    target, chain, parallel = files
    base = {"method": "eagle3", "num_speculative_tokens": 3}
    with pytest.raises(SpeculativeConfigError, match="fuses exactly 3"):
        resolve({**base, "model": str(chain), "eagle_aux_hidden_state_layer_ids": [1, 2]}, target)
    with pytest.raises(SpeculativeConfigError, match="mask parameters"):
        resolve({**base, "model": str(chain), "parallel_drafting": True}, target)
    with pytest.raises(SpeculativeConfigError, match="eagle_aux_hidden_state_layer_ids"):
        resolve({**base, "model": str(chain), "eagle_aux_hidden_state_layer_ids": [1, 2, 7]}, target)


def test_head_dtype_rule_uses_the_heads_own_lm_head(tmp_path, files):
    target, chain, _ = files
    low = config_variant(chain, tmp_path / "low-head", head_dtype="float16")
    with pytest.raises(SpeculativeConfigError, match="draft_lm_head_quantization"):
        resolve({"method": "eagle3", "model": str(low), "num_speculative_tokens": 2,
                 "draft_lm_head_quantization": "fp8"}, target)


def test_mismatch_with_an_eagle1_checkpoint(files, tmp_path):
    target, _, _ = files
    eagle1 = tmp_path / "e1"  # an EAGLE-1 head's config.json: resolution reads nothing else
    eagle1.mkdir()
    shape = drafting_target(num_layers=6).config.to_hf_dict()
    (eagle1 / "config.json").write_text(json.dumps(HeadConfig.for_target("eagle", shape).to_dict()))
    with pytest.raises(SpeculativeConfigError) as info:
        resolve({"method": "eagle3", "model": str(eagle1), "num_speculative_tokens": 2}, target)
    assert "'eagle3'" in str(info.value) and "'eagle'" in str(info.value)
    assert resolve({"model": str(eagle1), "num_speculative_tokens": 2}).method == "eagle"


def test_draft_trees_resolve_hash_explain_and_refuse_what_drafts_no_tree(files):
    target, chain, parallel = files
    base = {"method": "eagle3", "model": str(chain), "num_speculative_tokens": 6}
    tree = resolve({**base, "draft_tree_topk": 2}, target)
    plain = resolve(base, target)
    assert tree.draft_tree_topk == 2 and tree.compute_hash() != plain.compute_hash()
    assert tree.speculator_config.num_lookahead_tokens == 6  # nodes take the chain's slots
    assert tree.speculator_config.describe()["draft_shape"].startswith("tree: 2 nodes run per drafting pass")
    assert "draft_shape" not in plain.speculator_config.describe()
    blocked = resolve({**base, "draft_tree_topk": 2, "rejection_sample_method": "block"}, target)
    assert "has no effect" in blocked.speculator_config.describe()["draft_shape"]
    with pytest.raises(SpeculativeConfigError, match="draft_tree_topk=2 needs chain drafting") as e:
        resolve({**base, "model": str(parallel), "parallel_drafting": True, "draft_tree_topk": 2}, target)
    assert "\n" not in str(e.value)
    with pytest.raises(SpeculativeConfigError, match="draft_sample_method 'random' samples one chain"):
        resolve({**base, "draft_sample_method": "random", "draft_tree_topk": 3}, target)
    with pytest.raises(SpeculativeConfigError, match="draft_tree_topk"):
        resolve({**base, "draft_tree_topk": 0}, target)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"architectures": ["Eagle3LlamaForCausalLM"]}, True),
        ({"architectures": ["LlamaForCausalLMEagle3"]}, True),
        ({"model_type": "eagle3"}, True),
        ({"speculators_model_type": "eagle3", "architectures": ["LlamaForCausalLM"]}, True),
        ({"architectures": ["PEagleDraftModel"]}, True),
        ({"speculators_model_type": "peagle"}, True),
        ({"architectures": ["EagleLlamaForCausalLM"]}, False),
        ({"model_type": "eagle"}, False),
        ({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, False),
    ],
)
def test_recognition_from_config(config, expected):
    from specpath_eagle3.recognise import is_eagle3_checkpoint, says_eagle

    assert is_eagle3_checkpoint(config) is expected
    assert says_eagle(config) == (expected or "eagle" in json.dumps(config).lower())


def test_path_hint_yields_to_eagle_1():
    from specpath_eagle3.recognise import path_says_eagle3

    assert path_says_eagle3("/m/eagle3-llama-head")
    assert not path_says_eagle3("/m/my-eagle-eagle3-head")  # "eagle-" is EAGLE-1's, tried first
    assert not path_says_eagle3("/m/llama-68m")


def test_an_eagle_1_head_is_refused_by_name(tmp_path, files):
    target = files[0]
    (tmp_path / "config.json").write_text(json.dumps(
        {"architectures": ["EagleLlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
         "num_attention_heads": 4, "num_hidden_layers": 1, "vocab_size": 64}))
    with pytest.raises(SpeculativeConfigError, match="is a 'eagle' checkpoint"):
        resolve({"method": "eagle3", "model": str(tmp_path), "num_speculative_tokens": 2}, target)
