"""Head-side numerics: fp8 weight emulation and the vocabulary-sharded argmax (what a
tensor-parallel drafter computes)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

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
