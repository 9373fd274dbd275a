"""The config side of hidden-state drafting: the base class of drafters that read the target's
hidden states with shifted input (EAGLE-1/3, MTP), the auxiliary-layer rules and the LM-head
quantization check.

Such a drafter writes K draft positions into its own KV (lookahead K), takes *shifted* input
(token p+1 with the feature of p) so it adds no query rows to the target batch (0 extra slots),
needs one token past a prefill chunk, and its KV at p depends on the token after p (the prefix
cache drops the tail block).

Attrs only: importing this module must not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from specpath.config.speculator import DraftModelSpeculatorConfig
from specpath.errors import SpeculativeConfigError

SUPPORTED_HEAD_QUANTIZATIONS = ("fp8", "nvfp4")
"""``draft_lm_head_quantization`` values the heads implement (weight-only, per-row scales)."""


def tree_shape(spec: Any, tree: str) -> str:
    """``describe()``'s ``draft_shape`` for a ``draft_tree_topk`` tree: ``tree`` where the
    verification verifies trees, else that the option has no effect."""
    from specpath.verification import TREE_VERIFY_METHODS

    method = spec.rejection_sample_method
    if method in TREE_VERIFY_METHODS:
        return tree
    return f"chain (top-1): draft_tree_topk={spec.draft_tree_topk} has no effect, {method} verification verifies chains"


def check_tree_sampling(spec: Any) -> None:
    """A ``draft_tree_topk`` tree drafts the top-k candidates: refused with sampled drafts
    (``draft_sample_method`` ``'random'`` samples one chain). Hidden-state and DFlash drafters alike."""
    k = spec.draft_tree_topk
    if k is not None and k > 1 and spec.draft_sample_method == "random":
        raise SpeculativeConfigError(
            f"draft_tree_topk={k} drafts the top-k candidates; draft_sample_method 'random' samples one chain",
            field="speculative_config.draft_tree_topk")


@attrs.frozen(kw_only=True)
class HiddenStateDrafterConfig(DraftModelSpeculatorConfig):
    """Shifted-input hidden-state drafters (see the module docstring). ``verify`` applies the
    declared-flag checks (``supports_parallel_drafting``, ``uses_aux_hidden_states``)."""

    uses_target_hidden_states = True
    draft_kv_depends_on_next_token = True
    supports_variable_draft_length = True
    """Each request drafts up to its own ``max_draft_tokens``."""
    supports_parallel_drafting = False
    """A chain by default; P-EAGLE heads say otherwise."""
    tolerates_skipped_steps = True
    """Catches up on every position since in one pass (tests/engine/test_draft_governor.py)."""

    @property
    def num_lookahead_tokens(self) -> int:
        """The K draft positions the drafter writes into its own KV."""
        return self.spec.num_speculative_tokens

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """Shifted input reuses the verify step's query positions: no extra rows."""
        return 0

    @classmethod
    def verify(cls, spec: Any) -> None:
        cls.check_declared_inputs(spec)
        k = spec.draft_tree_topk
        if k is not None and k > 1 and spec.parallel_drafting:
            raise SpeculativeConfigError(
                f"draft_tree_topk={k} needs chain drafting; parallel_drafting drafts all K tokens in one pass",
                field="speculative_config.draft_tree_topk")
        check_tree_sampling(spec)

    def hash_factors(self) -> tuple[Any, ...]:
        # a tree turns the verify pass's causal mask into a tree mask
        return (*super().hash_factors(), ("draft_tree_topk", self.spec.draft_tree_topk))

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        k = self.spec.draft_tree_topk
        if k is not None and k > 1:
            out["draft_shape"] = tree_shape(
                self.spec, f"tree: {k} nodes run per drafting pass, each scoring its top-{k} children; the best K "
                "candidates, when the engine verifies trees (the reference engine does); otherwise the top-1 chain; "
                "a sampled request's tree ranks the head's logits plus its sampling noise (its race)")
        return out


# -- head checkpoints ---------------------------------------------------------------------


def _lower(values: Any) -> list[str]:
    """The strings among ``values`` (one string, or a list of them), lower-cased; anything else
    (a number, a mapping: a malformed ``config.json``) names nothing."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)):
        return []
    return [str(v).lower() for v in values or () if isinstance(v, str)]


def checkpoint_names(config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(kinds, architectures)`` of a draft ``config.json``, lower-cased: ``model_type`` and the
    speculators-format ``speculators_model_type``, and ``architectures``; what each head
    plugin's recognition (``specpath_eagle.recognise``, ``specpath_eagle3.recognise``) reads."""
    return _lower(config.get("model_type")) + _lower(config.get("speculators_model_type")), _lower(
        config.get("architectures"))


def check_checkpoint_agrees(spec: Any, found: str | None) -> None:
    """An explicit method whose draft checkpoint says it is the other EAGLE head (``found``, as
    the config class's :meth:`HeadSpeculatorConfig.other_head_method` reads it): one line naming
    both. The core's ``class`` step does this through the plugins' detection hooks; this covers
    an install where the other EAGLE plugin is missing."""
    draft = spec.draft_model_config
    if draft is None:
        return
    method = spec.method
    if found is not None and found != method:
        raise SpeculativeConfigError(
            f"requested method={spec.custom_method or method!r}, but the draft model {spec.model!r} is "
            f"a {found!r} checkpoint (architectures {list(draft.architectures)}, model_type "
            f"{draft.model_type!r}); drop 'method' or use a matching checkpoint",
            field="speculative_config.method",
            value=spec.custom_method or method,
        )


# -- auxiliary layers ---------------------------------------------------------------------


def default_aux_layer_ids(num_target_layers: int) -> tuple[int, int, int]:
    """A low, a middle and a high tap, in the convention of vLLM and SGLang: id ``i`` is the
    hidden state *entering* decoder layer ``i`` (the output of layer ``i - 1``).

    Deep targets get the engines' default ``(2, N//2, N-3)``. Shallow targets (N < 8), where
    those collide, get ``N//6 + 1``, ``(N-1)//2 + 1`` and ``N - 1`` (6 layers: 2, 3, 5); the
    final layer's output is never tapped (no id reaches it).
    """
    n = num_target_layers
    if n >= 8:
        return (2, n // 2, n - 3)
    return (n // 6 + 1, max(0, (n - 1) // 2) + 1, max(1, n - 1))


def engine_layers(aux_ids: Sequence[int]) -> tuple[int, ...]:
    """Aux ids (the state entering layer ``i``) as the engine's capture points (the output of
    decoder layer ``i - 1``, see ``BaseSpeculator.hidden_state_layers``)."""
    return tuple(int(i) - 1 for i in aux_ids)


def declared_aux_layer_ids(hf_config: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The taps a head's ``config.json`` declares, top-level or nested under ``eagle_config``
    (SpecForge / ModelOpt exports), or None."""
    for holder in (hf_config, hf_config.get("eagle_config")):
        if isinstance(holder, Mapping):
            ids = holder.get("eagle_aux_hidden_state_layer_ids")
            if isinstance(ids, Sequence) and not isinstance(ids, str) and ids and all(
                type(i) is int for i in ids
            ):
                return tuple(ids)
    return None


def resolve_aux_layer_ids(spec: Any, draft: Any | None) -> tuple[int, ...] | None:
    """Taps: the user's, else the ones the head was trained on (top-level or nested
    ``eagle_config``), else the default for the target's depth (None while it is unknown)."""
    if spec.eagle_aux_hidden_state_layer_ids is not None:
        return tuple(spec.eagle_aux_hidden_state_layer_ids)
    declared = None if draft is None else declared_aux_layer_ids(draft.hf_config)
    if declared is not None:
        return declared
    layers = None
    if spec.target_model_config is not None and spec.target_model_config.num_hidden_layers:
        layers = int(spec.target_model_config.num_hidden_layers)
    elif draft is not None and isinstance(draft.hf_config.get("target_num_hidden_layers"), int):
        layers = int(draft.hf_config["target_num_hidden_layers"])
    return None if layers is None else default_aux_layer_ids(layers)


def check_aux_layer_ids(spec: Any) -> None:
    """Id 0 (the embeddings entering layer 0) is valid for vLLM but the reference engine
    captures decoder-layer outputs only: refuse it in one line rather than read a wrong layer."""
    ids = spec.eagle_aux_hidden_state_layer_ids
    if ids is not None and 0 in ids:
        raise SpeculativeConfigError(
            "id 0 (the embedding output entering layer 0) is not captured by specpath's engine; "
            "ids name the hidden state entering decoder layer i (vLLM/SGLang convention), use 1..N-1",
            field="speculative_config.eagle_aux_hidden_state_layer_ids",
            value=list(ids),
        )


def check_head_quantization(spec: Any, shares_target_head: bool) -> None:
    """``draft_lm_head_quantization``: fp8 or nvfp4 (simulated), only over a head kept in the model dtype
    (the core checks the draft's own ``head_dtype``; a shared head is the target's)."""
    value = spec.draft_lm_head_quantization
    if value is None:
        return
    field = "speculative_config.draft_lm_head_quantization"
    if value not in SUPPORTED_HEAD_QUANTIZATIONS:
        raise SpeculativeConfigError(
            "is not implemented by the hidden-state heads", field=field, value=value, allowed=SUPPORTED_HEAD_QUANTIZATIONS
        )
    target = spec.target_model_config
    if shares_target_head and target is not None and target.head_dtype != target.dtype:
        raise SpeculativeConfigError(
            f"needs the shared LM head in the model dtype ({target.dtype}), but the target's head is "
            f"{target.head_dtype}",
            field=field,
            value=value,
        )


@attrs.frozen(kw_only=True)
class HeadSpeculatorConfig(HiddenStateDrafterConfig):
    """EAGLE-style heads (EAGLE-1, EAGLE-3): an explicit method must agree with what the head's
    ``config.json`` says it is (detection itself is each plugin's ``specpath_detect_method``
    hooks, from its own ``recognise`` module), and the LM head the drafts use may be fp8
    (``draft_lm_head_quantization``)."""

    supported_options = frozenset({"draft_lm_head_quantization", "draft_tree_topk"})
    shipped_drafter_k = 4
    shipped_drafter_quantization = "int8"
    """Measured: K=4 drafting costs ~0.7x bf16's at the same acceptance (benchmarks/draft_cost.py)."""
    shares_target_head: ClassVar[bool] = True
    """The head drafts through the target's LM head (so ``draft_lm_head_quantization`` rules
    apply to the target's head dtype)."""

    @classmethod
    def other_head_method(cls, hf_config: Mapping[str, Any]) -> str | None:
        """The other EAGLE method when the head's ``config.json`` says it is that one's (each
        plugin reads its own recognition), else None."""
        return None

    @classmethod
    def verify(cls, spec: Any) -> None:
        draft = spec.draft_model_config
        check_checkpoint_agrees(spec, None if draft is None else cls.other_head_method(draft.hf_config))
        check_head_quantization(spec, cls.shares_target_head)
        super().verify(spec)
