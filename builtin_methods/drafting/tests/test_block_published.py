"""Block-drafter config.json files in the formats the ecosystem publishes (z-lab, SpecForge,
speculators, specpath): kind, taps, mask token, block size and layout record."""

import pytest

from specpath_drafting.block.published import block_kind, block_size, mask_token_id, path_names, recorded_layout, \
    target_layer_ids

ZLAB = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": 16,
        "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}}
SPECFORGE = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "block_size": 16, "num_target_layers": 36,
             "num_hidden_layers": 5}
SPECFORGE_DSPARK = {**ZLAB, "architectures": ["DSparkDraftModel"],
                    "dflash_config": {**ZLAB["dflash_config"], "projector_type": "dspark", "markov_rank": 256}}
SPECULATORS_DSPARK = {"speculators_model_type": "dspark", "aux_hidden_state_layer_ids": [24, 48, 72],
                      "mask_token_id": 7, "block_size": 8, "sample_from_anchor": True}
SPECPATH = {"model_type": "dflash", "target_layer_ids": [1, 2, 4], "anchor_sampling": False}


@pytest.mark.parametrize("config, kind", [
    (ZLAB, "dflash"), (SPECFORGE, "dflash"), (SPECFORGE_DSPARK, "dspark"), (SPECULATORS_DSPARK, "dspark"),
    (SPECPATH, "dflash"), ({"architectures": ["Qwen3DSparkModel"]}, "dspark"),
    ({"model_type": "deepseek_v41"}, "dspark"), ({"architectures": ["LlamaForCausalLMEagle3"]}, None),
    ({"model_type": "deepseek_v3"}, None),
])
def test_kind(config, kind):
    assert block_kind(config) == kind


def test_taps_from_wherever_the_format_keeps_them():
    assert target_layer_ids(ZLAB) == (1, 9, 17, 25, 33)
    assert target_layer_ids(SPECFORGE) == (1, 9, 17, 25, 33)  # the reference spacing of 36 layers, 5 taps
    assert target_layer_ids(SPECULATORS_DSPARK) == (23, 47, 71)  # vLLM's "entering i" -> DFlash's "output of i-1"
    assert target_layer_ids(SPECPATH) == (1, 2, 4)
    assert target_layer_ids({"dflash_config": {"target_layer_ids": ["1"]}}) is None


def test_mask_token_block_size_and_layout():
    assert mask_token_id(ZLAB) == 151669 and mask_token_id(SPECULATORS_DSPARK) == 7
    assert mask_token_id({"pard_token": 3}) == 3 and mask_token_id({}) is None
    assert block_size(ZLAB) == 16 and block_size({"dflash_config": {"block_size": 4}}) == 4
    assert block_size({"dspark_block_size": 7}) == 7 and block_size({}) is None
    assert recorded_layout(ZLAB) is None and recorded_layout(SPECULATORS_DSPARK) is True
    assert recorded_layout(SPECPATH) is False
    assert recorded_layout({"dflash_config": {"sample_from_anchor": False}}) is False



def test_the_path_hint_is_asked_only_of_configs_that_say_nothing():
    assert path_names({"model_type": "qwen3"}, "/m/z-lab/Qwen3-8B-DFlash-b16", "dflash")
    assert not path_names({"model_type": "qwen3"}, "/m/Qwen3-8B-DFlash-b16", "dspark")
    assert not path_names(ZLAB, "/m/some-dspark-run", "dspark")  # the config says DFlash: no guess
    assert not path_names({}, None, "dflash")
