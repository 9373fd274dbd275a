"""Paged attention for one flattened step, as the callable the model's layers call.

The model hands every layer's post-RoPE q/k/v of all tokens of the step (all requests flattened).
:class:`PagedAttention` writes k/v at each token's slot, gathers each request's history through its
block table and lets each query attend to the keys at positions up to its own. A request with
several query tokens (its last token plus drafts) is verified in the same pass as a prefill chunk
of another request.

Everything that depends only on the batch layout (slots, gather indices, the mask) is built once
per step in :func:`build_attention_metadata`; per layer there are a handful of tensor ops. On a
contiguous bf16 CPU cache a layer's attention is one native call instead, for one request or for
the whole batch (each request's rows over its own slots, with the bits they get alone); the torch
path is the reference and the fallback.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from typing import Any

import attrs
import torch
import torch.nn.functional as F

from specpath_engine.kv_cache import KVCache
from specpath_engine.model import RequestKV
from specpath_engine.modeling.native import attention_kernels


@attrs.frozen(kw_only=True)
class AttentionMetadata:
    """The step's layout, shared by every layer."""

    slot_mapping: torch.Tensor
    """int64 ``[T]``: where each token's k/v is written."""
    gather_slots: torch.Tensor | None
    """int64 ``[B * L]``: slots of positions ``0..L-1`` of each request (padding repeats a valid slot);
    None when a single request's history is one run of consecutive slots (read as a view)."""
    first_slot: int = 0
    """With ``gather_slots`` None: the slot of position 0."""
    num_reqs: int
    max_context_len: int
    """``L``: the longest context (history + this step's tokens) in the batch."""
    max_query_len: int
    """``Q``: the most query tokens of one request in this step."""
    pad_index: torch.Tensor | None
    """int64 ``[B * Q]``: row of ``q`` for each padded query slot; None when every request has ``Q``."""
    unpad_index: torch.Tensor | None
    """int64 ``[T]``: padded slot of each token; None when no padding."""
    mask: torch.Tensor | None
    """bool ``[B, 1, G * Q, L]`` (already repeated for the query-head groups); None when every query
    may see every gathered key (single-token queries over equal-length contexts)."""
    causal: bool = False
    """Each query sees exactly the keys at positions up to its own (the mask built here, or none).
    A tree's mask is not: the native attention then reads it row by row."""
    query_starts: torch.Tensor | None = None
    """int64 ``[B + 1]`` on the CPU: request ``b``'s tokens are rows ``query_starts[b] ..
    query_starts[b+1]`` of the flattened step (for the batched native attention)."""
    context_lens: torch.Tensor | None = None
    """int64 ``[B]`` on the CPU: each request's context (history + this step's tokens)."""


def build_attention_metadata(
    *,
    block_tables: Sequence[Sequence[int]],
    num_computed: Sequence[int],
    num_query_tokens: Sequence[int],
    block_size: int,
    num_query_groups: int,
    device: str | torch.device = "cpu",
) -> tuple[AttentionMetadata, torch.Tensor]:
    """Layout of a step where request ``b`` computes positions ``num_computed[b]`` onwards.

    Returns the metadata and the int64 ``positions`` ``[T]`` of the flattened tokens. Built with
    a handful of tensor ops whatever the batch (a decode step is dominated by per-op overhead).
    """
    num_reqs = len(num_query_tokens)
    max_q = max(num_query_tokens)
    ctx = [c + n for c, n in zip(num_computed, num_query_tokens)]
    max_l = max(ctx)
    max_blocks = -(-max_l // block_size)
    table = torch.tensor(
        [list(blocks[:max_blocks]) + [0] * (max_blocks - len(blocks)) for blocks in block_tables], dtype=torch.int64
    )
    slots_by_pos = (table.unsqueeze(-1) * block_size + _arange(block_size)).view(num_reqs, -1)[:, :max_l]  # [B, L]

    # Padded query grid [B, Q]: position of each (request, query) pair; padding repeats the last.
    uniform = all(n == max_q for n in num_query_tokens)
    qpos_rows = [[c + min(i, n - 1) for i in range(max_q)] for c, n in zip(num_computed, num_query_tokens)]
    qpos = torch.tensor(qpos_rows, dtype=torch.int64)
    slot_grid = slots_by_pos.gather(1, qpos)
    if uniform:
        positions, slot_mapping = qpos.view(-1), slot_grid.view(-1)
        pad_index = unpad_index = None
    else:
        keep, pad, row = [], [], 0
        for b, n in enumerate(num_query_tokens):
            keep.extend(range(b * max_q, b * max_q + n))
            pad.extend(row + min(i, n - 1) for i in range(max_q))
            row += n
        unpad_index = torch.tensor(keep, dtype=torch.int64)
        pad_index = torch.tensor(pad, dtype=torch.int64)
        positions = qpos.view(-1).index_select(0, unpad_index)
        slot_mapping = slot_grid.view(-1).index_select(0, unpad_index)

    if max_q == 1 and all(c == max_l for c in ctx):
        mask = None
    else:
        # Rows of the grouped query layout are (group, query): repeat the query positions per group.
        grouped = qpos.repeat(1, num_query_groups) if num_query_groups > 1 else qpos
        mask = (_arange(max_l) <= grouped.unsqueeze(-1)).unsqueeze(1).to(device)  # [B, 1, G*Q, L]

    first_slot, gather = 0, slots_by_pos.reshape(-1).to(device)
    if num_reqs == 1:
        blocks = block_tables[0][:max_blocks]
        if blocks[-1] - blocks[0] == len(blocks) - 1 and all(b == blocks[0] + i for i, b in enumerate(blocks)):
            first_slot, gather = blocks[0] * block_size, None  # one run of slots: no gather needed
    meta = AttentionMetadata(
        slot_mapping=slot_mapping.to(device),
        gather_slots=gather,
        first_slot=first_slot,
        num_reqs=num_reqs,
        max_context_len=max_l,
        max_query_len=max_q,
        pad_index=None if pad_index is None else pad_index.to(device),
        unpad_index=None if unpad_index is None else unpad_index.to(device),
        mask=mask,
        causal=True,
        query_starts=torch.tensor([0, *itertools.accumulate(num_query_tokens)], dtype=torch.int64),
        context_lens=torch.tensor(ctx, dtype=torch.int64),
    )
    return meta, positions.to(device)


_ARANGE = torch.arange(4096, dtype=torch.int64)


def _arange(n: int) -> torch.Tensor:
    """``arange(n)`` as a view of one cached tensor (grown when needed)."""
    global _ARANGE
    if n > _ARANGE.numel():
        _ARANGE = torch.arange(2 * n, dtype=torch.int64)
    return _ARANGE[:n]


class PagedAttention:
    """``attention(layer, q [T,H,D], k [T,KVH,D], v [T,KVH,D]) -> [T,H,D]`` over the paged cache."""

    def __init__(self, cache: KVCache, meta: AttentionMetadata) -> None:
        self.cache = cache
        self.meta = meta

    def one_request(self) -> RequestKV | None:
        """The step's KV when it is one request's in a contiguous bf16 cache whose head width
        suits the native attention, for the model's native decoder stack; ``None`` otherwise."""
        m, data = self.meta, self.cache.data
        if m.num_reqs != 1 or data.dtype is not torch.bfloat16:
            return None
        if data.shape[-1] % 32 or not data.is_contiguous() or data.device.type != "cpu":
            return None
        mask = None if m.causal else m.mask[0, 0, : m.slot_mapping.shape[0]].contiguous()
        return RequestKV(data, m.first_slot, m.gather_slots, m.max_context_len, mask)

    def _native_batch(self, native: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_cache: torch.Tensor,
                      value_cache: torch.Tensor) -> torch.Tensor | None:
        """Several requests' attention in one native call (each over its own slots), where the
        cache is one contiguous bf16 CPU array; ``None`` where it is not (the torch path then)."""
        m, data = self.meta, self.cache.data
        if m.gather_slots is None or m.query_starts is None or m.context_lens is None or not data.is_contiguous():
            return None
        slots = m.gather_slots.view(m.num_reqs, m.max_context_len)  # [B, L]
        mask = None if m.causal else m.mask[:, 0]  # [B, G*Q, L]: a request's query i is row i
        if mask is not None and mask.stride(-1) != 1:
            return None
        return native.attention_batch(q, k, v, key_cache, value_cache, m.query_starts, m.context_lens, slots, mask)

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        m = self.meta
        key_cache = self.cache.keys(layer)
        value_cache = self.cache.values(layer)
        if m.num_reqs > 1 and (native := attention_kernels(q, k, v, key_cache)):
            out = self._native_batch(native, q, k, v, key_cache, value_cache)
            if out is not None:
                return out
        if m.num_reqs == 1 and (native := attention_kernels(q, k, v, key_cache)):
            # a tree's mask as one row per query (the rows repeat for each query-head group)
            mask = None if m.causal else m.mask[0, 0, : q.shape[0]].contiguous()
            if m.gather_slots is not None:  # scattered blocks: the kernel reads them through the slots
                return native.attention(q, k, v, key_cache, value_cache, m.max_context_len, mask, m.gather_slots)
            end = m.first_slot + m.max_context_len
            return native.attention(q, k, v, key_cache[m.first_slot : end], value_cache[m.first_slot : end],
                                    m.max_context_len, mask)
        key_cache.index_copy_(0, m.slot_mapping, k)
        value_cache.index_copy_(0, m.slot_mapping, v)

        num_heads, head_dim = q.shape[1], q.shape[2]
        num_kv_heads = k.shape[1]
        b, qlen, length = m.num_reqs, m.max_query_len, m.max_context_len
        if m.gather_slots is None:
            keys = key_cache[m.first_slot : m.first_slot + length]
            values = value_cache[m.first_slot : m.first_slot + length]
        else:
            keys = key_cache.index_select(0, m.gather_slots)
            values = value_cache.index_select(0, m.gather_slots)
        keys = keys.view(b, length, num_kv_heads, head_dim).transpose(1, 2)
        values = values.view(b, length, num_kv_heads, head_dim).transpose(1, 2)
        if m.pad_index is not None:
            q = q.index_select(0, m.pad_index)
        # Heads sharing a KV head become extra query rows: [B, KVH, G*Q, D], no KV repeat needed.
        q = q.view(b, qlen, num_heads, head_dim).transpose(1, 2).reshape(b, num_kv_heads, -1, head_dim)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=m.mask)
        out = out.view(b, num_heads, qlen, head_dim).transpose(1, 2).reshape(b * qlen, num_heads, head_dim)
        if m.unpad_index is not None:
            out = out.index_select(0, m.unpad_index)
        return out
