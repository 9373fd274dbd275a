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
* PARD needs the mask token its checkpoint was trained with (``pard_token_id`` in specpath's
  config.json, ``pard_token`` in amd/PARD's, ``ptd_token_id``: any of the ecosystem's keys);
* a Medusa checkpoint is not a draft model: refused in one line naming Medusa;
* the shipped drafts of the embedded byte-level model are the default ``model``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from specpath.config.parallel_drafting import PARALLEL_DRAFTING_TOKEN_KEYS, parallel_drafting_token_id
from specpath.config.shipped import EMBEDDED_TARGET, SMOLLM2_135M, ShippedCheckpoint, find_shipped, target_fingerprint
from specpath.config.speculator import DraftModelSpeculatorConfig
from specpath.errors import SpeculativeConfigError

PARD_TOKEN_KEY = "pard_token_id"
"""config.json key specpath's PARD drafts write: the input id of the mask token they were
trained with (``pard_token`` / ``ptd_token_id`` are read too)."""


def _raw_token(draft: Any) -> Any:
    """What the checkpoint wrote under the first mask-token key it has (for the error)."""
    hf = {} if draft is None else draft.hf_config
    return next((hf[k] for k in PARALLEL_DRAFTING_TOKEN_KEYS if k in hf), None)


def medusa_heads(config: Mapping[str, Any]) -> int | None:
    """The head count of a Medusa checkpoint (FasterDecoding's ``medusa_num_heads``, vLLM's
    ``model_type: medusa`` / ``MedusaModel``), or None for anything else."""
    archs = [str(a) for a in config.get("architectures") or ()]
    if "medusa_num_heads" in config:
        value = config["medusa_num_heads"]
        return value if type(value) is int else 0
    if config.get("model_type") == "medusa" or "MedusaModel" in archs:
        value = config.get("num_heads")
        return value if type(value) is int else 0
    return None

BYTE_VOCAB_SIZE = 256
"""The embedded default model's vocabulary (UTF-8 bytes): the shipped drafts are made for it."""

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
"""The shipped drafts for the embedded default model (see the README for how they were made)."""

SHIPPED_DRAFTS = {"autoregressive": "ar", "parallel": "pard", "heterogeneous": "bpe"}
"""Sub-directories of ``specpath_draft_model/checkpoints`` by drafting shape (the variants)."""


def shipped_draft(kind: str) -> str | None:
    """Path of a shipped draft checkpoint for the embedded target, or None if it is not installed."""
    path = find_shipped(StandaloneARSpeculatorConfig.shipped_checkpoints, EMBEDDED_TARGET, kind)
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
    tolerates_skipped_steps = True
    """Catches up on every position since in one pass (tests/engine/test_draft_governor.py)."""
    draft_has_own_vocab = True
    supports_variable_draft_length = True
    """Each request gets its own draft budget (``DraftRequest.max_draft_tokens``) every step."""
    supports_parallel_drafting = True
    """PARD: one pass with K-1 mask tokens."""
    shipped_checkpoints = (*(ShippedCheckpoint(EMBEDDED_TARGET, CHECKPOINTS / sub, variant=kind)
                             for kind, sub in SHIPPED_DRAFTS.items()),
                           *(ShippedCheckpoint(SMOLLM2_135M, CHECKPOINTS / "smollm2-shared", variant=kind, model_free="suffix")
                             for kind in ("autoregressive", "parallel")))
    """Variants by drafting shape (:func:`draft_kind`); the autoregressive one is the embedded
    demo's. SmolLM2-135M: one 2-layer draft that borrows the target's embedding, trained for
    both shapes (PARD's mask copies with the autoregressive depth kept); its demo runs PARD.
    Suffix decoding drafts beside it (held-out τ at K=4, PARD: 1.49 -> 1.86)."""
    shipped_drafter_k = 6
    shipped_drafter_quantization = "int8"
    """Measured cheaper to draft with than bf16 (benchmarks/draft_cost.py); drafts may change, output not."""
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
        return None if draft is None else parallel_drafting_token_id(draft.hf_config)

    # -- class hooks ---------------------------------------------------------------------

    @classmethod
    def shipped_target(cls, spec: Any) -> str:
        """Every byte-level target (or one not known yet) shares the embedded model's tokenizer,
        so the shipped drafts serve it."""
        target = spec.target_model_config
        return EMBEDDED_TARGET if target is None or target.vocab_size == BYTE_VOCAB_SIZE else super().shipped_target(spec)

    @classmethod
    def shipped_variant(cls, spec: Any) -> str:
        """The drafting shape asked for."""
        return draft_kind(spec)

    @classmethod
    def verify(cls, spec: Any) -> None:
        draft = spec.draft_model_config
        heads = None if draft is None else medusa_heads(draft.hf_config)
        if heads is not None:
            raise SpeculativeConfigError(
                f"{spec.model!r} is a Medusa checkpoint ({heads} heads over the target's last hidden state, "
                "no decoder of its own), not a draft model; specpath has no Medusa method (vLLM dropped it: "
                "tree verification of parallel heads); use an EAGLE-3, MTP or DFlash drafter",
                field="speculative_config.model",
                value=spec.model,
            )
        if spec.parallel_drafting:
            if spec.use_heterogeneous_vocab:
                raise SpeculativeConfigError(
                    "cannot be combined with use_heterogeneous_vocab (PARD drafts in the target's vocabulary)",
                    field="speculative_config.parallel_drafting",
                    value=True,
                )
            draft = spec.draft_model_config
            token = None if draft is None else parallel_drafting_token_id(draft.hf_config)
            vocab = None if draft is None else draft.vocab_size
            if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < (vocab or 0):
                raise SpeculativeConfigError(
                    f"needs a PARD draft whose config.json declares its mask token (one of "
                    f"{', '.join(PARALLEL_DRAFTING_TOKEN_KEYS)}, an id below vocab_size={vocab}); "
                    f"{spec.model!r} declares {_raw_token(draft)!r}",
                    field="speculative_config.parallel_drafting",
                    value=True,
                )

    def hash_factors(self) -> tuple[Any, ...]:
        return ("heterogeneous_vocab", bool(self.spec.use_heterogeneous_vocab))


def demo(config_class: type[StandaloneARSpeculatorConfig], target: Any) -> Any:
    """The ``specpath_demo`` answer. The embedded target: the shipped autoregressive draft at
    its ``shipped_drafter_k`` (6). Another target: PARD where a parallel draft ships for it (one
    pass instead of K: it pays on SmolLM2, see docs/benchmarks.md), else the autoregressive default."""
    from specpath import demo as demos

    if target is None:
        return demos.shipped(config_class, "autoregressive", num_speculative_tokens=config_class.shipped_drafter_k)
    if find_shipped(config_class.shipped_checkpoints, target_fingerprint(target), "parallel") is not None:
        return demos.run(parallel_drafting=True)
    return demos.run()
