"""Torch references of the DFlash kernels (same signatures as :mod:`specpath_drafting.block.kernels`);
the CPU path, and the ground truth the Triton kernels are tested against."""

from __future__ import annotations

import torch

MASK_ID = -1
"""Block input id of a mask slot (the drafter embeds it with its learned mask embedding)."""


def build_block_queries_reference(anchor_ids: torch.Tensor, anchor_pos: torch.Tensor, rows: torch.Tensor,
                                  block_size: int, row_len: int, ctx_len: int):
    """The draft pass's inputs for R requests.

    ``anchor_ids``/``anchor_pos``/``rows`` [R]: each request's last sampled token, its position
    and its row in the context KV. Returns ``ids`` [R, B] (the anchor, then ``MASK_ID``),
    ``positions`` [R, B] (``anchor_pos + j``), ``ctx_slots`` [R, P] (its row's slots of
    positions ``0..P-1``) and ``ctx_visible`` [R, P] (position < anchor: committed context).
    """
    r = anchor_ids.shape[0]
    dev = anchor_ids.device
    j = torch.arange(block_size, device=dev)
    ids = torch.full((r, block_size), MASK_ID, dtype=torch.int64, device=dev)
    ids[:, 0] = anchor_ids.to(torch.int64)
    positions = anchor_pos.to(torch.int64)[:, None] + j[None, :]
    p = torch.arange(ctx_len, device=dev)
    ctx_slots = rows.to(torch.int64)[:, None] * row_len + p[None, :]
    ctx_visible = p[None, :] < anchor_pos.to(torch.int64)[:, None]
    return ids, positions, ctx_slots, ctx_visible
