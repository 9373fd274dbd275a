"""``DFlashSpeculatorConfig``: the dflash row of the method table.

DFlash is the block drafter (:mod:`specpath_drafting.block`) in the fill-in layout: the block is
[anchor, K masks], the anchor is context and the K masks are the predictions (K+1 lookahead
slots). Its drafts come from the target's own head, so a watermark can bias them.

Attrs only: importing this module must not import torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from specpath.config.shipped import EMBEDDED_TARGET, SMOLLM2_135M, ShippedCheckpoint
from specpath_drafting.block.config import BlockDrafterConfig, build_target_layer_ids, checkpoint_kind
from specpath_drafting.config import check_tree_sampling, tree_shape

__all__ = ["DFLASH_CHECKPOINT", "DFLASH_SMOLLM2_CHECKPOINT", "DFlashSpeculatorConfig", "build_target_layer_ids",
           "checkpoint_kind"]

CHECKPOINTS_DIR = Path(__file__).resolve().parent / "checkpoints"
DFLASH_CHECKPOINT = CHECKPOINTS_DIR / "dflash-byte-llama"
"""The DFlash drafter trained for specpath's embedded default target (package data)."""
DFLASH_SMOLLM2_CHECKPOINT = CHECKPOINTS_DIR / "dflash-smollm2"
"""The DFlash drafter trained for SmolLM2-135M-Instruct (its README says how)."""


@attrs.frozen(kw_only=True)
class DFlashSpeculatorConfig(BlockDrafterConfig):
    """DFlash: target taps fused into KV-injected context, a block [anchor, K masks] drafted in
    one non-causal pass. ``model`` is the drafter's checkpoint directory."""

    base_method = "dflash"
    speculator_class = "specpath_dflash.speculator:DFlashSpeculator"
    supports_watermarking = True
    """Drafts come from the target's own head over its vocabulary, so a watermark can bias them."""
    shipped_checkpoints = (ShippedCheckpoint(EMBEDDED_TARGET, DFLASH_CHECKPOINT),
                           ShippedCheckpoint(SMOLLM2_135M, DFLASH_SMOLLM2_CHECKPOINT, model_free="suffix",
                                             tree=(4, 2)))
    """SmolLM2-135M's drafter drafts with suffix decoding beside it (held-out τ at K=4 1.53 -> 1.86,
    24 prompts, bf16; docs/benchmarks-history.md, 2026-12-05) and as a best-first tree of 4 nodes,
    2 children a node (the issue's 12 held-out prompts as shipped, b1 greedy, quiet, side by side:
    τ 2.27 -> 2.39 and 1.63x -> 1.70x plain decoding on chat, 2.96 -> 3.02 and 2.04x -> 2.08x on
    code completion, the same rows verified; docs/benchmarks-history.md, 2026-12-07)."""
    anchor_sampling_default = False
    supported_options = BlockDrafterConfig.supported_options | {"draft_tree_topk"}
    """``draft_tree_topk``: best-first trees from the one block pass (``specpath_dflash.speculator``)."""

    @classmethod
    def verify(cls, spec: Any) -> None:
        super().verify(spec)
        check_tree_sampling(spec)

    def hash_factors(self) -> tuple[Any, ...]:
        # a tree turns the verify pass's causal mask into a tree mask
        return (*super().hash_factors(), ("draft_tree_topk", self.spec.draft_tree_topk))

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        k = self.spec.draft_tree_topk
        if k is not None and k > 1:
            out["draft_shape"] = tree_shape(
                self.spec, f"tree: best-first, at most K nodes, each node's children the top-{k} tokens of the next "
                "block position (one block pass), when the engine verifies trees (the reference engine does); "
                "otherwise the top-1 chain")
        return out
