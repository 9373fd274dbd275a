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
