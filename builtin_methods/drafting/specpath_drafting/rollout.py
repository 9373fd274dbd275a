"""The uncached rollout of a hidden-state head: every draft depth over all positions at once.

Training-time test (EAGLE-3) and P-EAGLE train queries at depth j that sit j positions after the
last real position they may see. A depth-j query at position q attends to the depth-0 (real)
keys at positions <= q-j and to one key per depth d = 1..j, the one at position q-j+d: exactly
what chain drafting (or the one-pass mask block) sees. The training recipes use it to train, the
tests as an independent check of the incremental (KV-cached) drafting loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch


def _shift(x: torch.Tensor, s: int) -> torch.Tensor:
    """``out[:, q] = x[:, q - s]`` (zeros where q < s), along dim 1."""
    if s == 0:
        return x
    return torch.cat([x.new_zeros(x.shape[0], s, *x.shape[2:]), x[:, :-s]], dim=1)


def rollout_attention(q: torch.Tensor, cache: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Attention of depth ``j = len(cache) - 1`` queries ``q`` [B, P, H, D] (see the module
    docstring); ``cache[d]`` holds depth d's keys and values, [B, P, KV, D] each."""
    j = len(cache) - 1
    b, p, h, d = q.shape
    groups = h // cache[0][0].shape[2]

    def expand(t: torch.Tensor) -> torch.Tensor:
        return t.repeat_interleave(groups, dim=2) if groups > 1 else t

    scale = 1.0 / math.sqrt(d)
    k0, v0 = expand(cache[0][0]), expand(cache[0][1])
    s0 = torch.einsum("bqhd,bkhd->bhqk", q, k0) * scale
    idx = torch.arange(p, device=q.device)
    s0 = s0.masked_fill((idx[None, :] > idx[:, None] - j)[None, None], float("-inf"))
    diag_k = [_shift(expand(cache[t][0]), j - t) for t in range(1, j + 1)]
    diag_v = [_shift(expand(cache[t][1]), j - t) for t in range(1, j + 1)]
    if not diag_k:
        return torch.einsum("bhqk,bkhd->bqhd", s0.softmax(-1), v0)
    sd = torch.stack([(q * k).sum(-1) for k in diag_k], dim=-1) * scale  # [B, P, H, j]
    scores = torch.cat([s0, sd.permute(0, 2, 1, 3)], dim=-1)
    w = scores.softmax(-1)
    out = torch.einsum("bhqk,bkhd->bqhd", w[..., :p], v0)
    wd = w[..., p:].permute(0, 2, 1, 3)  # [B, P, H, j]
    for t, v in enumerate(diag_v):
        out = out + wd[..., t:t + 1] * v
    return out


def depth_pass(head: Any, embeds: torch.Tensor, features: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               cache: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """One depth of a training rollout over ``[B, P]`` positions; appends its keys to ``cache``."""
    x, residual = head.layer_input(embeds, features)
    q, k, v = head.layer.qkv(x, cos, sin)
    cache.append((k, v))
    return head.layer.finish(rollout_attention(q, cache), residual)
