"""The draft's own KV space: one contiguous, position-indexed row per request.

Position ``p`` of a request lives at ``[row, p]``, so rolling back rejected drafts is a pointer
move (the entries are overwritten by the next pass) and nothing is ever copied. The engine's
paged cache is the target's; the draft is a separate model with its own layers, so it keeps its
own small cache here and reaches it through the ``attention(layer_idx, q, k, v)`` callable that
``specpath`` decoders accept.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specpath_engine.modeling.native import attention_kernels
from specpath_engine.modeling.rows import RowAllocator


class DraftKV:
    """K/V tensors ``[rows, max_len, kv_heads, head_dim]`` per layer; rows grow on demand."""

    def __init__(
        self,
        *,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        max_len: int,
        max_rows: int,
        dtype: torch.dtype,
        device: torch.device | str,
        initial_rows: int = 4,
        native: bool = True,
    ) -> None:
        """``dtype``: the KV's (the engine's ``kv_cache_dtype``); ``native`` False keeps every pass
        on torch's attention (``attention_backend`` ``torch``)."""
        self.native = native
        self.num_layers, self.num_kv_heads, self.head_dim = num_layers, num_kv_heads, head_dim
        self.max_len, self.max_rows = max_len, max_rows
        self.dtype, self.device = dtype, torch.device(device)
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.rows = RowAllocator(owner="draft KV")
        self._grow(min(initial_rows, max_rows))

    @property
    def capacity(self) -> int:
        return self.k[0].shape[0] if self.k else 0

    def _grow(self, rows: int) -> None:
        old = self.capacity
        shape = (rows - old, self.max_len, self.num_kv_heads, self.head_dim)
        new = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(2 * self.num_layers)]
        if old:
            self.k = [torch.cat([t, n]) for t, n in zip(self.k, new[: self.num_layers])]
            self.v = [torch.cat([t, n]) for t, n in zip(self.v, new[self.num_layers :])]
        else:
            self.k, self.v = new[: self.num_layers], new[self.num_layers :]
        self.rows.add_rows(rows - old)

    def row(self, req_id: str) -> int:
        """The request's row, allocated on first use."""
        if req_id not in self.rows and not self.rows.has_free_row:
            if self.capacity >= self.max_rows:
                raise RuntimeError(f"draft KV is full: more than {self.max_rows} live requests")
            self._grow(min(2 * self.capacity, self.max_rows))
        return self.rows.row(req_id)

    def release(self, req_id: str) -> None:
        self.rows.release(req_id)

    def attention(self, rows: list[int], starts: list[int], lengths: list[int]) -> RowAttention:
        """The attention callable of one forward: request ``i`` (KV row ``rows[i]``) contributes
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

    def __init__(self, kv: DraftKV, rows: list[int], starts: list[int], lengths: list[int]) -> None:
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
        if kv.native and self.one_row is not None and (native := attention_kernels(q, k, v, kv.k[layer])) is not None:
            return native.attention(q, k, v, kv.k[layer][self.one_row], kv.v[layer][self.one_row], self.num_keys)
        kv.k[layer][self.token_rows, self.positions] = k.to(kv.dtype)
        kv.v[layer][self.token_rows, self.positions] = v.to(kv.dtype)
        keys = kv.k[layer][self.batch_rows, : self.num_keys].transpose(1, 2)
        values = kv.v[layer][self.batch_rows, : self.num_keys].transpose(1, 2)
        if self.single:
            query = q[:, :, None, :]  # [B, H, 1, D]
        else:
            query = q.new_zeros(len(self.batch_rows), self.width, *q.shape[1:])
            query[self.batch_index, self.query_index] = q
            query = query.transpose(1, 2)
        out = F.scaled_dot_product_attention(
            query, keys.to(q.dtype), values.to(q.dtype), attn_mask=self.mask, enable_gqa=True
        )
        if self.single:
            return out[:, :, 0, :]
        return out.transpose(1, 2)[self.batch_index, self.query_index]
