"""Which checkpoints carry MTP layers, from their own config.json, as vLLM renames them."""

import pytest

from specpath.methods import MTP_ALIASES
from specpath_mtp.recognise import TARGET_ARCHITECTURES, TARGET_MODEL_TYPES, mtp_layer_count, mtp_type


@pytest.mark.parametrize("model_type, renamed", sorted(TARGET_MODEL_TYPES.items()))
def test_every_target_type_maps_to_a_known_alias(model_type, renamed):
    assert renamed in MTP_ALIASES
    config = {"model_type": model_type, "num_nextn_predict_layers": 2}
    assert mtp_type(config) == renamed and mtp_layer_count(config) == 2


@pytest.mark.parametrize("arch, renamed", sorted(TARGET_ARCHITECTURES.items()))
def test_every_target_architecture_maps_to_a_known_alias(arch, renamed):
    assert renamed in MTP_ALIASES
    assert mtp_type({"architectures": [arch], "model_type": "anything"}) == renamed


@pytest.mark.parametrize("config, count", [
    ({"model_type": "deepseek_v3", "num_nextn_predict_layers": 1}, 1),
    ({"model_type": "qwen3_next"}, 1),  # no key: one layer (vLLM's default)
    ({"model_type": "longcat_flash", "num_layers": 28}, 1),
    ({"model_type": "qwen3_5_moe", "text_config": {"mtp_num_hidden_layers": 3}}, 3),
    ({"model_type": "minimax_m3_vl", "num_mtp_modules": 3}, 3),
    ({"model_type": "deepseek_mtp", "num_nextn_predict_layers": 2}, 2),
    ({"model_type": "mtp", "num_nextn_predict_layers": 3}, 3),
])
def test_layer_counts_are_read_where_each_family_writes_them(config, count):
    assert mtp_layer_count(config) == count


@pytest.mark.parametrize("config", [
    {"model_type": "deepseek_v3", "num_nextn_predict_layers": 0},  # e.g. a V3-shaped model without MTP weights
    {"model_type": "nemotron_h"},  # vLLM: Nemotron-H is MTP only with num_nextn_predict_layers > 0
    {"model_type": "nemotron_h", "num_nextn_predict_layers": 0},
    {"model_type": "llama", "architectures": ["LlamaForCausalLM"]},
    {"model_type": "deepseek_v41", "num_nextn_predict_layers": 3},  # V4.1 ships DSpark stages, no classic MTP
    {},
])
def test_checkpoints_without_mtp_layers_are_not_claimed(config):
    assert mtp_type(config) is None and mtp_layer_count(config) == 0
