"""The drafter's own KV: per decoder layer, one row of position-indexed keys/values per live
request. Every built-in drafter keeps its cache here (heads: one layer, MTP: one per module, a
draft model and a block drafter: one per layer), so rows, slots and rollback mean one thing.

``keys``/``values`` are ``[layers, rows * row_len, kv_heads, head_dim]`` and position ``p`` of
the request in row ``r`` lives at slot ``r * row_len + p``. Positions up to the last committed
one hold KV computed from real tokens; positions after it hold the current step's drafts (or a
block's scratch) and are simply overwritten by the next step: rollback is a pointer move and
nothing is ever copied. The engine's paged cache is the target's; a drafter is a separate model
with its own layers, so it keeps its own small cache.

Rows are allocated per request (:class:`RowAllocator`); a cache built with ``initial_rows``
starts smaller and doubles on demand up to ``num_rows`` (a draft model's many layers).

Three views attend over it, each the computation its drafter always ran (the torch paths differ
in their numerics, so each keeps its own): :meth:`DrafterKV.attention` and
:meth:`DrafterKV.tree_attention` (a head's chain step, ingest and tree nodes: grouped matmuls),
:meth:`DrafterKV.row_attention` / :meth:`DrafterKV.decode_attention` (a whole draft model's
``attention(layer, q, k, v)``: SDPA); a block drafter reads and writes slots directly
(:meth:`DrafterKV.write`, :meth:`DrafterKV.gather`, :meth:`DrafterKV.row_span`). On bf16 CPU
each takes the native attention where one request's newest positions are the queries.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from specpath_engine.modeling.native import attention_kernels as native_attention
from specpath_engine.modeling.rows import RowAllocator


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
    """See the module docstring. ``dtype`` is the engine's ``kv_cache_dtype`` (else the drafter's);
    ``native`` False keeps every pass on torch's attention (``attention_backend`` ``torch``)."""

    def __init__(self, *, num_rows: int, row_len: int, num_kv_heads: int, head_dim: int, num_layers: int = 1,
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                 initial_rows: int | None = None, owner: str = "drafter KV", native: bool = True) -> None:
        self.native = native
        self.num_layers, self.row_len, self.max_rows = num_layers, row_len, num_rows
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        self.dtype, self.device = dtype, torch.device(device)
        start = num_rows if initial_rows is None else max(1, min(initial_rows, num_rows))
        shape = (num_layers, start * row_len, num_kv_heads, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=self.device)  # [L, rows * row_len, KV, D]
        self.values = torch.zeros_like(self.keys)  # [L, rows * row_len, KV, D]
        self.rows = RowAllocator(start, owner=owner)
        """Which row each live request owns (the drafter's other per-row buffers share it)."""
        self._span = torch.arange(row_len, device=self.device)

    # -- rows -----------------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        """Rows allocated now (``max_rows`` once grown)."""
        return self.rows.num_rows

    def row(self, req_id: str) -> int:
        """The request's row, taken on first use (growing the cache while below ``max_rows``)."""
        if req_id not in self.rows and not self.rows.has_free_row and self.num_rows < self.max_rows:
            self._grow(min(2 * self.num_rows, self.max_rows))
        return self.rows.row(req_id)

    def release(self, req_id: str) -> None:
        self.rows.release(req_id)

    def _grow(self, rows: int) -> None:
        extra = (self.num_layers, (rows - self.num_rows) * self.row_len, self.num_kv_heads, self.head_dim)
        self.keys = torch.cat([self.keys, torch.zeros(extra, dtype=self.dtype, device=self.device)], dim=1)
        self.values = torch.cat([self.values, torch.zeros(extra, dtype=self.dtype, device=self.device)], dim=1)
        self.rows.add_rows(rows - self.num_rows)

    # -- direct slot access (block drafters) ------------------------------------------------
    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Keys/values ``[N, KV, D]`` of layer ``layer`` at ``slots`` [N], stored in the KV's dtype."""
        self.keys[layer].index_copy_(0, slots, k.to(self.dtype))
        self.values[layer].index_copy_(0, slots, v.to(self.dtype))

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s keys and values at ``slots`` (any shape ``S``): ``[*S, KV, D]`` each."""
        return self.keys[layer][slots], self.values[layer][slots]

    def row_span(self, layer: int, row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of one row's keys and values in layer ``layer``: ``[row_len, KV, D]`` each."""
        start = row * self.row_len
        return self.keys[layer][start : start + self.row_len], self.values[layer][start : start + self.row_len]

    def layer_rows(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views of layer ``layer``'s keys and values by row: ``[rows, row_len, KV, D]`` each."""
        shape = (-1, self.row_len, self.num_kv_heads, self.head_dim)
        return self.keys[layer].view(shape), self.values[layer].view(shape)

    # -- heads: chain steps, ingest, tree nodes ------------------------------------------------
    def attention(self, slots: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor, max_position: int,
                  layer: int = 0):
        """An ``attend(q, k, v)`` that writes k/v at ``slots`` and lets each query (its request's
        ``rows`` entry, at ``positions``) attend to its row's keys at positions <= its own.
        ``max_position`` (a host int) bounds the gathered span."""

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            cache_k, cache_v = self.keys[layer], self.values[layer]  # [rows * row_len, KV, D]
            if self.native and (native := native_attention(q, k, v, cache_k)) is not None and (
                    row := newest_of_one_row(rows, positions, max_position)) is not None:
                # one request's newest positions (a chain step, or its ingest): one native call
                keys, values = self.row_span(layer, row)
                return native.attention(q, k, v, keys, values, max_position + 1)
            cache_k.index_copy_(0, slots, k.to(cache_k.dtype))
            cache_v.index_copy_(0, slots, v.to(cache_v.dtype))
            span = self._span[: max_position + 1]
            index = rows[:, None] * self.row_len + span[None, :]  # [T, P]
            keys = cache_k[index].permute(0, 2, 3, 1)  # [T, KV, D, P]
            values = cache_v[index].transpose(1, 2)  # [T, KV, P, D]
            return _grouped_attention(q, keys, values, span[None, :] > positions[:, None])

        return attend

    def tree_attention(self, row: int, length: int, mask: torch.Tensor, layer: int = 0):
        """An ``attend(q, k, v)`` for the Q nodes of a draft tree's pass: their k/v go to the last
        Q of ``length`` positions of ``row`` (scratch past the committed ones, which the next
        ingest overwrites) and each query sees the keys its row of ``mask [Q, length]`` admits
        (the committed positions, its ancestors' slots and its own)."""
        keys, values = self.row_span(layer, row)  # [row_len, KV, D]

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if self.native and (native := native_attention(q, k, v, self.keys[layer])) is not None:
                return native.attention(q, k, v, keys, values, length, mask)
            t = q.shape[0]
            keys[length - t : length] = k
            values[length - t : length] = v
            return _grouped_attention(q, keys[:length].permute(1, 2, 0)[None], values[:length].transpose(0, 1)[None],
                                      ~mask)

        return attend

    # -- a whole draft model: attention(layer, q, k, v) ---------------------------------------
    def row_attention(self, rows: list[int], starts: list[int], lengths: list[int]) -> RowAttention:
        """The attention callable of one forward: request ``i`` (row ``rows[i]``) contributes
        ``lengths[i]`` query tokens at positions ``starts[i]..``, requests concatenated in order."""
        return RowAttention(self, rows, starts, lengths)

    def decode_attention(self, rows: torch.Tensor, positions: torch.Tensor, num_keys: int) -> RowAttention:
        """The single-token case (one query per request) from tensors already on the device, so
        the autoregressive draft passes build nothing on the host."""
        attention = RowAttention.__new__(RowAttention)
        attention.kv, attention.single, attention.num_keys = self, True, num_keys
        newest = rows.shape[0] == 1 and rows.device.type == "cpu" and int(positions[0]) == num_keys - 1
        attention.one_row = int(rows[0]) if newest else None
        attention.token_rows = attention.batch_rows = rows
        attention.positions = positions
        keys = torch.arange(num_keys, device=self.device)
        attention.mask = (keys[None, :] <= positions[:, None])[:, None, None, :]
        return attention


class RowAttention:
    """Writes the pass's K/V at (row, position) and attends causally over each row's prefix."""

    def __init__(self, kv: DrafterKV, rows: list[int], starts: list[int], lengths: list[int]) -> None:
        device = kv.device
        self.kv = kv
        num = len(rows)
        self.single = all(n == 1 for n in lengths)
        self.one_row = rows[0] if num == 1 else None
        """The row when the pass is one request's newest positions (the native attention's case)."""
        token_rows = [r for r, n in zip(rows, lengths) for _ in range(n)]
        positions = [s + j for s, n in zip(starts, lengths) for j in range(n)]
        self.num_keys = max(s + n for s, n in zip(starts, lengths))
        self.token_rows = torch.tensor(token_rows, dtype=torch.long, device=device)
        self.positions = torch.tensor(positions, dtype=torch.long, device=device)
        self.batch_rows = torch.tensor(rows, dtype=torch.long, device=device)
        keys = torch.arange(self.num_keys, device=device)
        if self.single:
            self.mask = (keys[None, :] <= self.positions[:, None])[:, None, None, :]
        else:
            width = max(lengths)
            self.width = width
            self.batch_index = torch.tensor([i for i, n in enumerate(lengths) for _ in range(n)], device=device)
            self.query_index = torch.tensor([j for n in lengths for j in range(n)], device=device)
            query_pos = torch.zeros(num, width, dtype=torch.long, device=device)
            query_pos[self.batch_index, self.query_index] = self.positions
            self.mask = (keys[None, None, :] <= query_pos[:, :, None])[:, None]

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        kv = self.kv
        cache_k, cache_v = kv.layer_rows(layer)  # [rows, row_len, KV, D]
        if kv.native and self.one_row is not None and (native := native_attention(q, k, v, cache_k)) is not None:
            return native.attention(q, k, v, cache_k[self.one_row], cache_v[self.one_row], self.num_keys)
        cache_k[self.token_rows, self.positions] = k.to(kv.dtype)
        cache_v[self.token_rows, self.positions] = v.to(kv.dtype)
        keys = cache_k[self.batch_rows, : self.num_keys].transpose(1, 2)  # [B, KV, P, D]
        values = cache_v[self.batch_rows, : self.num_keys].transpose(1, 2)  # [B, KV, P, D]
        if self.single:
            query = q[:, :, None, :]  # [B, H, 1, D]
        else:
            query = q.new_zeros(len(self.batch_rows), self.width, *q.shape[1:])
            query[self.batch_index, self.query_index] = q
            query = query.transpose(1, 2)  # [B, H, W, D]
        out = F.scaled_dot_product_attention(
            query, keys.to(q.dtype), values.to(q.dtype), attn_mask=self.mask, enable_gqa=True
        )
        if self.single:
            return out[:, :, 0, :]
        return out.transpose(1, 2)[self.batch_index, self.query_index]


def _grouped_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """The heads' torch path: ``q [T, H, D]`` over ``keys [T or 1, KV, D, P]`` and ``values [T or 1, KV,
    P, D]``, query heads grouped by their KV head, each query blind to the keys ``hidden [T, P]``
    marks; ``[T, H, D]``. A KV in another dtype than ``q`` is read in ``q``'s."""
    t, heads, d = q.shape
    keys, values = keys.to(q.dtype), values.to(q.dtype)
    grouped = q.view(t, keys.shape[1], heads // keys.shape[1], d)
    scores = torch.matmul(grouped, keys) * (1.0 / math.sqrt(d))  # [T, KV, G, P]
    scores = scores.masked_fill(hidden[:, None, None, :], float("-inf"))
    return torch.matmul(scores.softmax(dim=-1), values).reshape(t, heads, d)
