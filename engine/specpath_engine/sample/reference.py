"""Plain-torch kernels: the reference for every Triton kernel and the CPU path.

Every function here has a Triton twin with the same name and signature in
``triton_kernels``. Inputs use the flattened layout: ``T`` draft positions of ``B`` requests,
request ``r`` owning positions ``cu[r]:cu[r+1]``. All work is vectorised across the batch (no
Python loop over requests); randomness arrives as tensors, so both paths decide identically.

Acceptance tests are written ``u * q < p`` (never a division) so the two paths round alike.
"""

from __future__ import annotations

import torch


def _segments(cu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(counts [B], request id of each position [T], index of each position in its request [T])."""
    counts = cu[1:] - cu[:-1]
    total = int(cu[-1])
    owner = torch.arange(counts.numel(), device=cu.device).repeat_interleave(counts, output_size=total)
    offset = torch.arange(total, device=cu.device) - cu[:-1][owner]
    return counts, owner, offset


def _leading_run(ok: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
    """int32 [B]: per request, how many positions from its first are all ``ok``."""
    counts, owner, _ = _segments(cu)
    failures = (~ok).long().cumsum(0)
    before = torch.cat([failures.new_zeros(1), failures])[cu[:-1]]
    alive = failures == before[owner]
    return torch.zeros(counts.numel(), dtype=torch.int32, device=cu.device).index_add_(
        0, owner, alive.to(torch.int32)
    )


def _gather(probs: torch.Tensor | None, ids: torch.Tensor) -> torch.Tensor | None:
    return None if probs is None else probs.gather(1, ids.long()[:, None]).squeeze(1)


def _native_accept(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy):
    """Per position: greedy rows match the argmax; random rows pass ``u * q(x) < p(x)``."""
    counts, owner, _ = _segments(cu)
    ok = draft_ids.long() == target_argmax.long()
    if target_probs is None:
        return ok
    p = _gather(target_probs, draft_ids)
    q = _gather(draft_probs, draft_ids) if draft_probs is not None else torch.ones_like(p)
    return torch.where(is_greedy[owner], ok, uniforms * q < p)


def accept_standard(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy):
    """Token-wise speculative sampling: int32 [B] drafts accepted per request.

    ``target_probs`` may be None when every row is greedy; ``draft_probs`` None means one-hot drafts.
    """
    return _leading_run(
        _native_accept(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy), cu
    )


def accept_synthetic(cu, conditional_rates, uniforms):
    """Accept position i of every request with probability ``conditional_rates[i]``."""
    _, _, offset = _segments(cu)
    return _leading_run(uniforms < conditional_rates[offset], cu)


def accept_fly(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy, high_entropy, window):
    """FLy: a natively rejected draft is deferred (kept) when the target is uncertain there
    (``high_entropy``), the draft is possible under both models, and the next ``window[r]``
    drafts, all inside the draft, are natively accepted. int32 [B] drafts kept per request."""
    counts, owner, offset = _segments(cu)
    native = _native_accept(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy)
    p = _gather(target_probs, draft_ids)
    q = _gather(draft_probs, draft_ids) if draft_probs is not None else torch.ones_like(p)
    w = window.long()[owner]
    fits = (w >= 1) & (offset + w <= counts[owner] - 1)
    run = torch.cat([native.new_zeros(1, dtype=torch.long), native.long().cumsum(0)])
    idx = torch.arange(native.numel(), device=cu.device)
    ahead = torch.where(fits, idx + 1 + w, idx + 1).clamp(max=native.numel())
    window_ok = run[ahead] - run[idx + 1] == w
    possible = (p > 0) & (is_greedy[owner] | (q > 0))
    return _leading_run(native | (high_entropy & fits & possible & window_ok), cu)


def accept_block(draft_ids, cu, target_argmax, target_probs, draft_probs, uniforms, is_greedy):
    """Block verification (Sun et al. 2024, Alg. 2). Returns (int32 [B] accepted drafts,
    float32 [B] weight ``w_tau`` that scales the target in the residual ``max(0, w p - q)``).

    Greedy rows accept their leading argmax matches. ``target_probs`` may be None only when
    every row is greedy.
    """
    counts, owner, offset = _segments(cu)
    batch = counts.numel()
    match = _leading_run(draft_ids.long() == target_argmax.long(), cu)
    if target_probs is None:
        return match, torch.ones(batch, device=cu.device)
    total = draft_ids.numel()
    if total == 0:
        return match, torch.ones(batch, device=cu.device)
    p = _gather(target_probs, draft_ids)
    q = _gather(draft_probs, draft_ids) if draft_probs is not None else torch.ones_like(p)
    # w_i = min(1, w_{i-1} p_i(X_i) / q_i(X_i)), one position of every request at a time.
    weight = torch.empty(total, device=cu.device)
    prev = torch.ones(batch, device=cu.device)
    for i in range(int(counts.max())):
        rows = (counts > i).nonzero().squeeze(1)
        t = cu[:-1][rows] + i
        num = prev[rows] * p[t]
        w = torch.where(num <= 0, torch.zeros_like(num), torch.where(num >= q[t], torch.ones_like(num), num / q[t]))
        weight[t] = w
        prev[rows] = w
    # h_i = Z_i / (Z_i + 1 - w_i), Z_i the mass of max(0, w_i p_{i+1} - q_{i+1}); h_K = w_K.
    last = offset == counts[owner] - 1
    nxt = (torch.arange(total, device=cu.device) + 1).clamp(max=total - 1)
    if draft_probs is None:
        z = weight * (1 - p[nxt])
    else:
        z = (weight[:, None] * target_probs[nxt] - draft_probs[nxt]).clamp_min(0).sum(-1)
    denom = z + (1 - weight)
    h = torch.where(denom > 0, z / torch.where(denom > 0, denom, torch.ones_like(denom)), torch.ones_like(z))
    h = torch.where(last, weight, h)
    # tau = the last position whose coin succeeds; later successes override earlier failures.
    hit = torch.where(uniforms < h, offset + 1, torch.zeros_like(offset))
    tau = torch.zeros(batch, dtype=torch.long, device=cu.device).scatter_reduce_(0, owner, hit, "amax")
    scale = torch.where(tau > 0, weight[(cu[:-1] + tau - 1).clamp(0, total - 1)], torch.ones(batch, device=cu.device))
    return (
        torch.where(is_greedy, match, tau.to(torch.int32)),
        torch.where(is_greedy, torch.ones_like(scale), scale),
    )


CDF_TILE = 1024
"""Tile width of the two-level CDF search in :func:`recover` (the Triton twin sums tiles of its
``BLOCK_V``; both use float64, so their running sums agree to ~1e-16)."""


def recover(target_probs, draft_probs, draft_ids, rows, scale, uniforms, subtract_draft):
    """Sample the token emitted at a rejected position: int64 [R].

    Row ``i`` samples ``max(0, scale[i] * p - q)`` at position ``rows[i]`` (q one-hot at the
    draft when ``draft_probs`` is None; q = 0 when not ``subtract_draft``) by inverting its
    float64 CDF at ``uniforms[i]``: the first token whose running mass exceeds ``u * total``.
    An all-zero residual falls back to p.
    """
    p = target_probs[rows]
    w = scale[:, None]
    scaled = p if not subtract_draft or bool((scale == 1).all()) else w * p
    if not subtract_draft:
        weights = p
    elif draft_probs is not None:
        weights = (scaled - draft_probs[rows]).clamp_min(0)
    else:  # q one-hot: only the draft's own entry changes
        x = draft_ids[rows].long()[:, None]
        weights = scaled.clamp_min(0).scatter_(1, x, (w * p.gather(1, x) - 1).clamp_min(0))
    token, total = _inverse_cdf(weights, uniforms)
    empty = total <= 0
    if bool(empty.any()):  # nothing left after subtracting the draft: sample p itself
        token[empty] = _inverse_cdf(p[empty], uniforms[empty])[0]
    return token


def _inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the number of tokens whose float64 running mass is <= ``u * total`` (so the
    first token whose running mass exceeds it), clamped to the vocabulary; and the total.
    Two levels: tile sums locate the tile, one tile's running sum locates the token."""
    rows, vocab = weights.shape
    width = min(CDF_TILE, vocab)
    tiles = -(-vocab // width)
    padded = torch.nn.functional.pad(weights, (0, tiles * width - vocab)).view(rows, tiles, width)
    tile_mass = padded.sum(-1, dtype=torch.float64)
    tile_cdf = tile_mass.cumsum(-1)
    target = uniforms.double() * tile_cdf[:, -1]
    tile = torch.searchsorted(tile_cdf, target[:, None], right=True).clamp(max=tiles - 1)
    before = torch.where(tile > 0, tile_cdf.gather(1, (tile - 1).clamp(min=0)), torch.zeros_like(target[:, None]))
    index = torch.arange(rows, device=weights.device)
    inner = before + padded[index, tile.squeeze(1)].cumsum(-1, dtype=torch.float64)
    within = torch.searchsorted(inner, target[:, None], right=True)
    return (tile * width + within).squeeze(1).clamp(max=vocab - 1), tile_cdf[:, -1]


def lift_probs(draft_probs, target_to_draft):
    """Draft-vocabulary probabilities -> target vocabulary (TLI): [T, target_vocab], zero outside
    the shared tokens and renormalised over them."""
    valid = target_to_draft >= 0
    lifted = draft_probs[:, target_to_draft.clamp(min=0)] * valid
    return lifted / lifted.sum(-1, keepdim=True)
