"""Checkpoints a plugin ships for known targets, and how a configuration's target is named.

A target is named by a *fingerprint*, ``"<model_type>:<layers>x<hidden>:<vocab>"`` read from
its ``config.json`` (so the same architecture loaded from a GGUF file, a Hub id or a local
directory is one target); a configuration with no target yet names the engine's embedded
default model, :data:`EMBEDDED_TARGET`. A plugin
lists its packaged drafters as :class:`ShippedCheckpoint` rows; the core looks them up (see
``SpeculatorConfig.shipped_checkpoints``). Torch-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

EMBEDDED_TARGET = "llama:6x192:256"
"""The fingerprint of the reference engine's embedded byte-level default model, the target of a
configuration that names none."""

SMOLLM2_135M = "llama:30x576:49152"
"""SmolLM2-135M (base and Instruct share the architecture, the tokenizer and hence drafters)."""

DEFAULT_VARIANT = "default"


def target_fingerprint(target: Any) -> str:
    """The fingerprint of a target ``ModelConfig`` (:data:`EMBEDDED_TARGET` when None)."""
    if target is None:
        return EMBEDDED_TARGET
    return f"{target.model_type}:{target.num_hidden_layers}x{target.hidden_size}:{target.vocab_size}"


@attrs.frozen
class ShippedCheckpoint:
    """A drafter checkpoint packaged with a plugin, trained for one target."""

    target: str
    """The target's fingerprint (:data:`EMBEDDED_TARGET`, :data:`SMOLLM2_135M`, ...)."""
    path: Path = attrs.field(converter=Path)
    """The checkpoint directory (``config.json`` + ``model.safetensors``), usually package data."""
    variant: str = DEFAULT_VARIANT
    """Which of a method's shapes it serves (e.g. ``"parallel"`` for P-EAGLE), chosen by
    ``SpeculatorConfig.shipped_variant``."""
    model_free: str | None = None
    """The model-free method drafted beside this drafter when the config names no
    ``model_free_drafter`` (``SpeculatorConfig.shipped_model_free``): set where it was measured
    to pay on this target."""
    tree: tuple[int, int] | None = None
    """``(num_speculative_tokens, tree width)``: the draft tree this drafter proposes (the width set
    as the class's ``tree_option``: ``draft_tree_topk``, DSpark's ``xpress_topc``) where the
    config sets neither and its verification verifies trees
    (``SpeculatorConfig.shipped_tree``): set where the tree was measured to pay over the chain on
    this target."""

    @property
    def is_installed(self) -> bool:
        """Both files present (a source tree without the package data has neither)."""
        return (self.path / "config.json").is_file() and (self.path / "model.safetensors").is_file()


def find_shipped(rows: tuple[ShippedCheckpoint, ...], target: str, variant: str = DEFAULT_VARIANT) -> Path | None:
    """The installed checkpoint for ``target`` and ``variant``, or None."""
    for row in rows:
        if row.target == target and row.variant == variant and row.is_installed:
            return row.path
    return None
