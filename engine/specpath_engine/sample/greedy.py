"""Greedy chains verified on the host: what every lossless mode does when the target is greedy.

With temperature 0 the target's distribution is one-hot at its argmax, so standard and block
verification both keep drafts while they equal the argmax and then emit the argmax (the bonus
token after a fully accepted chain). For one request and a handful of drafts that is a list
walk over one ``argmax(-1).tolist()``: no per-call tensor set-up, which at batch 1 on a CPU
costs more than the verification itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

GREEDY_PREFIX_METHODS = frozenset({"standard", "block"})
"""Modes whose greedy verification is exactly :func:`accept_greedy_chains` (without TLI's
``vocab_mapping``: its drafts are in another vocabulary)."""


def accept_greedy_chains(drafts: Sequence[Sequence[int]], argmax: Sequence[int]) -> list[list[int]]:
    """Emitted tokens per request: ``argmax`` holds the target's argmax at each request's
    ``len(drafts[i]) + 1`` positions in batch order (the drafts' positions, then the bonus's)."""
    emitted: list[list[int]] = []
    start = 0
    for chain in drafts:
        row = argmax[start : start + len(chain) + 1]
        n = 0
        while n < len(chain) and chain[n] == row[n]:
            n += 1
        emitted.append([*chain[:n], row[n]])
        start += len(chain) + 1
    return emitted


ARGMAX_BLOCK = 1024
"""Ids per block of :func:`greedy_ids`' first pass."""


def greedy_ids(logits: torch.Tensor) -> torch.Tensor:
    """``logits.argmax(-1)`` (int64): the index of each row's first maximum (ties: the first;
    NaN: the first NaN), found in two passes because torch's CPU reductions that return an index
    do not vectorise while ``amax`` does: each block's maximum over the whole row, then the
    index within the first block that holds the row's maximum (which holds its first
    occurrence). torch 2.13, one thread, float32 rows of 49,152 ids, 8 / 16 rows: 0.7 / 1.8 ms
    for ``argmax``, 1.0 / 1.6 ms for ``max``'s indices, ~0.1 ms here. Every greedy step reads one."""
    vocab = logits.shape[-1]
    if vocab < 4 * ARGMAX_BLOCK:
        return logits.max(dim=-1).indices
    if logits.dim() != 2:
        return greedy_ids(logits.reshape(-1, vocab)).reshape(logits.shape[:-1])
    rows = logits.shape[0]
    blocks = vocab // ARGMAX_BLOCK
    whole = blocks * ARGMAX_BLOCK
    peaks = logits[:, :whole].reshape(rows, blocks, ARGMAX_BLOCK).amax(dim=-1)  # [rows, blocks]
    if whole < vocab:
        peaks = torch.cat([peaks, logits[:, whole:].amax(dim=-1, keepdim=True)], dim=1)
    start = peaks.max(dim=-1).indices * ARGMAX_BLOCK  # [rows]: the first block with the maximum
    # a short last block repeats its last id, which can only win where it is the first occurrence
    ids = (start[:, None] + torch.arange(ARGMAX_BLOCK, device=logits.device)).clamp_max_(vocab - 1)
    return start + logits.gather(1, ids).max(dim=-1).indices
