"""The pieces every hidden-state head is made of: RMSNorm, a Llama decoder layer whose
attention may read a wider input than its residual (EAGLE-3 attends over [embedding ;
feature], 2d wide), RoPE from the target's settings, and the head-side numerics
(fp8 weight emulation, vocabulary-sharded argmax).

The layer never owns its attention: it hands q/k/v (RoPE applied) to an ``attend`` callable,
so the same weights run against the drafter's position-indexed KV at inference
(:mod:`specpath_eagle.kv`) and against the training-time masks (:mod:`specpath_eagle.training`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import torch
import torch.nn.functional as F
from torch import nn

from specpath.modeling.rope import RotaryEmbedding, apply_rope, normalize_rope_scaling

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def layer_shape(config: Mapping[str, Any]) -> dict[str, Any]:
    """The decoder-layer shape fields of an HF ``config.json`` (a target's or a drafter's), with the
    usual defaults: what every hidden-state drafter's config copies from its source."""
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
class HeadConfig:
    """The architecture fields of a head's ``config.json``."""

    kind: str
    """``"eagle"`` (EAGLE-1) or ``"eagle3"``; written as ``model_type``."""
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
    target_hidden_size: int | None = None
    target_num_hidden_layers: int | None = None
    num_taps: int = 1
    """Target layers fused into the feature (EAGLE-1: 1, the last; EAGLE-3: 3)."""
    draft_vocab_size: int | None = None
    """EAGLE-3: size of the reduced draft vocabulary (None: the target's)."""
    parallel_drafting: bool = False
    """The head carries P-EAGLE's mask embedding and mask hidden vector."""
    aux_layer_ids: tuple[int, ...] | None = None
    """EAGLE-3: the taps it was trained on."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeadConfig:
        ids = d.get("eagle_aux_hidden_state_layer_ids")
        return cls(
            kind=str(d.get("model_type", "eagle")),
            **layer_shape(d),
            target_hidden_size=d.get("target_hidden_size", d["hidden_size"]),
            target_num_hidden_layers=d.get("target_num_hidden_layers"),
            num_taps=d.get("num_taps", 3 if d.get("model_type") == "eagle3" else 1),
            draft_vocab_size=d.get("draft_vocab_size"),
            parallel_drafting=bool(d.get("parallel_drafting", False)),
            aux_layer_ids=None if ids is None else tuple(ids),
        )

    @classmethod
    def for_target(cls, kind: str, target: Mapping[str, Any], **overrides: Any) -> HeadConfig:
        """A one-layer head shaped like the target's layers (what the recipes train)."""
        fields = dict(
            kind=kind,
            **layer_shape(target),
            target_hidden_size=target["hidden_size"],
            target_num_hidden_layers=target["num_hidden_layers"],
            num_taps=3 if kind == "eagle3" else 1,
        )
        fields.update(overrides)
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        arch = {"eagle": "EagleLlamaForCausalLM", "eagle3": "Eagle3LlamaForCausalLM"}[self.kind]
        out = {
            "architectures": [arch],
            "model_type": self.kind,
            "speculator_config_class": self.kind,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": 1,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": dict(self.rope_scaling) if self.rope_scaling else None,
            "max_position_embeddings": self.max_position_embeddings,
            "hidden_act": "silu",
            "target_hidden_size": self.target_hidden_size,
            "target_num_hidden_layers": self.target_num_hidden_layers,
            "num_taps": self.num_taps,
            "parallel_drafting": self.parallel_drafting,
            "torch_dtype": "float32",
        }
        if self.draft_vocab_size is not None:
            out["draft_vocab_size"] = self.draft_vocab_size
        if self.aux_layer_ids is not None:
            out["eagle_aux_hidden_state_layer_ids"] = list(self.aux_layer_ids)
        return out

    def rotary(self) -> RotaryEmbedding:
        return RotaryEmbedding(
            theta=self.rope_theta,
            head_dim=self.head_dim,
            scaling=normalize_rope_scaling(self.rope_scaling or {}, max_position_embeddings=self.max_position_embeddings),
            max_position_embeddings=self.max_position_embeddings,
        )


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


class DraftLayer(nn.Module):
    """A Llama decoder layer whose q/k/v project from ``attn_in`` features (d for EAGLE-1,
    2d for EAGLE-3) while the residual stream stays d wide."""

    def __init__(self, config: HeadConfig, attn_in: int) -> None:
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
        self._fused: tuple[torch.Tensor, torch.Tensor] | None = None

    def fuse_projections(self) -> None:
        """Inference: q/k/v and gate/up as one matmul each (fewer calls: on CPU a drafting step
        is dominated by per-call overhead). Call again after the weights change."""
        with torch.no_grad():
            qkv = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
            gate_up = torch.cat([self.gate_proj.weight, self.up_proj.weight])
        self._fused = (qkv, gate_up)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        lead = x.shape[:-1]
        h, kv, d = self.n_heads, self.n_kv_heads, self.head_dim
        if self._fused is not None:
            q, k, v = F.linear(x, self._fused[0]).split([h * d, kv * d, kv * d], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q, k, v = q.view(*lead, h, d), k.view(*lead, kv, d), v.reshape(*lead, kv, d)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def finish(self, attn: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """o_proj + residual, then the MLP block."""
        h = residual + self.o_proj(attn.reshape(*residual.shape[:-1], -1))
        x = self.post_attention_layernorm(h)
        if self._fused is not None:
            gate, up = F.linear(x, self._fused[1]).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return h + self.down_proj(F.silu(gate) * up)

    def forward(self, x: torch.Tensor, residual: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                attend: Attend) -> torch.Tensor:
        q, k, v = self.qkv(x, cos, sin)
        return self.finish(attend(q, k, v), residual)


# -- head-side numerics ---------------------------------------------------------------------

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def fp8_weight(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` [V, d] rounded through float8 e4m3 with one scale per row, returned in its
    own dtype: the numbers an fp8 weight-only GEMM computes with (emulated where no fp8 GEMM)."""
    w = weight.float()
    scale = w.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / FP8_MAX
    q = (w / scale).to(torch.float8_e4m3fn)
    return (q.float() * scale).to(weight.dtype)


FP4_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
"""The non-negative values a float4 e2m1 element can hold (NVFP4's element type)."""
NVFP4_BLOCK = 16
"""Elements per NVFP4 scale block (along the input dimension)."""


def nvfp4_weight(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` [V, d] rounded through NVFP4 and returned in its own dtype: e2m1 elements in
    blocks of 16 along ``d``, each block scaled by a float8 e4m3 factor, over one fp32 tensor
    scale (so the block scales fit e4m3). Simulated: the numbers an NVFP4 weight-only GEMM
    computes with, on hardware without one."""
    w = weight.float()
    rows, d = w.shape
    pad = (-d) % NVFP4_BLOCK
    if pad:
        w = torch.nn.functional.pad(w, (0, pad))
    blocks = w.reshape(rows, -1, NVFP4_BLOCK)
    fp4_max = FP4_E2M1_VALUES[-1]
    tensor_scale = blocks.abs().amax().clamp_min(1e-12) / (FP8_MAX * fp4_max)
    block_scale = (blocks.abs().amax(dim=-1, keepdim=True) / fp4_max / tensor_scale).to(torch.float8_e4m3fn).float()
    scale = (block_scale * tensor_scale).clamp_min(1e-30)
    grid = torch.tensor(FP4_E2M1_VALUES, dtype=torch.float32)
    x = (blocks / scale).clamp(-fp4_max, fp4_max)
    nearest = grid[(x.abs().unsqueeze(-1) - grid).abs().argmin(dim=-1)]  # round to the nearest e2m1 value
    q = torch.sign(x) * nearest * scale
    return q.reshape(rows, -1)[:, :d].to(weight.dtype)


HEAD_QUANTIZERS = {"fp8": fp8_weight, "nvfp4": nvfp4_weight}
"""``draft_lm_head_quantization`` -> the weight rounding the heads apply (simulated)."""


def quantized_weight(weight: torch.Tensor, method: str) -> torch.Tensor:
    """``weight`` rounded as ``draft_lm_head_quantization=method`` asks (fp8 or nvfp4)."""
    if method not in HEAD_QUANTIZERS:
        raise ValueError(f"draft_lm_head_quantization={method!r} is not implemented; allowed: {sorted(HEAD_QUANTIZERS)}")
    return HEAD_QUANTIZERS[method](weight)


def sharded_argmax(logits: torch.Tensor, num_shards: int) -> torch.Tensor:
    """Argmax over the last dim as a vocabulary-parallel drafter computes it: each shard takes
    its local max and index, then only ``num_shards`` (value, index) pairs are reduced. Ties
    go to the lowest index, as ``torch.argmax``."""
    vocab = logits.shape[-1]
    num_shards = max(1, min(int(num_shards), vocab))
    if num_shards == 1:
        return logits.argmax(dim=-1)
    width = -(-vocab // num_shards)
    pad = width * num_shards - vocab
    if pad:
        logits = F.pad(logits, (0, pad), value=float("-inf"))
    shards = logits.view(*logits.shape[:-1], num_shards, width)
    local_max, local_idx = shards.max(dim=-1)  # the per-rank result
    offsets = torch.arange(num_shards, device=logits.device) * width
    best = local_max.argmax(dim=-1, keepdim=True)  # first shard holding the max
    return (local_idx + offsets).gather(-1, best).squeeze(-1)
