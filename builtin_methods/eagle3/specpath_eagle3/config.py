"""``Eagle3SpeculatorConfig``: the eagle3 row of the method table, P-EAGLE included.

It shares :class:`specpath_drafting.config.HeadSpeculatorConfig` with EAGLE-1 (same lookahead,
same shifted input, same tail-block drop, same detection) and adds what EAGLE-3 changes: the target returns three
auxiliary layers (``uses_aux_hidden_states``; which ones is ``eagle_aux_hidden_state_layer_ids``,
resolved here so that ``compute_hash`` sees it), the head has its own LM head, and
``parallel_drafting`` (P-EAGLE) appends K-1 mask queries to the drafter's pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from specpath.config.parallel_drafting import parallel_drafting_token_id
from specpath.config.shipped import DEFAULT_VARIANT, EMBEDDED_TARGET, SMOLLM2_135M, ShippedCheckpoint
from specpath.errors import SpeculativeConfigError
from specpath_drafting.config import HeadSpeculatorConfig, check_aux_layer_ids, resolve_aux_layer_ids

EAGLE3_HEAD = Path(__file__).resolve().parent / "heads" / "eagle3-byte-llama"
"""The EAGLE-3 head (chain drafting, TTT) trained for the embedded default target."""

PEAGLE_HEAD = Path(__file__).resolve().parent / "heads" / "peagle-byte-llama"
"""The P-EAGLE head (the EAGLE-3 head fine-tuned with mask slots) for the embedded default target."""

EAGLE3_SMOLLM2_HEAD = Path(__file__).resolve().parent / "heads" / "eagle3-smollm2"
"""The EAGLE-3 chain head trained for SmolLM2-135M-Instruct (4,096-token draft vocabulary; no
P-EAGLE head is shipped for it)."""


def is_peagle_head(hf_config: Any) -> bool:
    """A head trained for parallel drafting: specpath's ``parallel_drafting: true``, a published
    P-EAGLE head's mask token (``ptd_token_id``, ``pard_token``) or SpecForge's architecture."""
    archs = [str(a) for a in hf_config.get("architectures") or ()]
    return (hf_config.get("parallel_drafting") is True or parallel_drafting_token_id(hf_config) is not None
            or "PEagleDraftModel" in archs)


@attrs.frozen(kw_only=True)
class Eagle3SpeculatorConfig(HeadSpeculatorConfig):
    """EAGLE-3: three fused target taps, one decoder layer over [embedding ; feature], its own
    (optionally reduced) vocabulary head; chain drafting, or P-EAGLE with ``parallel_drafting``."""

    base_method = "eagle3"
    speculator_class = "specpath_eagle3.speculator:Eagle3Speculator"
    uses_aux_hidden_states = True
    supports_watermarking = False
    """The article lists EAGLE and DFlash only."""
    shares_target_head = False
    """EAGLE-3 drafts through its own head, whose dtype the core checks."""
    supports_parallel_drafting = True
    shipped_checkpoints = (
        ShippedCheckpoint(EMBEDDED_TARGET, EAGLE3_HEAD),
        ShippedCheckpoint(EMBEDDED_TARGET, PEAGLE_HEAD, variant="parallel"),
        ShippedCheckpoint(SMOLLM2_135M, EAGLE3_SMOLLM2_HEAD, model_free="suffix", tree=(6, 2)),
    )
    """SmolLM2-135M's head drafts with suffix decoding beside it: held-out τ at K=4 2.10 -> 2.35,
    1.53x -> 1.66x of plain bf16 decoding (24 prompts; docs/benchmarks-history.md, 2026-12-05); and
    as a tree of 6 nodes, 2 per pass, where trees are verified: τ 2.30 -> 2.41-2.63, +1-3% tokens/s
    over the K=4 chain in five interleaved runs (docs/benchmarks-history.md, 2026-12-05, native trees)."""

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """P-EAGLE's K-1 mask queries; 0 for the chain (it reuses the verify query)."""
        return self.spec.num_speculative_tokens - 1 if self.spec.parallel_drafting else 0

    @classmethod
    def other_head_method(cls, hf_config: Mapping[str, Any]) -> str | None:
        from specpath_eagle3.recognise import is_eagle3_checkpoint, says_eagle

        return "eagle" if says_eagle(hf_config) and not is_eagle3_checkpoint(hf_config) else None

    @classmethod
    def shipped_variant(cls, spec: Any) -> str:
        """The P-EAGLE head when ``parallel_drafting`` is asked for, else the chain head."""
        return "parallel" if spec.parallel_drafting else DEFAULT_VARIANT

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        updates = dict(super().configure(spec))
        ids = resolve_aux_layer_ids(spec, updates.get("draft_model_config"))
        if ids is not None:
            updates["eagle_aux_hidden_state_layer_ids"] = ids
        return updates

    @classmethod
    def verify(cls, spec: Any) -> None:
        super().verify(spec)
        check_aux_layer_ids(spec)
        ids = spec.eagle_aux_hidden_state_layer_ids
        draft = spec.draft_model_config
        taps = None if draft is None else draft.hf_config.get("num_taps", 3)
        if ids is not None and taps is not None and len(ids) != taps:
            raise SpeculativeConfigError(
                f"the EAGLE-3 head {spec.model!r} fuses exactly {taps} target layers",
                field="speculative_config.eagle_aux_hidden_state_layer_ids",
                value=list(ids),
            )
        if spec.parallel_drafting and draft is not None and not is_peagle_head(draft.hf_config):
            raise SpeculativeConfigError(
                f"the EAGLE-3 head {spec.model!r} has no P-EAGLE mask parameters (config.json has neither "
                "parallel_drafting: true nor a mask token: ptd_token_id / pard_token); train one with the "
                "P-EAGLE loss",
                field="speculative_config.parallel_drafting",
                value=True,
            )
