"""Triton kernel of DSpark's Markov-head sampling: one program per request walks its K block
positions left to right (each draft's distribution needs the draft before it), adding the
low-rank Markov bias, sampling (or taking the argmax) and scoring the confidence head.
Same signature and results as :func:`specpath_dspark.reference.markov_sample_reference`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _markov_sample_kernel(base_ptr, floor_ptr, w1_ptr, w2_ptr, anchors_ptr, cbase_ptr, cw_ptr, ctemp_ptr, invt_ptr,
                          u_ptr, tok_ptr, prob_ptr, conf_ptr, K, V, RANK,
                          BLOCK_V: tl.constexpr, BLOCK_R: tl.constexpr):
    r = tl.program_id(0)
    vs = tl.arange(0, BLOCK_V)
    vmask = vs < V
    rs = tl.arange(0, BLOCK_R)
    rmask = rs < RANK
    w2 = tl.load(w2_ptr + rs[:, None] * V + vs[None, :], mask=rmask[:, None] & vmask[None, :], other=0.0)
    cw = tl.load(cw_ptr + rs, mask=rmask, other=0.0)
    invt = tl.load(invt_ptr + r)
    greedy = invt <= 0.0
    scale = tl.where(greedy, 1.0, invt)
    prev = tl.load(anchors_ptr + r).to(tl.int64)
    for j in range(0, K):
        row = r * K + j
        e = tl.load(w1_ptr + prev * RANK + rs, mask=rmask, other=0.0)
        base = tl.load(base_ptr + row * V + vs, mask=vmask, other=float("-inf"))
        floor = tl.load(floor_ptr + row)
        logits = base + tl.sum(e[:, None] * w2, axis=0)
        logits = tl.where((base >= floor) & vmask, logits, float("-inf"))
        x = logits * scale
        p = tl.exp(x - tl.max(x, axis=0))
        p = tl.where(vmask, p, 0.0)
        q = p / tl.sum(p, axis=0)
        cdf = tl.cumsum(q, axis=0)
        u = tl.load(u_ptr + row)
        sampled = tl.sum(((cdf <= u) & vmask).to(tl.int64), axis=0)
        sampled = tl.minimum(sampled, V - 1)
        best = tl.argmax(logits, axis=0).to(tl.int64)
        tok = tl.where(greedy, best, sampled)
        z = (tl.load(cbase_ptr + row) + tl.sum(e * cw, axis=0)) / tl.load(ctemp_ptr + j)
        tl.store(conf_ptr + row, 1.0 / (1.0 + tl.exp(-z)))
        tl.store(tok_ptr + row, tok)
        tl.store(prob_ptr + row * V + vs, q, mask=vmask)
        prev = tok


def markov_sample(base_logits: torch.Tensor, floor: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                  anchors: torch.Tensor, conf_base: torch.Tensor, conf_w: torch.Tensor, conf_temp: torch.Tensor,
                  inv_temperature: torch.Tensor, uniforms: torch.Tensor):
    r, k, v = base_logits.shape
    rank = w1.shape[1]
    dev = base_logits.device
    tokens = torch.empty(r, k, dtype=torch.int64, device=dev)
    probs = torch.empty(r, k, v, dtype=torch.float32, device=dev)
    conf = torch.empty(r, k, dtype=torch.float32, device=dev)
    if r and k:
        f32 = torch.float32
        _markov_sample_kernel[(r,)](
            base_logits.to(f32).contiguous(), floor.to(f32).contiguous(), w1.to(f32).contiguous(),
            w2.to(f32).contiguous(), anchors.to(torch.int64).contiguous(), conf_base.to(f32).contiguous(),
            conf_w.to(f32).contiguous(), conf_temp.to(f32).contiguous(), inv_temperature.to(f32).contiguous(),
            uniforms.to(f32).contiguous(), tokens, probs, conf, k, v, rank,
            BLOCK_V=triton.next_power_of_2(v), BLOCK_R=triton.next_power_of_2(rank))
    return tokens, probs, conf
