"""EAGLE-3 heads in the layouts the serving engines publish, read and written by one table.

A specpath EAGLE-3 head keeps its decoder layer's tensors flat (``layer.q_proj``) and its two
input norms at the top (``input_layernorm``, ``hidden_norm``). The ecosystem's heads keep the
same tensors as one Llama decoder layer:

- **vLLM / SpecForge (SGLang)**: ``midlayer.self_attn.q_proj``, ``midlayer.mlp.gate_proj``,
  ``midlayer.input_layernorm``, ``midlayer.hidden_norm``; ``fc``, ``norm``, ``lm_head``,
  ``d2t``/``t2d`` as they are; config ``LlamaForCausalLMEagle3`` with the taps under
  ``eagle_config.eagle_aux_hidden_state_layer_ids``;
- **speculators**: the same tensors under ``layers.0.`` (its ``Eagle3Speculator``), the
  layer's shape in ``transformer_layer_config``, ``speculators_config`` naming the verifier.

Any of them may prefix every non-head tensor with ``model.`` and ship ``embed_tokens`` (the
target's, which specpath lends instead). Both directions go through :data:`LAYER_TENSORS`, so
an export reads back to the same head (tested as a bijection). Pure functions: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EAGLE3_ARCHITECTURES = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator")
"""Architectures of published EAGLE-3 heads (SpecForge, vLLM, speculators)."""

LAYER_TENSORS: Mapping[str, str] = {
    "layer.q_proj.weight": "self_attn.q_proj.weight",
    "layer.k_proj.weight": "self_attn.k_proj.weight",
    "layer.v_proj.weight": "self_attn.v_proj.weight",
    "layer.o_proj.weight": "self_attn.o_proj.weight",
    "layer.gate_proj.weight": "mlp.gate_proj.weight",
    "layer.up_proj.weight": "mlp.up_proj.weight",
    "layer.down_proj.weight": "mlp.down_proj.weight",
    "layer.post_attention_layernorm.weight": "post_attention_layernorm.weight",
    "input_layernorm.weight": "input_layernorm.weight",
    "hidden_norm.weight": "hidden_norm.weight",
}
"""specpath name -> the name inside the published decoder layer (after its prefix)."""

TOP_TENSORS = ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d")
"""Tensors every layout keeps at the top under the same name."""

LAYER_PREFIXES = ("midlayer.", "layers.0.")
"""The decoder layer's prefix: vLLM / SpecForge, speculators."""

IGNORED = ("embed_tokens.weight",)
"""Published tensors specpath does not read (the target lends its embedding)."""

UNSUPPORTED_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
"""vLLM EAGLE-3 variants specpath's head does not implement (each adds or moves a norm)."""

_FROM_LAYER = {v: k for k, v in LAYER_TENSORS.items()}


def published_name(name: str, prefix: str = "midlayer.") -> str:
    """The published name of specpath head tensor ``name``."""
    if name in LAYER_TENSORS:
        return prefix + LAYER_TENSORS[name]
    if name in TOP_TENSORS:
        return name
    raise ValueError(f"{name!r} is not a tensor of an EAGLE-3 head a serving engine can load")


def specpath_name(name: str) -> str | None:
    """specpath's name of published tensor ``name``; None for one it does not read; the name
    itself when it is not a published head tensor (the loader then reports it)."""
    bare = name.removeprefix("model.")
    if bare in IGNORED:
        return None
    for prefix in LAYER_PREFIXES:
        if bare.startswith(prefix) and bare[len(prefix):] in _FROM_LAYER:
            return _FROM_LAYER[bare[len(prefix):]]
    return bare if bare in TOP_TENSORS else name


def is_published_eagle3(config: Mapping[str, Any]) -> bool:
    """A head ``config.json`` in a published layout (not specpath's own ``model_type: eagle3``)."""
    if config.get("model_type") == "eagle3" and "speculators_config" not in config:
        return False
    archs = [a for a in config.get("architectures") or () if isinstance(a, str)]
    return any(a in EAGLE3_ARCHITECTURES for a in archs) or config.get("speculators_model_type") == "eagle3"


def head_config_dict(config: Mapping[str, Any]) -> dict[str, Any]:
    """A published EAGLE-3 config as the keys :class:`~specpath_drafting.heads.HeadConfig`
    reads; one line naming the key for a variant specpath's head does not implement."""
    layer = config.get("transformer_layer_config")
    out: dict[str, Any] = {**(layer if isinstance(layer, Mapping) else {}), **config}
    out.pop("transformer_layer_config", None)
    default_before_residual = "speculators_config" in config  # speculators' default is True
    for flag in UNSUPPORTED_FLAGS:
        value = config.get(flag, default_before_residual if flag == "norm_before_residual" else False)
        if value:
            raise ValueError(f"an EAGLE-3 head with {flag}: true (specpath's EAGLE-3 head has no such norm)")
    nested = config.get("eagle_config") if isinstance(config.get("eagle_config"), Mapping) else {}
    ids = config.get("eagle_aux_hidden_state_layer_ids") or nested.get("eagle_aux_hidden_state_layer_ids")
    out["model_type"] = "eagle3"
    out["num_taps"] = len(ids) if ids else config.get("num_aux_hidden_states", 3)
    if ids:
        out["eagle_aux_hidden_state_layer_ids"] = list(ids)
    return out
