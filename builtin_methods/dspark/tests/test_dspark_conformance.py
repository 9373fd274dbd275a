"""The specpath conformance kit, applied to ``dspark`` in its anchor-first layout and in the
[anchor, masks] fill-in layout (``dspark_anchor_sampling = false``)."""

import tempfile

from specpath_engine.testing import conformance_tests
from specpath_engine.testing.engine import tiny_checkpoint
from specpath_drafting.block.testing import tiny_drafter
from specpath_drafting.testing import TARGET_STATE_FLAGS
from specpath_dspark.config import DSparkSpeculatorConfig
from specpath_dspark.testing import strong_heads

TARGET = tiny_checkpoint(0)
_DIR = tempfile.TemporaryDirectory(prefix="specpath-dspark-")
ANCHOR_FIRST = tiny_drafter("dspark", TARGET, f"{_DIR.name}/anchor-first", seed=2, markov_rank=8, build=strong_heads)
FILL_IN = tiny_drafter("dspark", TARGET, f"{_DIR.name}/fill-in", seed=3, markov_rank=8, anchor_sampling=False,
                       build=strong_heads)

INVALID = [
    ({"dspark_draft_topk": 0}, "dspark_draft_topk"),
    ({"dspark_draft_topk": 1000}, "vocabulary size"),
    ({"attention_backend": "flash_decoding"}, "causal-only"),
    ({"xpress_topc": 0}, "xpress_topc"),
    ({"draft_lm_head_quantization": "fp8"}, "draft_lm_head_quantization"),
    ({"parallel_drafting": True}, "parallel_drafting"),
]
DSPARK = dict(
    engine_model=TARGET, k_values=(1, 4),
    flags={**TARGET_STATE_FLAGS, "base_method": "dspark", "uses_separate_workspace_lane": True,
           "draft_kv_depends_on_next_token": False, "supports_watermarking": False, "supports_pcp": True,
           "adaptive_verification_uses_draft_logits": False, "proposes_draft_tokens": True},
    valid=[
        {"dspark_draft_topk": 4},
        {"draft_sample_method": "random", "dspark_draft_topk": 16},
        {"enable_adaptive_verification": True},
        {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5},
        {"attention_backend": "torch_sdpa"},
        {"xpress_topc": 2},
        {"xpress_topc": 4, "enable_adaptive_verification": True},
    ],
    hash_sensitive=[({}, {"enable_adaptive_verification": True}), ({}, {"dspark_draft_topk": 4}),
                    ({}, {"xpress_topc": 2})],
)

TestDSparkAnchorFirst = conformance_tests(
    "dspark", DSparkSpeculatorConfig, base_config={"model": ANCHOR_FIRST}, lookahead=(lambda k: k, 0, 1),
    invalid=[*INVALID, ({"dspark_anchor_sampling": False}, "layout")], **DSPARK)
TestDSparkFillIn = conformance_tests(
    "dspark", DSparkSpeculatorConfig, base_config={"model": FILL_IN, "dspark_anchor_sampling": False},
    lookahead=(lambda k: k + 1, 0, 1), invalid=[*INVALID, ({"dspark_anchor_sampling": True}, "layout")], **DSPARK)
