"""The specpath conformance kit, applied to ``dflash`` (tiny random target + random drafter)."""

import tempfile

from specpath.testing import SpeculatorConformance
from specpath.testing.engine import tiny_checkpoint
from specpath_dflash.config import DFlashSpeculatorConfig
from specpath_drafting.block.testing import tiny_drafter

TARGET = tiny_checkpoint(0)
_DIR = tempfile.TemporaryDirectory(prefix="specpath-dflash-")
DRAFTER = tiny_drafter("dflash", TARGET, f"{_DIR.name}/dflash-tiny", seed=2)


class TestDFlashConformance(SpeculatorConformance):
    method = "dflash"
    config_class = DFlashSpeculatorConfig
    distribution = "specpath-dflash"
    base_config = {"model": DRAFTER}
    engine_model = TARGET
    k_values = (1, 4)
    expected = {
        "num_lookahead_tokens": lambda k: k + 1,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }
    expected_flags = {
        "base_method": "dflash",
        "uses_target_hidden_states": True,
        "uses_separate_workspace_lane": False,
        "draft_kv_depends_on_next_token": False,
        "supports_watermarking": True,
        "supports_pcp": False,
        "adaptive_verification_uses_draft_logits": True,
        "draft_has_own_vocab": False,
        "proposes_draft_tokens": True,
    }
    valid_options = [
        {"attention_backend": "flex_attention"},
        {"draft_sample_method": "random"},
        {"enable_adaptive_verification": True},
        {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5},
    ]
    invalid_options = [
        ({"attention_backend": "paged_causal"}, "causal-only"),
        ({"attention_backend": "no_such_backend"}, "attention_backend"),
        ({"dspark_draft_topk": 4}, "dspark_draft_topk"),
        ({"dspark_anchor_sampling": True}, "dspark_anchor_sampling"),
        ({"parallel_drafting": True}, "parallel_drafting"),
        ({"eagle_aux_hidden_state_layer_ids": [1, 0]}, "trained on target layers"),
        ({"adaptive_verification_threshold": 0.5}, "enable_adaptive_verification"),
        ({"enable_adaptive_verification": True, "adaptive_verification_threshold": 1.5}, "(0, 1]"),
    ]
    hash_sensitive_options = [
        ({}, {"enable_adaptive_verification": True}),
        ({"enable_adaptive_verification": True},
         {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5}),
    ]
