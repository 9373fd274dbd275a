"""Triton kernel of ``ngram_gpu``: one program per request, the same rule as the CPU paths.

Each program walks its request's history from the start in blocks of ``BLOCK`` end
positions. Within a block the match length of every occurrence is built with ``MAX_N``
vectorised comparisons against the request's last tokens; the block's best is its longest
match at its first position, and a later block only wins with a strictly longer match, so
ties keep the earliest occurrence. A program stops at its first full ``max_n`` match.
:func:`specpath_ngram.reference.propose_ngram_reference` is the torch reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _ngram_propose_kernel(
    tokens_ptr,
    token_row_stride,
    rows_ptr,
    lengths_ptr,
    ks_ptr,
    drafts_ptr,
    counts_ptr,
    min_n,
    MAX_N: tl.constexpr,
    K_MAX: tl.constexpr,
    K_BLOCK: tl.constexpr,
    BLOCK: tl.constexpr,
):
    request = tl.program_id(0)
    row = tl.load(rows_ptr + request).to(tl.int64)
    history = tokens_ptr + row * token_row_stride
    length = tl.load(lengths_ptr + request)
    last = length - 1

    best_n = tl.zeros([], dtype=tl.int32)
    best_follow = tl.zeros([], dtype=tl.int32)
    block_start = tl.zeros([], dtype=tl.int32)
    while (block_start < last) & (best_n < MAX_N):
        ends = block_start + tl.arange(0, BLOCK)
        alive = ends < last  # the occurrence must end before the last token
        matched = tl.zeros([BLOCK], dtype=tl.int32)
        for j in tl.static_range(MAX_N):
            alive = alive & (ends >= j)
            token = tl.load(history + ends - j, mask=alive, other=0)
            suffix_token = tl.load(history + tl.maximum(last - j, 0))
            alive = alive & (token == suffix_token)
            matched += alive.to(tl.int32)
        block_best = tl.max(matched, axis=0)
        block_first = tl.min(tl.where(matched == block_best, ends, 2147483647), axis=0)
        better = block_best > best_n
        best_follow = tl.where(better, block_first + 1, best_follow)
        best_n = tl.maximum(best_n, block_best)
        block_start += BLOCK

    count = tl.minimum(tl.load(ks_ptr + request), length - best_follow)
    count = tl.where(best_n >= min_n, tl.maximum(count, 0), 0)
    offsets = tl.arange(0, K_BLOCK)
    draft = tl.load(history + best_follow + offsets, mask=offsets < count, other=0)
    tl.store(drafts_ptr + request * K_MAX + offsets, draft, mask=offsets < K_MAX)
    tl.store(counts_ptr + request, count)


def propose_ngram_triton(
    tokens: torch.Tensor,
    rows: torch.Tensor,
    lengths: torch.Tensor,
    ks: torch.Tensor,
    min_n: int,
    max_n: int,
    k_max: int,
    block: int = 128,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as :func:`~specpath_ngram.reference.propose_ngram_reference`.

    ``tokens`` must be contiguous in its last dimension; ``rows``, ``lengths`` and ``ks``
    int32 on the same device.
    """
    batch = rows.shape[0]
    drafts = torch.zeros(batch, k_max, dtype=torch.int32, device=tokens.device)
    counts = torch.zeros(batch, dtype=torch.int32, device=tokens.device)
    if batch == 0:
        return drafts, counts
    _ngram_propose_kernel[(batch,)](
        tokens,
        tokens.stride(0),
        rows,
        lengths,
        ks,
        drafts,
        counts,
        min_n,
        MAX_N=max_n,
        K_MAX=k_max,
        K_BLOCK=triton.next_power_of_2(max(k_max, 1)),
        BLOCK=block,
    )
    return drafts, counts
