"""The specpath conformance kit, applied to ``eagle`` and ``extract_hidden_states``.

The kit's toy target is a random 2-layer byte-level Llama (``tiny_checkpoint``); the EAGLE
head it runs is a random one shaped for that target, written once per session.
"""

import tempfile

from specpath_engine.model import LlamaModel
from specpath_engine.testing import conformance_tests
from specpath_engine.testing.engine import tiny_checkpoint
from specpath_eagle.config import EagleSpeculatorConfig, ExtractHiddenStatesSpeculatorConfig
from specpath_drafting.testing import TARGET_STATE_FLAGS, random_head
from specpath_eagle.head import EagleHead

TARGET = tiny_checkpoint(0)
_HEADS = tempfile.TemporaryDirectory(prefix="specpath-eagle-heads-")
EAGLE_HEAD = str(random_head(EagleHead, LlamaModel.from_pretrained(TARGET), f"{_HEADS.name}/eagle-tiny", seed=1))

HIDDEN_STATE_FLAGS = {**TARGET_STATE_FLAGS, "uses_separate_workspace_lane": False, "prefer_dense_token_history": False,
                      "supports_pcp": False}

TestEagleConformance = conformance_tests(
    "eagle", EagleSpeculatorConfig, base_config={"model": EAGLE_HEAD}, engine_model=TARGET, k_values=(1, 4),
    lookahead=(lambda k: k, 0, 1),
    flags={**HIDDEN_STATE_FLAGS, "base_method": "eagle", "uses_aux_hidden_states": False,
           "draft_kv_depends_on_next_token": True, "supports_watermarking": True, "proposes_draft_tokens": True},
    valid=[{"draft_lm_head_quantization": "fp8"}, {"use_local_argmax_reduction": True},
           {"draft_sample_method": "random"}],
    invalid=[
        ({"parallel_drafting": True}, "parallel_drafting"),
        ({"eagle_aux_hidden_state_layer_ids": [0]}, "eagle_aux_hidden_state_layer_ids"),
        ({"use_local_argmax_reduction": True, "draft_sample_method": "random"}, "greedy"),
    ],
    hash_sensitive=[({}, {"draft_lm_head_quantization": "fp8"}), ({}, {"use_local_argmax_reduction": True})],
)

TestExtractHiddenStatesConformance = conformance_tests(
    "extract_hidden_states", ExtractHiddenStatesSpeculatorConfig, engine_model=TARGET, k_values=(1, 3),
    lookahead=(0, 0, 1),
    flags={**HIDDEN_STATE_FLAGS, "base_method": "extract_hidden_states", "uses_aux_hidden_states": True,
           "proposes_draft_tokens": False, "draft_kv_depends_on_next_token": False},
    valid=[{"eagle_aux_hidden_state_layer_ids": [1, 2]}],
    invalid=[({"parallel_drafting": True}, "parallel_drafting"),
             ({"eagle_aux_hidden_state_layer_ids": [-1]}, "eagle_aux_hidden_state_layer_ids")],
    hash_sensitive=[({"eagle_aux_hidden_state_layer_ids": [1, 2]}, {"eagle_aux_hidden_state_layer_ids": [2, 1]})],
)
