"""The target's architecture as a checked value: :class:`LlamaConfig`, read from and written to a
Hugging Face ``config.json`` (Llama and Qwen3), every field validated when built so a bad
checkpoint fails at load with its field named, not at the first forward."""

from __future__ import annotations

import math
from typing import Any, Mapping

import attrs

from specpath_engine.modeling.rope import normalize_rope_scaling

SUPPORTED_MODEL_TYPES = ("llama", "qwen3")


def positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """attrs validator: a size that must be > 0 (shared with the model's attention helpers)."""
    if value is None or value <= 0:
        raise ValueError(f"model config: {attribute.name} must be > 0, got {value!r}")


def _finite_positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """rms_norm_eps / rope_theta: a string or NaN here would fail only at the first forward."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"model config: {attribute.name} must be a finite number > 0, got {value!r:.40}")


def _token_ids(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """bos/eos/pad ids: None, an integer, or (eos) a list of integers; bos/eos inside the vocabulary."""
    ids = value if isinstance(value, list) and attribute.name == "eos_token_id" else [value]
    for token_id in ids:
        if token_id is None and not isinstance(value, list):
            continue
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise ValueError(f"model config: {attribute.name} must be a token id (an integer), got {value!r:.40}")
        vocab = instance.vocab_size
        if attribute.name != "pad_token_id" and isinstance(vocab, int) and not 0 <= token_id < vocab:
            raise ValueError(f"model config: {attribute.name}={token_id} is outside the vocabulary (0 to {vocab - 1})")


@attrs.frozen(kw_only=True)
class LlamaConfig:
    """The architecture fields of an HF Llama/Qwen3 ``config.json`` that change the computation."""

    vocab_size: int = attrs.field(validator=positive)
    hidden_size: int = attrs.field(validator=positive)
    intermediate_size: int = attrs.field(validator=positive)
    num_hidden_layers: int = attrs.field(validator=positive)
    num_attention_heads: int = attrs.field(validator=positive)
    num_key_value_heads: int = attrs.field(validator=positive)
    #: per-head width; HF derives hidden_size // num_attention_heads when absent.
    head_dim: int = attrs.field(validator=positive)
    max_position_embeddings: int = attrs.field(default=2048, validator=positive)
    rms_norm_eps: float = attrs.field(default=1e-6, validator=_finite_positive)
    rope_theta: float = attrs.field(default=10000.0, validator=_finite_positive)
    #: canonical scaling dict with ``rope_type`` (see rope.normalize_rope_scaling), None = plain RoPE.
    rope_scaling: dict[str, Any] | None = None
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    #: Qwen3's per-head RMSNorm of q and k before RoPE.
    qk_norm: bool = False
    model_type: str = "llama"
    bos_token_id: int | None = attrs.field(default=None, validator=_token_ids)
    eos_token_id: int | list[int] | None = attrs.field(default=None, validator=_token_ids)
    pad_token_id: int | None = attrs.field(default=None, validator=_token_ids)

    def __attrs_post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"model config: num_attention_heads={self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads={self.num_key_value_heads}"
            )

    @classmethod
    def from_hf_dict(cls, d: Mapping[str, Any]) -> "LlamaConfig":
        """Parse an HF ``config.json`` dict (transformers v4 ``rope_scaling`` or v5 ``rope_parameters``)."""
        model_type = d.get("model_type", "llama")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model config: model_type={model_type!r} is not supported; allowed: "
                f"{', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        act = d.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"model config: hidden_act={act!r} is not supported; allowed: silu")
        for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
            if key not in d:
                raise ValueError(f"model config: missing required field {key!r}")
        rope = d.get("rope_scaling") or d.get("rope_parameters") or {}
        theta = d.get("rope_theta") or rope.get("rope_theta") or 10000.0
        max_pos = d.get("max_position_embeddings", 2048)
        heads = d["num_attention_heads"]
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"model config: num_attention_heads must be a positive integer, got {heads!r:.40}")
        return cls(
            vocab_size=d["vocab_size"],
            hidden_size=d["hidden_size"],
            intermediate_size=d["intermediate_size"],
            num_hidden_layers=d["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=d.get("num_key_value_heads") or heads,
            head_dim=d.get("head_dim") or d["hidden_size"] // heads,
            max_position_embeddings=max_pos,
            rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            rope_theta=float(theta) if isinstance(theta, (int, float)) and not isinstance(theta, bool) else theta,
            rope_scaling=normalize_rope_scaling(rope, max_position_embeddings=max_pos),
            tie_word_embeddings=d.get("tie_word_embeddings", False),
            attention_bias=d.get("attention_bias", False),
            mlp_bias=d.get("mlp_bias", False),
            qk_norm=model_type == "qwen3",
            model_type=model_type,
            bos_token_id=d.get("bos_token_id"),
            eos_token_id=d.get("eos_token_id"),
            pad_token_id=d.get("pad_token_id"),
        )

    def to_hf_dict(self) -> dict[str, Any]:
        """An HF ``config.json`` dict that ``transformers`` loads as the same architecture."""
        arch = "Qwen3ForCausalLM" if self.model_type == "qwen3" else "LlamaForCausalLM"
        return {
            "architectures": [arch],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": dict(self.rope_scaling) if self.rope_scaling else None,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.attention_bias,
            "mlp_bias": self.mlp_bias,
            "hidden_act": "silu",
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "pad_token_id": self.pad_token_id,
            "torch_dtype": "float32",
        }

    @property
    def num_parameters(self) -> int:
        """Parameter count (tied head counted once)."""
        d, f, h, kv, hd = (
            self.hidden_size,
            self.intermediate_size,
            self.num_attention_heads,
            self.num_key_value_heads,
            self.head_dim,
        )
        attn = d * hd * (2 * h + 2 * kv) + (2 * hd if self.qk_norm else 0)
        layer = attn + 3 * d * f + 2 * d
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return self.vocab_size * d + self.num_hidden_layers * layer + d + head
