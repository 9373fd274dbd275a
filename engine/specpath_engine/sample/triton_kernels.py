"""Triton twins of :mod:`specpath_engine.sample.reference` (same names, same signatures).

One program per request walks its draft positions in order; vocabulary-wide work (residual
sampling, block verification's residual mass, TLI lifting) runs in tiles of ``BLOCK_V``.
Kernels are launched with ``enable_fp_fusion=False`` so ``w * p - q`` rounds exactly as in
torch. On CPU they run only under ``TRITON_INTERPRET=1`` (tests); the engine uses them on CUDA.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specpath_engine.sample.reference import CDF_TILE

BLOCK_V = CDF_TILE  # recover's tiles must match the reference's two-level CDF
_LAUNCH = {"enable_fp_fusion": False}


def _launch_options(device: torch.device) -> dict:
    return _LAUNCH if device.type == "cuda" else {}


@triton.jit
def _request_span(cu):
    """This program's request and the half-open range ``[start, end)`` of its draft positions."""
    r = tl.program_id(0)
    return r, tl.load(cu + r), tl.load(cu + r + 1)


@triton.jit
def _draft_token_probs(t, x, target_probs, draft_probs, V, HAS_DRAFT_PROBS: tl.constexpr):
    """``(p, q)``: the target's and the drafter's probability of draft token ``x`` at position
    ``t`` (q = 1 for a drafter that gives no probabilities: a one-hot proposal)."""
    p = tl.load(target_probs + t * V + x)
    if HAS_DRAFT_PROBS:
        q = tl.load(draft_probs + t * V + x)
    else:
        q = tl.full([], 1.0, tl.float32)
    return p, q


@triton.jit
def _native_ok(t, draft_ids, target_argmax, target_probs, draft_probs, uniforms, greedy, V,
               HAS_PROBS: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr):
    x = tl.load(draft_ids + t).to(tl.int64)
    ok = x == tl.load(target_argmax + t).to(tl.int64)
    if HAS_PROBS:
        p, q = _draft_token_probs(t, x, target_probs, draft_probs, V, HAS_DRAFT_PROBS)
        u = tl.load(uniforms + t)
        ok = tl.where(greedy != 0, ok, u * q < p)
    return ok


@triton.jit
def _accept_standard_kernel(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy,
                            out_num, V, HAS_PROBS: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr):
    r, start, end = _request_span(cu)
    greedy = tl.load(is_greedy + r)
    alive = tl.full([], 1, tl.int32)
    n = tl.full([], 0, tl.int32)
    for t in range(start, end):
        ok = _native_ok(t, draft_ids, target_argmax, target_probs, draft_probs, uniforms, greedy, V,
                        HAS_PROBS, HAS_DRAFT_PROBS)
        alive = alive * ok.to(tl.int32)
        n += alive
    tl.store(out_num + r, n)


@triton.jit
def _accept_synthetic_kernel(cu, conditional_rates, uniforms, out_num):
    r, start, end = _request_span(cu)
    alive = tl.full([], 1, tl.int32)
    n = tl.full([], 0, tl.int32)
    for t in range(start, end):
        ok = tl.load(uniforms + t) < tl.load(conditional_rates + (t - start))
        alive = alive * ok.to(tl.int32)
        n += alive
    tl.store(out_num + r, n)


@triton.jit
def _accept_fly_kernel(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy,
                       high_entropy, window, out_num, V, HAS_DRAFT_PROBS: tl.constexpr):
    r, start, end = _request_span(cu)
    greedy = tl.load(is_greedy + r)
    w = tl.load(window + r).to(tl.int64)
    alive = tl.full([], 1, tl.int32)
    n = tl.full([], 0, tl.int32)
    for t in range(start, end):
        ok = _native_ok(t, draft_ids, target_argmax, target_probs, draft_probs, uniforms, greedy, V,
                        True, HAS_DRAFT_PROBS)
        x = tl.load(draft_ids + t).to(tl.int64)
        p, q = _draft_token_probs(t, x, target_probs, draft_probs, V, HAS_DRAFT_PROBS)
        fits = (w >= 1) & (t + w <= end - 1)
        possible = (p > 0) & ((greedy != 0) | (q > 0))
        gate = (tl.load(high_entropy + t) != 0) & fits & possible
        ahead = tl.full([], 0, tl.int32)
        for s in range(1, w + 1):
            s_ok = _native_ok(tl.minimum(t + s, end - 1), draft_ids, target_argmax, target_probs, draft_probs,
                              uniforms, greedy, V, True, HAS_DRAFT_PROBS)
            ahead += s_ok.to(tl.int32)
        keep = ok | (gate & (ahead == w))
        alive = alive * keep.to(tl.int32)
        n += alive
    tl.store(out_num + r, n)


@triton.jit
def _accept_block_kernel(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy,
                         out_num, out_scale, V, HAS_DRAFT_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    r, start, end = _request_span(cu)
    greedy = tl.load(is_greedy + r)
    prev = tl.full([], 1.0, tl.float32)
    tau = tl.full([], 0, tl.int32)
    scale = tl.full([], 1.0, tl.float32)
    alive = tl.full([], 1, tl.int32)
    matched = tl.full([], 0, tl.int32)
    for t in range(start, end):
        x = tl.load(draft_ids + t).to(tl.int64)
        alive = alive * (x == tl.load(target_argmax + t).to(tl.int64)).to(tl.int32)
        matched += alive
        p, q = _draft_token_probs(t, x, target_probs, draft_probs, V, HAS_DRAFT_PROBS)
        num = prev * p
        w = tl.where(num <= 0, 0.0, tl.where(num >= q, 1.0, tl.math.div_rn(num, tl.maximum(q, 1e-38))))
        prev = w
        last = t == end - 1
        nxt = tl.minimum(t + 1, end - 1)
        if HAS_DRAFT_PROBS:
            z = tl.full([], 0.0, tl.float32)
            limit = tl.where(t < end - 1, V, 0)
            for v0 in range(0, V, BLOCK):
                offs = v0 + tl.arange(0, BLOCK)
                m = offs < limit
                pr = tl.load(target_probs + nxt * V + offs, mask=m, other=0.0)
                qr = tl.load(draft_probs + nxt * V + offs, mask=m, other=0.0)
                z += tl.sum(tl.maximum(w * pr - qr, 0.0), axis=0)
        else:
            x_next = tl.load(draft_ids + nxt).to(tl.int64)
            z = w * (1 - tl.load(target_probs + nxt * V + x_next))
        denom = z + (1 - w)
        h = tl.where(denom > 0, tl.math.div_rn(z, tl.where(denom > 0, denom, 1.0)), 1.0)
        h = tl.where(last, w, h)
        hit = tl.load(uniforms + t) < h
        tau = tl.where(hit, (t - start + 1).to(tl.int32), tau)
        scale = tl.where(hit, w, scale)
    tl.store(out_num + r, tl.where(greedy != 0, matched, tau))
    tl.store(out_scale + r, tl.where(greedy != 0, 1.0, scale))


@triton.jit
def _residual_tile(target_probs, draft_probs, row, x, w, v0, V, use_p,
                   SUBTRACT: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    offs = v0 + tl.arange(0, BLOCK)
    m = offs < V
    p = tl.load(target_probs + row * V + offs, mask=m, other=0.0)
    if SUBTRACT:
        if HAS_DRAFT_PROBS:
            q = tl.load(draft_probs + row * V + offs, mask=m, other=0.0)
        else:
            q = (offs == x).to(tl.float32)
        weights = tl.where(use_p, p, tl.maximum(w * p - q, 0.0))
    else:
        weights = p
    return offs, weights


@triton.jit
def _residual_total(target_probs, draft_probs, row, x, w, V, use_p,
                    SUBTRACT: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    """The residual distribution's mass over the whole vocabulary, in float64 (tile by tile)."""
    total = tl.full([], 0.0, tl.float64)
    for v0 in range(0, V, BLOCK):
        offs, weights = _residual_tile(target_probs, draft_probs, row, x, w, v0, V, use_p,
                                       SUBTRACT, HAS_DRAFT_PROBS, BLOCK)
        total += tl.sum(weights.to(tl.float64), axis=0)
    return total


@triton.jit
def _recover_kernel(target_probs, draft_probs, draft_ids, rows, scale, uniforms, out_token, V,
                    SUBTRACT: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(rows + i).to(tl.int64)
    w = tl.load(scale + i)
    x = tl.load(draft_ids + row).to(tl.int64)
    use_p = tl.full([], 0, tl.int1)
    total = _residual_total(target_probs, draft_probs, row, x, w, V, use_p, SUBTRACT, HAS_DRAFT_PROBS, BLOCK)
    if total <= 0:  # an empty residual falls back to p
        use_p = tl.full([], 1, tl.int1)
        total = _residual_total(target_probs, draft_probs, row, x, w, V, use_p, SUBTRACT, HAS_DRAFT_PROBS, BLOCK)
    target = tl.load(uniforms + i).to(tl.float64) * total
    running = tl.full([], 0.0, tl.float64)
    count = tl.full([], 0, tl.int64)
    for v0 in range(0, V, BLOCK):
        offs, weights = _residual_tile(target_probs, draft_probs, row, x, w, v0, V, use_p,
                                       SUBTRACT, HAS_DRAFT_PROBS, BLOCK)
        cdf = running + tl.cumsum(weights.to(tl.float64), axis=0)
        count += tl.sum(((cdf <= target) & (offs < V)).to(tl.int64), axis=0)
        running += tl.sum(weights.to(tl.float64), axis=0)
    tl.store(out_token + i, tl.minimum(count, V - 1))


@triton.jit
def _lift_probs_kernel(draft_probs, target_to_draft, out, VD, VT, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    total = tl.full([], 0.0, tl.float32)
    for v0 in range(0, VT, BLOCK):
        offs = v0 + tl.arange(0, BLOCK)
        src = tl.load(target_to_draft + offs, mask=offs < VT, other=-1)
        total += tl.sum(tl.load(draft_probs + t * VD + src, mask=src >= 0, other=0.0), axis=0)
    for v0 in range(0, VT, BLOCK):
        offs = v0 + tl.arange(0, BLOCK)
        src = tl.load(target_to_draft + offs, mask=offs < VT, other=-1)
        vals = tl.load(draft_probs + t * VD + src, mask=src >= 0, other=0.0)
        tl.store(out + t * VT + offs, tl.math.div_rn(vals, total), mask=offs < VT)


# ---------------------------------------------------------------- wrappers (reference signatures)

def _block(vocab: int) -> int:
    return min(BLOCK_V, triton.next_power_of_2(max(vocab, 16)))


def _dummy(like: torch.Tensor) -> torch.Tensor:
    return torch.zeros(1, dtype=torch.float32, device=like.device)


def _flat(*tensors):
    """Kernels index rows as ``row * V``: hand them contiguous memory (None stays None)."""
    return tuple(t.contiguous() if t is not None else None for t in tensors)


def _verify_inputs(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy):
    """What every acceptance kernel takes first: the tensors contiguous, an absent probability
    table replaced by a dummy the kernel never reads (its ``HAS_*`` flag is off), the greedy
    flags as int8; and the batch size and the vocabulary size (1 without probabilities)."""
    draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms = _flat(
        draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms)
    vocab = target_probs.shape[1] if target_probs is not None else 1
    tables = [t if t is not None else _dummy(cu) for t in (target_probs, draft_probs)]
    return (draft_ids, cu, target_argmax, *tables, uniforms, is_greedy.to(torch.int8)), cu.numel() - 1, vocab


def accept_standard(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy):
    inputs, batch, vocab = _verify_inputs(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy)
    out = torch.empty(batch, dtype=torch.int32, device=cu.device)
    if batch:
        _accept_standard_kernel[(batch,)](
            *inputs, out, vocab, HAS_PROBS=target_probs is not None, HAS_DRAFT_PROBS=draft_probs is not None,
            **_launch_options(cu.device),
        )
    return out


def accept_synthetic(cu, conditional_rates, uniforms):
    cu, conditional_rates, uniforms = _flat(cu, conditional_rates, uniforms)
    batch = cu.numel() - 1
    out = torch.empty(batch, dtype=torch.int32, device=cu.device)
    if batch:
        rates = conditional_rates if conditional_rates.numel() else _dummy(cu)
        _accept_synthetic_kernel[(batch,)](cu, rates, uniforms, out, **_launch_options(cu.device))
    return out


def accept_fly(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy, high_entropy, window):
    inputs, batch, vocab = _verify_inputs(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy)
    out = torch.empty(batch, dtype=torch.int32, device=cu.device)
    if batch:
        _accept_fly_kernel[(batch,)](
            *inputs, high_entropy.to(torch.int8), window.to(torch.int32), out, vocab,
            HAS_DRAFT_PROBS=draft_probs is not None, **_launch_options(cu.device),
        )
    return out


def accept_block(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy):
    if target_probs is None:  # every row greedy: the standard kernel counts the matches
        num = accept_standard(draft_ids, cu, target_argmax, None, None, uniforms, is_greedy)
        return num, torch.ones(num.numel(), dtype=torch.float32, device=cu.device)
    inputs, batch, vocab = _verify_inputs(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy)
    num = torch.empty(batch, dtype=torch.int32, device=cu.device)
    scale = torch.empty(batch, dtype=torch.float32, device=cu.device)
    if batch:
        _accept_block_kernel[(batch,)](
            *inputs, num, scale, vocab, HAS_DRAFT_PROBS=draft_probs is not None, BLOCK=_block(vocab),
            **_launch_options(cu.device),
        )
    return num, scale


def recover(target_probs, draft_probs, draft_ids, rows, scale, uniforms, subtract_draft):
    target_probs, draft_probs, draft_ids, rows = _flat(target_probs, draft_probs, draft_ids, rows)
    out = torch.empty(rows.numel(), dtype=torch.int64, device=rows.device)
    if rows.numel():
        vocab = target_probs.shape[1]
        _recover_kernel[(rows.numel(),)](
            target_probs, draft_probs if draft_probs is not None else _dummy(rows),
            draft_ids, rows, scale.float(), uniforms.float(), out, vocab,
            SUBTRACT=bool(subtract_draft), HAS_DRAFT_PROBS=draft_probs is not None, BLOCK=_block(vocab),
            **_launch_options(rows.device),
        )
    return out


def lift_probs(draft_probs, target_to_draft):
    rows, draft_vocab = draft_probs.shape
    target_vocab = target_to_draft.numel()
    out = torch.empty((rows, target_vocab), dtype=torch.float32, device=draft_probs.device)
    if rows:
        _lift_probs_kernel[(rows,)](
            draft_probs.float().contiguous(), target_to_draft.long(), out, draft_vocab, target_vocab,
            BLOCK=_block(target_vocab), **_launch_options(draft_probs.device),
        )
    return out
