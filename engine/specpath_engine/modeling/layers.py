"""The decoder layer drafters are made of, and the layer shape they copy from a target.

:class:`DraftLayer` is a Llama decoder layer whose attention may read a wider input than its
residual (EAGLE-3 attends over [embedding ; feature], 2d wide). It never owns its attention: it
hands q/k/v (RoPE applied) to an ``attend`` callable, so the same weights run against a
drafter's position-indexed KV at inference and against training-time masks. Parameter names are
flat (``q_proj``, ``gate_proj``, ...), the names of the shipped heads' checkpoints. Fused and
pre-packed for bf16 inference, its two halves run as one native call each
(``specpath_engine.modeling.native``), bit-equal to the per-op path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import torch
import torch.nn.functional as F
from torch import nn

from specpath_engine.modeling.native import native_kernels, native_linears
from specpath_engine.modeling.norm import RMSNorm
from specpath_engine.modeling.rope import RotaryEmbedding, apply_rope, normalize_rope_scaling

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``attend(q [T, H, D], k [T, KV, D], v [T, KV, D]) -> [T, H, D]``."""


def layer_shape(config: Mapping[str, Any]) -> dict[str, Any]:
    """The decoder-layer shape fields of an HF ``config.json`` (a target's or a drafter's), with the
    usual defaults: what every hidden-state drafter's config copies from its source. The layers
    are SwiGLU with RMSNorm: another ``hidden_act`` or a non-numeric epsilon is refused here, not
    computed wrongly (or failing) at the first forward."""
    import math

    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"hidden_act={act!r:.40} is not supported; allowed: silu (the layers are SwiGLU)")
    eps = config.get("rms_norm_eps", 1e-6)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"rms_norm_eps must be a finite number > 0, got {eps!r:.40}")
    heads = config["num_attention_heads"]
    return dict(
        hidden_size=config["hidden_size"],
        intermediate_size=config["intermediate_size"],
        num_attention_heads=heads,
        num_key_value_heads=config.get("num_key_value_heads") or heads,
        head_dim=config.get("head_dim") or config["hidden_size"] // heads,
        vocab_size=config["vocab_size"],
        rms_norm_eps=config.get("rms_norm_eps", 1e-6),
        rope_theta=float(config.get("rope_theta", 10000.0)),
        rope_scaling=config.get("rope_scaling"),
        max_position_embeddings=config.get("max_position_embeddings", 2048),
    )


@attrs.frozen(kw_only=True)
class LayerShape:
    """The :func:`layer_shape` fields as the base of a drafter's config class."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    """The target's vocabulary."""
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: Mapping[str, Any] | None = None
    max_position_embeddings: int = 2048

    def shape_dict(self) -> dict[str, Any]:
        """The fields as an HF ``config.json`` writes them (SwiGLU: ``hidden_act`` silu)."""
        return {
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": dict(self.rope_scaling) if self.rope_scaling else None,
            "max_position_embeddings": self.max_position_embeddings,
            "hidden_act": "silu",
        }

    def rotary(self) -> RotaryEmbedding:
        """RoPE with these settings (any scaling type)."""
        return RotaryEmbedding(
            theta=self.rope_theta,
            head_dim=self.head_dim,
            scaling=normalize_rope_scaling(self.rope_scaling or {}, max_position_embeddings=self.max_position_embeddings),
            max_position_embeddings=self.max_position_embeddings,
        )


def fused_linear(*linears: nn.Linear) -> nn.Linear:
    """One ``nn.Linear`` whose outputs are those of ``linears`` concatenated (weights and biases;
    their device and dtype), not trained: q/k/v or gate/up as one matmul."""
    first = linears[0]
    # Built on meta and given the concatenated tensors: no random init, no second copy (a cold
    # start fuses ~60 of these).
    fused = nn.Linear(first.in_features, sum(l.out_features for l in linears), bias=first.bias is not None,
                      device="meta", dtype=first.weight.dtype)
    with torch.no_grad():
        fused.weight = nn.Parameter(torch.cat([l.weight for l in linears]), requires_grad=False)
        if first.bias is not None:
            fused.bias = nn.Parameter(torch.cat([l.bias for l in linears]), requires_grad=False)
    return fused.requires_grad_(False)


class DraftLayer(nn.Module):
    """A Llama decoder layer whose q/k/v project from ``attn_in`` features (d for EAGLE-1,
    2d for EAGLE-3) while the residual stream stays d wide. ``config`` is any object with the
    :func:`layer_shape` fields. Its input norm belongs to the caller (heads norm the fused
    input, not the residual)."""

    def __init__(self, config: Any, attn_in: int) -> None:
        super().__init__()
        c = config
        self.n_heads, self.n_kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(attn_in, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(attn_in, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(attn_in, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.fused_qkv: nn.Linear | None = None
        self.fused_gate_up: nn.Linear | None = None

    def fuse_projections(self) -> None:
        """Inference: q/k/v and gate/up as one matmul each (fewer calls: on CPU a drafting step
        is dominated by per-call overhead). Call again after the weights change. The fused
        copies are ``nn.Linear`` submodules, so an engine can pre-pack them like any other
        (``SpeculatorContext.prepare_module``); they join the state dict."""
        self.fused_qkv = fused_linear(self.q_proj, self.k_proj, self.v_proj)
        self.fused_gate_up = fused_linear(self.gate_proj, self.up_proj)

    def native_linears(self) -> tuple[Any, ...] | None:
        """The four projections as native descriptors when this layer can run on the native fused
        functions (fused, pre-packed native weights; bf16), else ``None``; asked every call."""
        if self.fused_qkv is None or self.fused_gate_up is None or self.head_dim % 32:
            return None
        if self.post_attention_layernorm.weight.dtype is not torch.bfloat16:
            return None
        return native_linears(self.fused_qkv, self.o_proj, self.fused_gate_up, self.down_proj)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        lead = x.shape[:-1]
        h, kv, d = self.n_heads, self.n_kv_heads, self.head_dim
        if x.dim() == 2 and (native := native_kernels(x, cos, sin)) and (linears := self.native_linears()):
            out = native.layer_pre(x.contiguous(), None, 0.0, linears[0], cos.contiguous(), sin.contiguous(), h, kv, d)
            return out[:, :h], out[:, h : h + kv], out[:, h + kv :]
        if self.fused_qkv is not None:
            q, k, v = self.fused_qkv(x).split([h * d, kv * d, kv * d], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q, k, v = q.view(*lead, h, d), k.view(*lead, kv, d), v.reshape(*lead, kv, d)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def finish(self, attn: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """o_proj + residual, then the MLP block (one native call where it runs)."""
        if residual.dim() == 2 and (native := native_kernels(residual, attn)) and (linears := self.native_linears()):
            norm = self.post_attention_layernorm
            return native.layer_post(residual.contiguous(), attn.reshape(residual.shape[0], -1).contiguous(),
                                     linears[1], norm.weight, norm.eps, linears[2], linears[3])
        h = residual + self.o_proj(attn.reshape(*residual.shape[:-1], -1))
        x = self.post_attention_layernorm(h)
        if self.fused_gate_up is not None:
            gate, up = self.fused_gate_up(x).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return h + self.down_proj(F.silu(gate) * up)

    def forward(self, x: torch.Tensor, residual: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                attend: Attend) -> torch.Tensor:
        q, k, v = self.qkv(x, cos, sin)
        return self.finish(attend(q, k, v), residual)
