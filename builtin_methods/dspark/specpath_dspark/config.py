"""``DSparkSpeculatorConfig``: the dspark row of the method table.

DSpark is the DFlash backbone (same taps, same KV-injected context, same one-pass block) in the
anchor-first layout, plus a Markov head that makes the block semi-autoregressive and a
confidence head that adaptive verification reads. Relative to DFlash it runs its draft pass in
a separate workspace lane, supports prefill context parallelism, reserves K lookahead slots in
anchor-sampling mode (K+1 in the fill-in layout), and its adaptive verification reads the
confidence head, not draft logits.

Attrs only: importing this module must not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from specpath.config.shipped import EMBEDDED_TARGET, SMOLLM2_135M, ShippedCheckpoint
from specpath.errors import SpeculativeConfigError
from specpath_drafting.block.config import BlockDrafterConfig, draft_config_dict

DSPARK_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "dspark-byte-llama"
"""The DSpark drafter trained for specpath's embedded default target (package data)."""

DSPARK_SMOLLM2_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "dspark-smollm2"
"""The DSpark drafter trained for SmolLM2-135M-Instruct (1 layer, taps 1/14/26, Markov rank 16, K=4)."""


@attrs.frozen(kw_only=True)
class DSparkSpeculatorConfig(BlockDrafterConfig):
    """DSpark (see the module docstring). ``dspark_anchor_sampling`` defaults to the layout the
    checkpoint records; ``dspark_draft_topk`` keeps only the top-k base candidates per position
    before the Markov bias; ``xpress_topc`` proposes best-first trees of the top-c candidates per
    node when the engine verifies trees (``specpath_dspark.xpress_tree``)."""

    base_method = "dspark"
    speculator_class = "specpath_dspark.speculator:DSparkSpeculator"
    supported_options = frozenset({
        "dspark_draft_topk", "dspark_anchor_sampling", "xpress_topc",
        "enable_adaptive_verification", "adaptive_verification_threshold",
    })
    uses_separate_workspace_lane = True
    supports_pcp = True
    adaptive_verification_uses_draft_logits = False
    """Acceptance estimates come from the confidence head."""
    supports_watermarking = False
    """The article lists EAGLE and DFlash only: the Markov head reshapes the distribution."""
    anchor_sampling_default = True
    tree_option = "xpress_topc"
    """A shipped checkpoint's tree sets ``xpress_topc``."""
    shipped_checkpoints = (ShippedCheckpoint(EMBEDDED_TARGET, DSPARK_CHECKPOINT),
                           ShippedCheckpoint(SMOLLM2_135M, DSPARK_SMOLLM2_CHECKPOINT, model_free="suffix"))
    """SmolLM2-135M's drafter drafts with suffix decoding beside it (held-out τ at K=4 1.71 -> 2.03,
    24 prompts, bf16; docs/benchmarks-history.md, 2026-12-05). Its chain, not a tree: as shipped,
    on the issue's 12 held-out prompts (b1 greedy, quiet, side by side), a 4-node ``xpress_topc``
    2 tree read τ 2.31 -> 2.33 on chat and 1.70x -> 1.65x plain decoding (the Markov head already
    drafts the later positions; DFlash's tree pays: docs/benchmarks-history.md, 2026-12-07)."""

    @property
    def anchor_sampling(self) -> bool:
        value = self.spec.dspark_anchor_sampling
        return self.anchor_sampling_default if value is None else bool(value)

    def hash_factors(self) -> tuple[Any, ...]:
        # xpress_topc turns the verify pass's causal mask into a tree mask: a backend that
        # compiles attention for causal chains must not reuse its graph.
        return (*super().hash_factors(), ("dspark_draft_topk", self.spec.dspark_draft_topk),
                ("xpress_topc", self.spec.xpress_topc))

    def describe(self) -> dict[str, Any]:
        from specpath.verification import TREE_VERIFY_METHODS

        out = super().describe()
        c, method = self.spec.xpress_topc, self.spec.rejection_sample_method
        if c is None:
            out["draft_shape"] = "chain (top-1)"
        elif method not in TREE_VERIFY_METHODS:
            out["draft_shape"] = f"chain (top-1): xpress_topc={c} has no effect, {method} verification verifies chains"
        else:
            out["draft_shape"] = (f"tree: best-first, top-{c} children per node, at most K nodes, when the engine "
                                  "verifies trees (the reference engine does); otherwise the top-1 chain")
        return out

    @classmethod
    def serves_unmarked_checkpoint(cls, hf: Mapping[str, Any]) -> bool:
        """A DeepSeek-V4-style target's own checkpoint, which carries the DSpark stages."""
        from specpath_dspark.stages import carries_dspark_stages

        return carries_dspark_stages(hf)

    @classmethod
    def accepts_checkpoint_of(cls, method: str, checkpoint: Any) -> bool:
        """Also a target checkpoint that carries DSpark stages beside its MTP layers
        (DeepSeek-V4), which the mtp plugin recognises as an MTP checkpoint."""
        from specpath_dspark.stages import carries_dspark_stages

        return method == cls.base_method or (method == "mtp" and carries_dspark_stages(checkpoint.config))

    @classmethod
    def default_model(cls, spec: Any) -> str | None:
        """A DeepSeek-V4-style target carries its DSpark stages: the target's own weights path
        (``model_weights`` first, as for MTP); otherwise the shipped drafter for the embedded
        target; other targets (MiniMax-M3, ...) name a separate drafter."""
        from specpath_dspark.stages import carries_dspark_stages

        target = spec.target_model_config
        if target is not None and carries_dspark_stages(target.hf_config):
            return target.model_weights or target.model
        return super().default_model(spec)

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        updates = dict(super().configure(spec))
        draft = updates.get("draft_model_config")
        from specpath_drafting.block.published import recorded_layout

        recorded = None if draft is None else recorded_layout(draft.hf_config)
        if spec.dspark_anchor_sampling is None and isinstance(recorded, bool):
            updates["dspark_anchor_sampling"] = recorded
        return updates

    @classmethod
    def requested_anchor_sampling(cls, spec: Any) -> bool:
        value = spec.dspark_anchor_sampling
        return cls.anchor_sampling_default if value is None else bool(value)

    @classmethod
    def verify(cls, spec: Any) -> None:
        super().verify(spec)
        hf = draft_config_dict(spec)
        from specpath_dspark.stages import carries_dspark_stages

        rank = next((r for r in (hf.get("markov_rank"), (hf.get("dflash_config") or {}).get("markov_rank"),
                                 hf.get("dspark_markov_rank")) if r is not None), None)
        if hf and not carries_dspark_stages(hf) and not (type(rank) is int and rank > 0):
            raise SpeculativeConfigError(
                f"the drafter {spec.model!r} has no Markov head (config.json markov_rank); a DSpark "
                "checkpoint needs one", field="speculative_config.model", value=spec.model)
        topk = spec.dspark_draft_topk
        vocab = hf.get("vocab_size") or (None if spec.target_model_config is None else spec.target_model_config.vocab_size)
        if topk is not None and vocab is not None and topk > vocab:
            raise SpeculativeConfigError(f"must be <= the vocabulary size ({vocab})",
                                         field="speculative_config.dspark_draft_topk", value=topk)
