"""Torch reference of the input-preparation kernel (:mod:`specpath_drafting.kernels`).

After a verify step each request has ``num_new`` newly committed positions ``start ..
start + num_new - 1`` (the verified input token plus the accepted drafts). The head reads
them *shifted*: at position p it consumes the token at p+1. This builds, for the flattened
batch of those positions, the head's input ids, positions and slots in its own KV, and the
index of each request's last row (whose output yields the first draft; -1 when it has no new
positions).
"""

from __future__ import annotations

import torch


def prepare_drafter_inputs_reference(
    token_table: torch.Tensor,
    rows: torch.Tensor,
    start: torch.Tensor,
    num_new: torch.Tensor,
    cu_num_new: torch.Tensor,
    num_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Args (one entry per request unless said):
        token_table: int32 ``[num_rows, row_len]``, each row a request's tokens by position.
        rows: int32, the request's row; start: int32, its first new position;
        num_new: int32, its new positions; cu_num_new: int32 ``[B + 1]``, exclusive prefix sum.
        num_tokens: ``cu_num_new[-1]`` as a host int.
    Returns ``input_ids`` int32 [T], ``positions`` int64 [T], ``slot_mapping`` int64 [T],
    ``last_index`` int64 [B]."""
    device = token_table.device
    b = rows.shape[0]
    req = torch.repeat_interleave(torch.arange(b, device=device), num_new.long(), output_size=num_tokens)
    offset = torch.arange(num_tokens, device=device) - cu_num_new[:-1].long()[req]
    positions = start.long()[req] + offset
    row = rows.long()[req]
    input_ids = token_table[row, positions + 1]
    slot_mapping = row * token_table.shape[1] + positions
    last_index = torch.where(num_new > 0, cu_num_new[1:].long() - 1, torch.full_like(cu_num_new[1:].long(), -1))
    return input_ids.to(torch.int32), positions, slot_mapping, last_index
