"""Triton twin of :func:`specpath_drafting.reference.prepare_drafter_inputs_reference` (same
signature and outputs). One program per request copies its shifted tokens and writes its
positions and slots; the engine's CUDA path calls it, CPU runs the reference (tests compare
both under ``TRITON_INTERPRET=1``)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _prepare_kernel(
    table_ptr, table_stride, rows_ptr, start_ptr, num_new_ptr, cu_ptr,
    ids_ptr, pos_ptr, slot_ptr, last_ptr, BLOCK: tl.constexpr,
):
    b = tl.program_id(0)
    row = tl.load(rows_ptr + b).to(tl.int64)
    start = tl.load(start_ptr + b).to(tl.int64)
    n = tl.load(num_new_ptr + b)
    out = tl.load(cu_ptr + b).to(tl.int64)
    for first in range(0, n, BLOCK):
        offs = first + tl.arange(0, BLOCK)
        mask = offs < n
        pos = start + offs
        token = tl.load(table_ptr + row * table_stride + pos + 1, mask=mask, other=0)
        tl.store(ids_ptr + out + offs, token, mask=mask)
        tl.store(pos_ptr + out + offs, pos, mask=mask)
        tl.store(slot_ptr + out + offs, row * table_stride + pos, mask=mask)
    last = tl.where(n > 0, out + n - 1, -1)
    tl.store(last_ptr + b, last)


def prepare_drafter_inputs(
    token_table: torch.Tensor,
    rows: torch.Tensor,
    start: torch.Tensor,
    num_new: torch.Tensor,
    cu_num_new: torch.Tensor,
    num_tokens: int,
    block: int = 64,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    device = token_table.device
    b = rows.shape[0]
    input_ids = torch.empty(num_tokens, dtype=torch.int32, device=device)
    positions = torch.empty(num_tokens, dtype=torch.int64, device=device)
    slot_mapping = torch.empty(num_tokens, dtype=torch.int64, device=device)
    last_index = torch.empty(b, dtype=torch.int64, device=device)
    if b:
        _prepare_kernel[(b,)](
            token_table, token_table.stride(0), rows, start, num_new, cu_num_new,
            input_ids, positions, slot_mapping, last_index, BLOCK=block,
        )
    return input_ids, positions, slot_mapping, last_index
