"""The specpath conformance kit, applied to ``eagle`` and ``extract_hidden_states``.

The kit's toy target is a random 2-layer byte-level Llama (``tiny_checkpoint``); the EAGLE
head it runs is a random one shaped for that target, written once per session.
"""

import tempfile

from specpath.engine.model import LlamaModel
from specpath.testing import SpeculatorConformance
from specpath.testing.engine import tiny_checkpoint
from specpath_eagle.config import EagleSpeculatorConfig, ExtractHiddenStatesSpeculatorConfig
from specpath_drafting.testing import random_head
from specpath_eagle.head import EagleHead

TARGET = tiny_checkpoint(0)
_HEADS = tempfile.TemporaryDirectory(prefix="specpath-eagle-heads-")
EAGLE_HEAD = str(random_head(EagleHead, LlamaModel.from_pretrained(TARGET), f"{_HEADS.name}/eagle-tiny", seed=1))

HIDDEN_STATE_FLAGS = {
    "uses_target_hidden_states": True,
    "uses_separate_workspace_lane": False,
    "prefer_dense_token_history": False,
    "draft_has_own_vocab": False,
    "supports_pcp": False,
}


class TestEagleConformance(SpeculatorConformance):
    method = "eagle"
    config_class = EagleSpeculatorConfig
    distribution = "specpath-eagle"
    base_config = {"model": EAGLE_HEAD}
    engine_model = TARGET
    k_values = (1, 4)
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }
    expected_flags = {
        **HIDDEN_STATE_FLAGS,
        "base_method": "eagle",
        "uses_aux_hidden_states": False,
        "draft_kv_depends_on_next_token": True,
        "supports_watermarking": True,
        "proposes_draft_tokens": True,
    }
    valid_options = [
        {"draft_lm_head_quantization": "fp8"},
        {"use_local_argmax_reduction": True},
        {"draft_sample_method": "random"},
    ]
    invalid_options = [
        ({"parallel_drafting": True}, "parallel_drafting"),
        ({"eagle_aux_hidden_state_layer_ids": [0]}, "eagle_aux_hidden_state_layer_ids"),
        ({"draft_lm_head_quantization": "nvfp4"}, "draft_lm_head_quantization"),
        ({"use_local_argmax_reduction": True, "draft_sample_method": "random"}, "greedy"),
    ]
    hash_sensitive_options = [({}, {"draft_lm_head_quantization": "fp8"}), ({}, {"use_local_argmax_reduction": True})]


class TestExtractHiddenStatesConformance(SpeculatorConformance):
    method = "extract_hidden_states"
    config_class = ExtractHiddenStatesSpeculatorConfig
    distribution = "specpath-eagle"
    engine_model = TARGET
    k_values = (1, 3)
    expected = {
        "num_lookahead_tokens": lambda k: 0,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }
    expected_flags = {
        **HIDDEN_STATE_FLAGS,
        "base_method": "extract_hidden_states",
        "uses_aux_hidden_states": True,
        "proposes_draft_tokens": False,
        "draft_kv_depends_on_next_token": False,
    }
    valid_options = [{"eagle_aux_hidden_state_layer_ids": [0, 1]}]
    invalid_options = [
        ({"parallel_drafting": True}, "parallel_drafting"),
        ({"eagle_aux_hidden_state_layer_ids": [-1]}, "eagle_aux_hidden_state_layer_ids"),
    ]
    hash_sensitive_options = [({"eagle_aux_hidden_state_layer_ids": [0, 1]}, {"eagle_aux_hidden_state_layer_ids": [1, 0]})]
