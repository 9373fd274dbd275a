"""``EagleSpeculatorConfig`` and ``ExtractHiddenStatesSpeculatorConfig``: the EAGLE rows of the
method table, plus the checkpoint detection and the option checks that every hidden-state
head shares (``specpath_eagle3`` builds on these classes).

An EAGLE head reads the target's hidden states, writes K draft positions into its own KV
(lookahead K), takes *shifted* input (token p+1 with the feature of p) so it adds no query rows
to the target batch (0 extra slots), needs one token past a prefill chunk, and its KV at p
depends on the token after p (the prefix cache drops the tail block).

Attrs only: importing this module must not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from specpath.config.speculator import DraftModelSpeculatorConfig, SpeculatorConfig
from specpath.errors import SpeculativeConfigError

HEADS_DIR = Path(__file__).resolve().parent / "heads"
"""Trained heads shipped with the package (package data)."""

EAGLE_HEAD = HEADS_DIR / "eagle-byte-llama"
"""The EAGLE-1 head trained for specpath's embedded default target."""

SUPPORTED_HEAD_QUANTIZATIONS = ("fp8", "nvfp4")
"""``draft_lm_head_quantization`` values the heads implement (weight-only, per-row scales)."""


def embedded_target_path() -> Path:
    """Where specpath keeps its embedded default target (no torch import)."""
    import specpath

    return Path(specpath.__file__).resolve().parent / "assets" / "default_model"


def targets_embedded_model(spec: Any) -> bool:
    """True when no target is known yet or the target is specpath's embedded model, the one
    the shipped heads were trained on."""
    target = spec.target_model_config
    if target is None:
        return True
    try:
        return Path(target.model).resolve() == embedded_target_path()
    except (OSError, TypeError):
        return False


# -- checkpoint detection ---------------------------------------------------------------


def _lower(values: Any) -> list[str]:
    if isinstance(values, str):
        values = [values]
    return [str(v).lower() for v in values or () if isinstance(v, str)]


def method_from_checkpoint_config(config: Mapping[str, Any]) -> str | None:
    """"eagle3", "eagle" or None from a draft's ``config.json`` alone (architectures,
    ``model_type``, the speculators-format ``speculators_model_type``); no path guessing."""
    kinds = _lower(config.get("model_type")) + _lower(config.get("speculators_model_type"))
    archs = _lower(config.get("architectures"))
    if {"eagle3", "peagle"} & set(kinds) or any("eagle3" in a or a.startswith("peagle") for a in archs):
        return "eagle3"  # P-EAGLE (SpecForge's PEagleDraftModel, speculators' "peagle") is EAGLE-3 + parallel drafting
    if "eagle" in kinds or any("eagle" in a for a in archs):
        return "eagle"
    return None


def method_from_path(path: str | None) -> str | None:
    """vLLM's path hints (it guesses an EAGLE head from the model path), tried last and in its
    order: ``"eagle-"`` before ``"eagle3"``."""
    name = str(path or "").lower()
    if "eagle-" in name:
        return "eagle"
    if "eagle3" in name:
        return "eagle3"
    return None


def check_checkpoint_agrees(spec: Any, method: str) -> None:
    """An explicit method that disagrees with what the draft checkpoint says it is: one line
    naming both (the core does this for checkpoints that declare ``speculator_config_class``;
    this covers checkpoints known only by architecture or ``model_type``)."""
    draft = spec.draft_model_config
    if draft is None:
        return
    found = method_from_checkpoint_config(draft.hf_config)
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


def target_num_layers(spec: Any) -> int | None:
    """The target's layer count: from the target config, else what the head recorded."""
    if spec.target_model_config is not None and spec.target_model_config.num_hidden_layers:
        return int(spec.target_model_config.num_hidden_layers)
    draft = spec.draft_model_config
    if draft is not None and isinstance(draft.hf_config.get("target_num_hidden_layers"), int):
        return int(draft.hf_config["target_num_hidden_layers"])
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


def _check_head_quantization(spec: Any, shares_target_head: bool) -> None:
    """``draft_lm_head_quantization``: fp8 or nvfp4 (simulated), only over a head kept in the model dtype
    (the core checks the draft's own ``head_dtype``; a shared head is the target's)."""
    value = spec.draft_lm_head_quantization
    if value is None:
        return
    field = "speculative_config.draft_lm_head_quantization"
    if value not in SUPPORTED_HEAD_QUANTIZATIONS:
        raise SpeculativeConfigError(
            "is not implemented by the EAGLE heads", field=field, value=value, allowed=SUPPORTED_HEAD_QUANTIZATIONS
        )
    target = spec.target_model_config
    if shares_target_head and target is not None and target.head_dtype != target.dtype:
        raise SpeculativeConfigError(
            f"needs the shared LM head in the model dtype ({target.dtype}), but the target's head is "
            f"{target.head_dtype}",
            field=field,
            value=value,
        )


# -- config classes ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class EagleSpeculatorConfig(DraftModelSpeculatorConfig):
    """EAGLE-1: the target's final feature and the next token's embedding -> one decoder layer
    -> the target's norm and head. ``model`` is the head's checkpoint directory."""

    base_method = "eagle"
    speculator_class = "specpath_eagle.speculator:EagleSpeculator"
    supported_options = frozenset({"draft_lm_head_quantization"})
    uses_target_hidden_states = True
    draft_kv_depends_on_next_token = True
    supports_watermarking = True
    """The head shares the target's vocabulary and logits, so a watermark can bias drafts."""
    supports_variable_draft_length = True
    """Each request drafts up to its own ``max_draft_tokens``."""
    shares_target_head = True
    """EAGLE-1 drafts through the target's LM head (so ``draft_lm_head_quantization`` rules
    apply to the target's head dtype)."""
    supports_parallel_drafting = False
    """P-EAGLE (one pass with mask queries) is an EAGLE-3 head feature."""

    @property
    def num_lookahead_tokens(self) -> int:
        """The K draft positions the head writes into its own KV."""
        return self.spec.num_speculative_tokens

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """Shifted input reuses the verify step's query positions: no extra rows."""
        return 0

    @classmethod
    def default_model(cls, spec: Any) -> str | None:
        """The shipped head, when the target is the embedded model (or not known yet)."""
        head = cls.shipped_head(spec)
        if head is not None and head.is_dir() and targets_embedded_model(spec):
            return str(head)
        return None

    @classmethod
    def shipped_head(cls, spec: Any = None) -> Path | None:
        """The head this package ships for the embedded target (for this configuration)."""
        return EAGLE_HEAD

    @classmethod
    def demo_config(cls) -> dict[str, Any] | None:
        """``specpath demo``: the shipped head on the embedded target."""
        head = cls.shipped_head()
        if head is None or not head.is_dir():
            return None
        return {"method": cls.base_method, "model": str(head), "num_speculative_tokens": 4}

    @classmethod
    def verify(cls, spec: Any) -> None:
        check_checkpoint_agrees(spec, cls.base_method)
        _check_head_quantization(spec, cls.shares_target_head)
        if spec.parallel_drafting and not cls.supports_parallel_drafting:
            raise SpeculativeConfigError(
                f"method {spec.custom_method or spec.method!r} drafts a chain; parallel drafting "
                "(P-EAGLE) needs an EAGLE-3 head (method 'eagle3')",
                field="speculative_config.parallel_drafting",
                value=True,
            )
        if spec.eagle_aux_hidden_state_layer_ids is not None and not cls.uses_aux_hidden_states:
            raise SpeculativeConfigError(
                f"method {spec.custom_method or spec.method!r} reads only the target's final feature; "
                "auxiliary layers are for eagle3 and extract_hidden_states",
                field="speculative_config.eagle_aux_hidden_state_layer_ids",
                value=list(spec.eagle_aux_hidden_state_layer_ids),
            )


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
    def demo_config(cls) -> dict[str, Any] | None:
        return None  # proposes nothing: nothing to show in a speed demo

    @classmethod
    def verify(cls, spec: Any) -> None:
        if spec.parallel_drafting:
            raise SpeculativeConfigError(
                "extract_hidden_states drafts nothing", field="speculative_config.parallel_drafting", value=True
            )
        check_aux_layer_ids(spec)
