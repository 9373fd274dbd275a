"""The specpath conformance kit, applied to ``dspark`` in its anchor-first layout and in the
[anchor, masks] fill-in layout (``dspark_anchor_sampling = false``)."""

import tempfile

from specpath.testing import SpeculatorConformance
from specpath.testing.engine import tiny_checkpoint
from specpath_drafting.block.testing import tiny_drafter
from specpath_dspark.config import DSparkSpeculatorConfig
from specpath_dspark.testing import strong_heads

TARGET = tiny_checkpoint(0)
_DIR = tempfile.TemporaryDirectory(prefix="specpath-dspark-")
ANCHOR_FIRST = tiny_drafter("dspark", TARGET, f"{_DIR.name}/anchor-first", seed=2, markov_rank=8, build=strong_heads)
FILL_IN = tiny_drafter("dspark", TARGET, f"{_DIR.name}/fill-in", seed=3, markov_rank=8, anchor_sampling=False,
                       build=strong_heads)


class DSparkConformance(SpeculatorConformance):
    method = "dspark"
    config_class = DSparkSpeculatorConfig
    distribution = "specpath-dspark"
    engine_model = TARGET
    k_values = (1, 4)
    expected_flags = {
        "base_method": "dspark",
        "uses_target_hidden_states": True,
        "uses_separate_workspace_lane": True,
        "draft_kv_depends_on_next_token": False,
        "supports_watermarking": False,
        "supports_pcp": True,
        "adaptive_verification_uses_draft_logits": False,
        "draft_has_own_vocab": False,
        "proposes_draft_tokens": True,
    }
    valid_options = [
        {"dspark_draft_topk": 4},
        {"draft_sample_method": "random", "dspark_draft_topk": 16},
        {"enable_adaptive_verification": True},
        {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5},
        {"attention_backend": "torch_sdpa"},
        {"xpress_topc": 2},
        {"xpress_topc": 4, "enable_adaptive_verification": True},
    ]
    invalid_options = [
        ({"dspark_draft_topk": 0}, "dspark_draft_topk"),
        ({"dspark_draft_topk": 1000}, "vocabulary size"),
        ({"attention_backend": "flash_decoding"}, "causal-only"),
        ({"xpress_topc": 0}, "xpress_topc"),
        ({"draft_lm_head_quantization": "fp8"}, "draft_lm_head_quantization"),
        ({"parallel_drafting": True}, "parallel_drafting"),
    ]
    hash_sensitive_options = [
        ({}, {"enable_adaptive_verification": True}),
        ({}, {"dspark_draft_topk": 4}),
        ({}, {"xpress_topc": 2}),
    ]


class TestDSparkAnchorFirst(DSparkConformance):
    base_config = {"model": ANCHOR_FIRST}
    expected = {
        "num_lookahead_tokens": lambda k: k,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }
    invalid_options = [*DSparkConformance.invalid_options, ({"dspark_anchor_sampling": False}, "layout")]


class TestDSparkFillIn(DSparkConformance):
    base_config = {"model": FILL_IN, "dspark_anchor_sampling": False}
    expected = {
        "num_lookahead_tokens": lambda k: k + 1,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 1,
    }
    invalid_options = [*DSparkConformance.invalid_options, ({"dspark_anchor_sampling": True}, "layout")]


DSparkConformance.__test__ = False  # shared options; the two subclasses above are the test classes
