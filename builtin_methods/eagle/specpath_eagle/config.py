"""``EagleSpeculatorConfig`` and ``ExtractHiddenStatesSpeculatorConfig``: the EAGLE rows of the
method table (how an EAGLE-1 head is recognised: :mod:`specpath_eagle.recognise`). What every
shifted-input hidden-state drafter shares is :class:`specpath_drafting.config.HiddenStateDrafterConfig`.

Attrs only: importing this module must not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from specpath.config.shipped import EMBEDDED_TARGET, ShippedCheckpoint
from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError
from specpath_drafting.config import HeadSpeculatorConfig, check_aux_layer_ids, resolve_aux_layer_ids

__all__ = ["EAGLE_HEAD", "EagleSpeculatorConfig", "ExtractHiddenStatesSpeculatorConfig"]

HEADS_DIR = Path(__file__).resolve().parent / "heads"
"""Trained heads shipped with the package (package data)."""

EAGLE_HEAD = HEADS_DIR / "eagle-byte-llama"
"""The EAGLE-1 head trained for specpath's embedded default target."""


# -- config classes ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class EagleSpeculatorConfig(HeadSpeculatorConfig):
    """EAGLE-1: the target's final feature and the next token's embedding -> one decoder layer
    -> the target's norm and head. ``model`` is the head's checkpoint directory."""

    base_method = "eagle"
    speculator_class = "specpath_eagle.speculator:EagleSpeculator"
    supports_watermarking = True
    """The head shares the target's vocabulary and logits, so a watermark can bias drafts."""
    shipped_checkpoints = (ShippedCheckpoint(EMBEDDED_TARGET, EAGLE_HEAD),)
    shares_target_head = True
    """EAGLE-1 drafts through the target's LM head (so ``draft_lm_head_quantization`` rules
    apply to the target's head dtype)."""

    @classmethod
    def other_head_method(cls, hf_config: Mapping[str, Any]) -> str | None:
        from specpath_eagle.recognise import names_eagle3

        return "eagle3" if names_eagle3(hf_config) else None


@attrs.frozen(kw_only=True)
class ExtractHiddenStatesSpeculatorConfig(SpeculatorConfig):
    """Not a drafter: the target returns the auxiliary layers' states of every committed
    position and the speculator keeps them for other components (feature caching, probes)."""

    base_method = "extract_hidden_states"
    speculator_class = "specpath_eagle.speculator:ExtractHiddenStatesSpeculator"
    uses_target_hidden_states = True
    uses_aux_hidden_states = True
    proposes_draft_tokens = False

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        updates = dict(super().configure(spec))
        ids = resolve_aux_layer_ids(spec, None)
        if ids is not None:
            updates["eagle_aux_hidden_state_layer_ids"] = ids
        if spec.num_speculative_tokens is None:
            updates["num_speculative_tokens"] = 1  # nothing is drafted; K only sizes the config
        return updates

    @classmethod
    def verify(cls, spec: Any) -> None:
        if spec.parallel_drafting:
            raise SpeculativeConfigError(
                "extract_hidden_states drafts nothing", field="speculative_config.parallel_drafting", value=True
            )
        check_aux_layer_ids(spec)
