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

from specpath.config.shipped import EMBEDDED_TARGET, ShippedCheckpoint
from specpath.errors import SpeculativeConfigError
from specpath_drafting.block.config import LAYOUT_KEY, BlockDrafterConfig, draft_config_dict

DSPARK_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "dspark-byte-llama"
"""The DSpark drafter trained for specpath's embedded default target (package data)."""


@attrs.frozen(kw_only=True)
class DSparkSpeculatorConfig(BlockDrafterConfig):
    """DSpark (see the module docstring). ``dspark_anchor_sampling`` defaults to the layout the
    checkpoint records; ``dspark_draft_topk`` keeps only the top-k base candidates per position
    before the Markov bias."""

    base_method = "dspark"
    speculator_class = "specpath_dspark.speculator:DSparkSpeculator"
    supported_options = frozenset({
        "dspark_draft_topk", "dspark_anchor_sampling",
        "enable_adaptive_verification", "adaptive_verification_threshold",
    })
    uses_separate_workspace_lane = True
    supports_pcp = True
    adaptive_verification_uses_draft_logits = False
    """Acceptance estimates come from the confidence head."""
    supports_watermarking = False
    """The article lists EAGLE and DFlash only: the Markov head reshapes the distribution."""
    anchor_sampling_default = True
    shipped_checkpoints = (ShippedCheckpoint(EMBEDDED_TARGET, DSPARK_CHECKPOINT),)

    @property
    def anchor_sampling(self) -> bool:
        value = self.spec.dspark_anchor_sampling
        return self.anchor_sampling_default if value is None else bool(value)

    def hash_factors(self) -> tuple[Any, ...]:
        return (*super().hash_factors(), ("dspark_draft_topk", self.spec.dspark_draft_topk))

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        updates = dict(super().configure(spec))
        draft = updates.get("draft_model_config")
        recorded = None if draft is None else draft.hf_config.get(LAYOUT_KEY)
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
        if hf and not (isinstance(hf.get("markov_rank"), int) and hf["markov_rank"] > 0):
            raise SpeculativeConfigError(
                f"the drafter {spec.model!r} has no Markov head (config.json markov_rank); a DSpark "
                "checkpoint needs one", field="speculative_config.model", value=spec.model)
        topk = spec.dspark_draft_topk
        vocab = hf.get("vocab_size") or (None if spec.target_model_config is None else spec.target_model_config.vocab_size)
        if topk is not None and vocab is not None and topk > vocab:
            raise SpeculativeConfigError(f"must be <= the vocabulary size ({vocab})",
                                         field="speculative_config.dspark_draft_topk", value=topk)
