"""The specpath conformance kit, applied to ``eagle3`` (chain) and P-EAGLE (``parallel_drafting``)."""

import tempfile

from specpath.engine.model import LlamaModel
from specpath.testing import SpeculatorConformance
from specpath.testing.engine import tiny_checkpoint
from specpath_drafting.testing import random_head
from specpath_eagle3.head import Eagle3Head
from specpath_eagle3.config import Eagle3SpeculatorConfig

TARGET = tiny_checkpoint(0)
_HEADS = tempfile.TemporaryDirectory(prefix="specpath-eagle3-heads-")
HEAD = str(random_head(Eagle3Head, LlamaModel.from_pretrained(TARGET), f"{_HEADS.name}/eagle3-tiny", seed=2,
                       parallel_drafting=True, draft_vocab_size=160))


class Eagle3Conformance(SpeculatorConformance):
    method = "eagle3"
    config_class = Eagle3SpeculatorConfig
    distribution = "specpath-eagle3"
    engine_model = TARGET
    k_values = (1, 4)
    expected_flags = {
        "base_method": "eagle3",
        "uses_target_hidden_states": True,
        "uses_aux_hidden_states": True,
        "uses_separate_workspace_lane": False,
        "draft_kv_depends_on_next_token": True,
        "supports_watermarking": False,
        "draft_has_own_vocab": False,
        "supports_pcp": False,
        "proposes_draft_tokens": True,
    }
    valid_options = [
        {"draft_lm_head_quantization": "fp8"},
        {"use_local_argmax_reduction": True},
        {"eagle_aux_hidden_state_layer_ids": [0, 1, 1]},
        {"draft_sample_method": "random"},
    ]
    invalid_options = [
        ({"eagle_aux_hidden_state_layer_ids": [0, 1]}, "fuses exactly 3"),
        ({"eagle_aux_hidden_state_layer_ids": [0, 1, -1]}, "eagle_aux_hidden_state_layer_ids"),
        ({"draft_lm_head_quantization": "nvfp4"}, "draft_lm_head_quantization"),
        ({"index_share_for_mtp_iteration": True}, "index_share_for_mtp_iteration"),
    ]
    hash_sensitive_options = [
        ({"eagle_aux_hidden_state_layer_ids": [0, 1, 1]}, {"eagle_aux_hidden_state_layer_ids": [1, 1, 0]}),
        ({}, {"draft_lm_head_quantization": "fp8"}),
    ]


class TestEagle3Conformance(Eagle3Conformance):
    base_config = {"model": HEAD}
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }
    hash_sensitive_options = [*Eagle3Conformance.hash_sensitive_options, ({}, {"parallel_drafting": True})]


class TestPEagleConformance(Eagle3Conformance):
    base_config = {"model": HEAD, "parallel_drafting": True}
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: k - 1,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }


Eagle3Conformance.__test__ = False  # shared options; the two subclasses above are the test classes
