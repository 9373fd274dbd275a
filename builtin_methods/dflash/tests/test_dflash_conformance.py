"""The specpath conformance kit, applied to ``dflash`` (tiny random target + random drafter)."""

import tempfile

from specpath_engine.testing import conformance_tests
from specpath_engine.testing.engine import tiny_checkpoint
from specpath_dflash.config import DFlashSpeculatorConfig
from specpath_drafting.block.testing import tiny_drafter
from specpath_drafting.testing import TARGET_STATE_FLAGS

TARGET = tiny_checkpoint(0)
_DIR = tempfile.TemporaryDirectory(prefix="specpath-dflash-")
DRAFTER = tiny_drafter("dflash", TARGET, f"{_DIR.name}/dflash-tiny", seed=2)

TestDFlashConformance = conformance_tests(
    "dflash", DFlashSpeculatorConfig, base_config={"model": DRAFTER}, engine_model=TARGET, k_values=(1, 4),
    lookahead=(lambda k: k + 1, 0, 1),
    flags={**TARGET_STATE_FLAGS, "base_method": "dflash", "uses_separate_workspace_lane": False,
           "draft_kv_depends_on_next_token": False, "supports_watermarking": True, "supports_pcp": False,
           "adaptive_verification_uses_draft_logits": True, "proposes_draft_tokens": True},
    valid=[
        {"attention_backend": "flex_attention"},
        {"draft_sample_method": "random"},
        {"enable_adaptive_verification": True},
        {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5},
    ],
    invalid=[
        ({"attention_backend": "paged_causal"}, "causal-only"),
        ({"attention_backend": "no_such_backend"}, "attention_backend"),
        ({"dspark_draft_topk": 4}, "dspark_draft_topk"),
        ({"dspark_anchor_sampling": True}, "dspark_anchor_sampling"),
        ({"parallel_drafting": True}, "parallel_drafting"),
        ({"eagle_aux_hidden_state_layer_ids": [1, 0]}, "trained on the outputs of target layers"),
        ({"adaptive_verification_threshold": 0.5}, "enable_adaptive_verification"),
        ({"enable_adaptive_verification": True, "adaptive_verification_threshold": 1.5}, "(0, 1]"),
    ],
    hash_sensitive=[
        ({}, {"enable_adaptive_verification": True}),
        ({"enable_adaptive_verification": True},
         {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5}),
    ],
)
