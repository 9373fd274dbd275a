"""Triton kernel of the DFlash draft pass's inputs: the block queries (anchor + mask slots and
their positions) and each request's context gather slots and visibility, one program per
request. Same signature and results as :func:`specpath_drafting.block.reference.build_block_queries_reference`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specpath_drafting.block.reference import MASK_ID


@triton.jit
def _block_queries_kernel(anchor_ids_ptr, anchor_pos_ptr, rows_ptr, ids_ptr, pos_ptr, slots_ptr, visible_ptr,
                          block_size, row_len, ctx_len, mask_id,
                          BLOCK_B: tl.constexpr, BLOCK_P: tl.constexpr):
    r = tl.program_id(0)
    anchor = tl.load(anchor_ids_ptr + r).to(tl.int64)
    start = tl.load(anchor_pos_ptr + r).to(tl.int64)
    row = tl.load(rows_ptr + r).to(tl.int64)
    j = tl.arange(0, BLOCK_B)
    in_block = j < block_size
    ids = tl.where(j == 0, anchor, tl.zeros([BLOCK_B], dtype=tl.int64) + mask_id)
    tl.store(ids_ptr + r * block_size + j, ids, mask=in_block)
    tl.store(pos_ptr + r * block_size + j, start + j, mask=in_block)
    for p0 in range(0, ctx_len, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        inside = p < ctx_len
        tl.store(slots_ptr + r * ctx_len + p, row * row_len + p, mask=inside)
        tl.store(visible_ptr + r * ctx_len + p, (p < start).to(tl.int8), mask=inside)


def build_block_queries(anchor_ids: torch.Tensor, anchor_pos: torch.Tensor, rows: torch.Tensor,
                        block_size: int, row_len: int, ctx_len: int):
    r = anchor_ids.shape[0]
    dev = anchor_ids.device
    ids = torch.empty(r, block_size, dtype=torch.int64, device=dev)
    positions = torch.empty(r, block_size, dtype=torch.int64, device=dev)
    slots = torch.empty(r, ctx_len, dtype=torch.int64, device=dev)
    visible = torch.empty(r, ctx_len, dtype=torch.int8, device=dev)
    if r:
        _block_queries_kernel[(r,)](
            anchor_ids.contiguous(), anchor_pos.contiguous(), rows.contiguous(), ids, positions, slots, visible,
            block_size, row_len, ctx_len, MASK_ID,
            BLOCK_B=triton.next_power_of_2(max(block_size, 1)), BLOCK_P=64)
    return ids, positions, slots, visible.bool()
