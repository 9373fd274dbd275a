"""The drafter's own KV: one row of position-indexed keys/values per live request.

A head has one decoder layer, so its cache is small: ``[rows * row_len, kv_heads, head_dim]``
for keys and for values, slot = ``row * row_len + position``. Positions up to the last
committed one hold KV computed from real target features; positions after it hold the
current chain's drafts and are simply overwritten by the next step (rollback is a pointer
move: the next call's new positions start right after what the target committed).
"""

from __future__ import annotations

import math

import torch

from specpath_engine.modeling.native import attention_kernels as native_attention


def newest_of_one_row(rows: torch.Tensor, positions: torch.Tensor, max_position: int) -> int | None:
    """The row when the queries are one request's consecutive positions ending at
    ``max_position`` (what the native attention takes: causal over the row's prefix), else None.
    Reads the (CPU) tensors on the host."""
    t = positions.shape[0]
    if t == 0 or int(positions[-1]) != max_position:
        return None
    row = int(rows[0])
    if t > 1 and not (bool((rows == row).all()) and bool((positions.diff() == 1).all())):
        return None
    return row


class DrafterKV:
    """``keys``/``values`` ``[rows * row_len, kv_heads, head_dim]`` in ``dtype`` (the engine's
    ``kv_cache_dtype``); ``native`` False keeps every pass on torch's attention
    (``attention_backend`` ``torch``)."""

    def __init__(self, *, num_rows: int, row_len: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", native: bool = True) -> None:
        self.num_rows = num_rows
        self.native = native
        self.row_len = row_len
        self.keys = torch.zeros(num_rows * row_len, num_kv_heads, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)
        self._span = torch.arange(row_len, device=device)

    def attention(self, slots: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor, max_position: int):
        """An ``attend(q, k, v)`` that writes k/v at ``slots`` and lets each query (its request's
        ``rows`` entry, at ``positions``) attend to its row's keys at positions <= its own.
        ``max_position`` (a host int) bounds the gathered span."""

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if self.native and (native := native_attention(q, k, v, self.keys)) is not None and (
                    row := newest_of_one_row(rows, positions, max_position)) is not None:
                # one request's newest positions (a chain step, or its ingest): one native call
                start = row * self.row_len
                return native.attention(q, k, v, self.keys[start : start + self.row_len],
                                        self.values[start : start + self.row_len], max_position + 1)
            self.keys.index_copy_(0, slots, k.to(self.keys.dtype))
            self.values.index_copy_(0, slots, v.to(self.values.dtype))
            span = self._span[: max_position + 1]
            index = rows[:, None] * self.row_len + span[None, :]  # [T, P]
            keys = self.keys[index].permute(0, 2, 3, 1)  # [T, KV, D, P]
            values = self.values[index].transpose(1, 2)  # [T, KV, P, D]
            return _grouped_attention(q, keys, values, span[None, :] > positions[:, None])

        return attend

    def tree_attention(self, row: int, length: int, mask: torch.Tensor):
        """An ``attend(q, k, v)`` for the Q nodes of a draft tree's pass: their k/v go to the last
        Q of ``length`` positions of ``row`` (scratch past the committed ones, which the next
        ingest overwrites) and each query sees the keys its row of ``mask [Q, length]`` admits
        (the committed positions, its ancestors' slots and its own)."""
        start = row * self.row_len
        keys, values = self.keys[start : start + self.row_len], self.values[start : start + self.row_len]

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if self.native and (native := native_attention(q, k, v, self.keys)) is not None:
                return native.attention(q, k, v, keys, values, length, mask)
            t = q.shape[0]
            keys[length - t : length] = k
            values[length - t : length] = v
            return _grouped_attention(q, keys[:length].permute(1, 2, 0)[None], values[:length].transpose(0, 1)[None],
                                      ~mask)

        return attend


def _grouped_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """The torch path: ``q [T, H, D]`` over ``keys [T or 1, KV, D, P]`` and ``values [T or 1, KV,
    P, D]``, query heads grouped by their KV head, each query blind to the keys ``hidden [T, P]``
    marks; ``[T, H, D]``. A KV in another dtype than ``q`` is read in ``q``'s."""
    t, heads, d = q.shape
    keys, values = keys.to(q.dtype), values.to(q.dtype)
    grouped = q.view(t, keys.shape[1], heads // keys.shape[1], d)
    scores = torch.matmul(grouped, keys) * (1.0 / math.sqrt(d))  # [T, KV, G, P]
    scores = scores.masked_fill(hidden[:, None, None, :], float("-inf"))
    return torch.matmul(scores.softmax(dim=-1), values).reshape(t, heads, d)
