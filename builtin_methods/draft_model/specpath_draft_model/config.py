"""``StandaloneARSpeculatorConfig``: the draft_model row of the method table.

The core's :class:`~specpath.config.speculator.DraftModelSpeculatorConfig` already builds the
draft ``ModelConfig`` the article describes (inherited runtime fields, the draft's own fields,
``runner="draft"``, the tokenizer rule, callable-only ``hf_overrides``, ``max_position_embeddings``
raised only for cache-only RoPE types), the draft TP size (1 or the target's) and the draft
parallel config (expert parallel only for a MoE draft). This class adds what is specific to a
standalone draft:

* the table: K lookahead slots (the draft writes K positions of its own KV ahead), one extra
  query slot (it re-reads the bonus token; PARD: K, all its queries are new), a vocabulary of
  its own, no target hidden states;
* PARD needs the mask token its checkpoint was trained with (``pard_token_id`` in config.json);
* the shipped drafts of the embedded byte-level model are the default ``model``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from specpath.config.shipped import EMBEDDED_TARGET, ShippedCheckpoint
from specpath.config.speculator import DraftModelSpeculatorConfig
from specpath.errors import SpeculativeConfigError

PARD_TOKEN_KEY = "pard_token_id"
"""config.json key of a PARD draft: the input id of the mask token it was trained with."""

BYTE_VOCAB_SIZE = 256
"""The embedded default model's vocabulary (UTF-8 bytes): the shipped drafts are made for it."""

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
"""The shipped drafts for the embedded default model (see the README for how they were made)."""

SHIPPED_DRAFTS = {"autoregressive": "ar", "parallel": "pard", "heterogeneous": "bpe"}
"""Sub-directories of ``specpath_draft_model/checkpoints`` by drafting shape (the variants)."""


def shipped_draft(kind: str) -> str | None:
    """Path of a shipped draft checkpoint for the embedded target, or None if it is not installed."""
    path = StandaloneARSpeculatorConfig.shipped_checkpoint(EMBEDDED_TARGET, kind)
    return None if path is None else str(path)


def draft_kind(spec: Any) -> str:
    """Which drafting shape a configuration asks for."""
    if spec.use_heterogeneous_vocab:
        return "heterogeneous"
    return "parallel" if spec.parallel_drafting else "autoregressive"


@attrs.frozen(kw_only=True)
class StandaloneARSpeculatorConfig(DraftModelSpeculatorConfig):
    """A small causal LM drafts K tokens in its own KV space (K passes, or one with PARD)."""

    base_method = "draft_model"
    speculator_class = "specpath_draft_model.speculator:DraftModelSpeculator"
    draft_has_own_vocab = True
    supports_variable_draft_length = True
    """Each request gets its own draft budget (``DraftRequest.max_draft_tokens``) every step."""
    supports_parallel_drafting = True
    """PARD: one pass with K-1 mask tokens."""
    shipped_checkpoints = tuple(ShippedCheckpoint(EMBEDDED_TARGET, CHECKPOINTS / sub, variant=kind)
                                for kind, sub in SHIPPED_DRAFTS.items())
    """Variants by drafting shape (:func:`draft_kind`); the autoregressive one is the demo's."""
    demo_num_speculative_tokens = 6
    """Its best K in benchmarks/draft_model.py."""

    @property
    def num_lookahead_tokens(self) -> int:
        """The draft writes K positions ahead in its own KV space."""
        return self.spec.num_speculative_tokens

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """1 (the bonus token is re-read, unshifted); PARD: K (every query is a new position)."""
        return self.spec.num_speculative_tokens if self.spec.parallel_drafting else 1

    @property
    def is_parallel(self) -> bool:
        """PARD: all K drafts come from one pass with K-1 mask tokens."""
        return bool(self.spec.parallel_drafting)

    @property
    def pard_token_id(self) -> int | None:
        """The mask token id of a PARD draft (from its config.json), else None."""
        draft = self.spec.draft_model_config
        return None if draft is None else draft.hf_config.get(PARD_TOKEN_KEY)

    # -- class hooks ---------------------------------------------------------------------

    @classmethod
    def shipped_target(cls, spec: Any) -> str:
        """Every byte-level target (or one not known yet) shares the embedded model's tokenizer,
        so the shipped drafts serve it."""
        target = spec.target_model_config
        return EMBEDDED_TARGET if target is None or target.vocab_size == BYTE_VOCAB_SIZE else super().shipped_target(spec)

    @classmethod
    def shipped_variant(cls, spec: Any) -> str:
        """The drafting shape asked for; the demo (no configuration) runs the autoregressive draft."""
        return "autoregressive" if spec is None else draft_kind(spec)

    @classmethod
    def verify(cls, spec: Any) -> None:
        if spec.parallel_drafting:
            if spec.use_heterogeneous_vocab:
                raise SpeculativeConfigError(
                    "cannot be combined with use_heterogeneous_vocab (PARD drafts in the target's vocabulary)",
                    field="speculative_config.parallel_drafting",
                    value=True,
                )
            draft = spec.draft_model_config
            token = None if draft is None else draft.hf_config.get(PARD_TOKEN_KEY)
            vocab = None if draft is None else draft.vocab_size
            if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < (vocab or 0):
                raise SpeculativeConfigError(
                    f"needs a PARD draft whose config.json declares {PARD_TOKEN_KEY!r} (its mask token, "
                    f"an id below vocab_size={vocab}); {spec.model!r} declares {token!r}",
                    field="speculative_config.parallel_drafting",
                    value=True,
                )

    def hash_factors(self) -> tuple[Any, ...]:
        return ("heterogeneous_vocab", bool(self.spec.use_heterogeneous_vocab))
