"""Rotary position embeddings (RoPE) with the scaling types of Hugging Face Llama checkpoints.

The inverse frequencies follow the published formulas (and `transformers`' reading of the
``rope_scaling`` / ``rope_parameters`` dict) so a checkpoint gives the same logits here as there:

``default``  theta^(-2i/d)
``linear``   inv_freq / factor (position interpolation)
``llama3``   Llama 3.1's wavelength-banded interpolation
``dynamic``  dynamic NTK-aware: the base grows with the longest position of the call once it
             passes ``max_position_embeddings`` (as ``transformers``' "dynamic"; keys already in a
             KV cache keep the rotation they were written with, exactly as there)
``ntk``      static NTK-aware: base * factor^(d/(d-2)), fixed for every position
``yarn``     YaRN: per-band blend of interpolation and extrapolation plus an attention factor
             applied to cos/sin

cos/sin for positions ``[0, cache_len)`` are computed once; a call only gathers rows, so there is
no per-token work in Python. Positions past the cache grow it (doubling) on CPU.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch
from torch import nn

from specpath_engine.modeling.native import native_kernels

ROPE_TYPES = ("default", "linear", "llama3", "dynamic", "ntk", "yarn")


def normalize_rope_scaling(
    scaling: Mapping[str, Any] | None, *, max_position_embeddings: int
) -> dict[str, Any] | None:
    """Return a canonical scaling dict (``rope_type`` key, required fields present) or None.

    Accepts the old ``{"type": ...}`` and new ``{"rope_type": ...}`` spellings; drops
    ``rope_theta`` (kept on the config itself). Raises ValueError with one line on bad input.
    """
    if not scaling:
        return None
    scaling = dict(scaling)
    scaling.pop("rope_theta", None)
    rope_type = scaling.pop("rope_type", None) or scaling.pop("type", None) or "default"
    scaling.pop("type", None)
    if rope_type not in ROPE_TYPES:
        raise ValueError(
            f"rope_scaling.rope_type={rope_type!r} is not supported; allowed: {', '.join(ROPE_TYPES)}"
        )
    if float(scaling.pop("partial_rotary_factor", 1.0)) != 1.0:
        raise ValueError("rope_scaling.partial_rotary_factor != 1.0 is not supported by this model")
    if rope_type == "default":
        return None
    if rope_type in ("llama3", "yarn"):
        scaling.setdefault("original_max_position_embeddings", max_position_embeddings)
    if rope_type == "llama3":
        required = ("factor", "low_freq_factor", "high_freq_factor")
    elif rope_type == "yarn":
        required = ()  # factor may be derived from the two lengths
    else:
        required = ("factor",)
    missing = [key for key in required if scaling.get(key) is None]
    if missing:
        raise ValueError(f"rope_scaling of type {rope_type!r} needs {', '.join(missing)}")
    return {"rope_type": rope_type, **scaling}


def _base_inv_freq(theta: float, dim: int) -> torch.Tensor:
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim
    return 1.0 / (theta**exponents)


def _dynamic_ntk_inv_freq(theta: float, dim: int, factor: float, seq_len: int, max_pos: int) -> torch.Tensor:
    seq_len = max(seq_len, max_pos)
    base = theta * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return _base_inv_freq(base, dim)


def _llama3_inv_freq(theta: float, dim: int, s: Mapping[str, Any]) -> torch.Tensor:
    inv_freq = _base_inv_freq(theta, dim)
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_len = s["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def _yarn_inv_freq(theta: float, dim: int, s: Mapping[str, Any], max_pos: int) -> tuple[torch.Tensor, float]:
    original = s["original_max_position_embeddings"]
    factor = s.get("factor") or max_pos / original

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = s.get("attention_factor")
    if attention_factor is None:
        if s.get("mscale") and s.get("mscale_all_dim"):
            attention_factor = mscale(factor, s["mscale"]) / mscale(factor, s["mscale_all_dim"])
        else:
            attention_factor = mscale(factor)
    beta_fast = s.get("beta_fast") or 32
    beta_slow = s.get("beta_slow") or 1

    def correction_dim(num_rotations: float) -> float:
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = theta ** (torch.arange(0, dim, 2).to(torch.float32) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp  # 1 = extrapolate (high-frequency bands), 0 = interpolate
    return interpolation * (1 - keep) + extrapolation * keep, float(attention_factor)


def rope_inv_freq(
    *, theta: float, head_dim: int, scaling: Mapping[str, Any] | None, max_position_embeddings: int
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies [head_dim/2] and the cos/sin multiplier for a (normalised) scaling dict."""
    rope_type = scaling["rope_type"] if scaling else "default"
    if rope_type == "default" or rope_type == "dynamic":  # dynamic equals default inside the window
        return _base_inv_freq(theta, head_dim), 1.0
    if rope_type == "linear":
        return _base_inv_freq(theta, head_dim) / scaling["factor"], 1.0
    if rope_type == "ntk":
        factor = scaling["factor"]
        return _base_inv_freq(theta * factor ** (head_dim / (head_dim - 2)), head_dim), 1.0
    if rope_type == "llama3":
        return _llama3_inv_freq(theta, head_dim, scaling), 1.0
    if rope_type == "yarn":
        return _yarn_inv_freq(theta, head_dim, scaling, max_position_embeddings)
    raise ValueError(f"unknown rope_type {rope_type!r}")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [..., T, heads, head_dim] by cos/sin [T, head_dim] (bf16 inference on a flat
    [T, heads, head_dim] runs as one native call where the kernels are built)."""
    if x.dim() == 3 and x.shape[2] % 32 == 0 and x.stride(2) == 1 and x.stride(1) == x.shape[2] and cos.dim() == 2:
        if (native := native_kernels(x, cos, sin)) is not None:
            return native.rope(x, cos.contiguous(), sin.contiguous())
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return x * cos + rotate_half(x) * sin


class RotaryEmbedding(nn.Module):
    """Precomputed cos/sin table; ``forward(positions)`` gathers rows for a flat or [B, T] index."""

    def __init__(
        self,
        *,
        theta: float,
        head_dim: int,
        scaling: Mapping[str, Any] | None,
        max_position_embeddings: int,
    ) -> None:
        super().__init__()
        self.theta = theta
        self.head_dim = head_dim
        self.scaling = dict(scaling) if scaling else None
        self.max_position_embeddings = max_position_embeddings
        self.rope_type = self.scaling["rope_type"] if self.scaling else "default"
        inv_freq, self.attention_scaling = rope_inv_freq(
            theta=theta, head_dim=head_dim, scaling=scaling, max_position_embeddings=max_position_embeddings
        )
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._build(max_position_embeddings)

    def _table(self, inv_freq: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = torch.outer(positions.to(torch.float32), inv_freq.to(torch.float32))
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling

    def _build(self, length: int) -> None:
        device = self.inv_freq.device
        dtype = getattr(self, "cos_cached", self.inv_freq).dtype
        cos, sin = self._table(self.inv_freq, torch.arange(length, device=device))
        self.register_buffer("cos_cached", cos.to(dtype), persistent=False)
        self.register_buffer("sin_cached", sin.to(dtype), persistent=False)

    @property
    def cache_len(self) -> int:
        return self.cos_cached.shape[0]

    def ensure_length(self, length: int) -> None:
        """Grow the table to cover positions < ``length`` (call once at start-up on accelerators)."""
        if length > self.cache_len:
            self._build(max(length, 2 * self.cache_len))

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.rope_type == "dynamic":
            seq_len = int(positions.max()) + 1 if positions.numel() else 0
            if seq_len > self.max_position_embeddings:
                inv_freq = _dynamic_ntk_inv_freq(
                    self.theta, self.head_dim, self.scaling["factor"], seq_len, self.max_position_embeddings
                ).to(positions.device)
                cos, sin = self._table(inv_freq, positions)
                return cos.to(self.cos_cached.dtype), sin.to(self.cos_cached.dtype)
        try:
            return self.cos_cached[positions], self.sin_cached[positions]
        except IndexError:  # CPU raises for an out-of-range gather: grow once and retry
            self.ensure_length(int(positions.max()) + 1)
            return self.cos_cached[positions], self.sin_cached[positions]
