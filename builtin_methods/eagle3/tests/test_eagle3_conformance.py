"""The specpath conformance kit, applied to ``eagle3`` (chain) and P-EAGLE (``parallel_drafting``)."""

import tempfile

from specpath_engine.model import LlamaModel
from specpath_engine.testing import conformance_tests
from specpath_engine.testing.engine import tiny_checkpoint
from specpath_drafting.testing import TARGET_STATE_FLAGS, random_head
from specpath_eagle3.head import Eagle3Head
from specpath_eagle3.config import Eagle3SpeculatorConfig

TARGET = tiny_checkpoint(0)
_HEADS = tempfile.TemporaryDirectory(prefix="specpath-eagle3-heads-")
HEAD = str(random_head(Eagle3Head, LlamaModel.from_pretrained(TARGET), f"{_HEADS.name}/eagle3-tiny", seed=2,
                       parallel_drafting=True, draft_vocab_size=160))

HASH_SENSITIVE = [
    ({"eagle_aux_hidden_state_layer_ids": [1, 2, 2]}, {"eagle_aux_hidden_state_layer_ids": [2, 2, 1]}),
    ({}, {"draft_lm_head_quantization": "fp8"}),
    ({"draft_lm_head_quantization": "fp8"}, {"draft_lm_head_quantization": "nvfp4"}),
]
EAGLE3 = dict(
    engine_model=TARGET, k_values=(1, 4),
    flags={**TARGET_STATE_FLAGS, "base_method": "eagle3", "uses_aux_hidden_states": True,
           "uses_separate_workspace_lane": False, "draft_kv_depends_on_next_token": True,
           "supports_watermarking": False, "supports_pcp": False, "proposes_draft_tokens": True},
    valid=[
        {"draft_lm_head_quantization": "fp8"},
        {"draft_lm_head_quantization": "nvfp4"},
        {"use_local_argmax_reduction": True},
        {"eagle_aux_hidden_state_layer_ids": [1, 2, 2]},
        {"draft_sample_method": "random"},
    ],
    invalid=[
        ({"eagle_aux_hidden_state_layer_ids": [1, 2]}, "fuses exactly 3"),
        ({"eagle_aux_hidden_state_layer_ids": [1, 2, -1]}, "eagle_aux_hidden_state_layer_ids"),
        ({"eagle_aux_hidden_state_layer_ids": [0, 1, 2]}, "entering decoder layer i"),
        ({"index_share_for_mtp_iteration": True}, "index_share_for_mtp_iteration"),
    ],
)

TestEagle3Conformance = conformance_tests(  # the head declares parallel_drafting: chain drafting is asked for
    "eagle3", Eagle3SpeculatorConfig, base_config={"model": HEAD, "parallel_drafting": False}, lookahead=(lambda k: k, 0, 1),
    hash_sensitive=[*HASH_SENSITIVE, ({}, {"parallel_drafting": True})], **EAGLE3)
TestPEagleConformance = conformance_tests(  # P-EAGLE: every draft after the first is a new query row
    "eagle3", Eagle3SpeculatorConfig, base_config={"model": HEAD, "parallel_drafting": True},
    lookahead=(lambda k: k, lambda k: k - 1, 1), hash_sensitive=HASH_SENSITIVE, **EAGLE3)
