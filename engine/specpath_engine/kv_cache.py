"""Tensor storage behind the block manager: the paged KV cache and the drafter feature store.

Both are flat arrays indexed by *slot* (``block_id * block_size + offset``): a step writes each
token's entry at its slot and attention gathers a request's history through its block table, so
no tensor ever grows or is concatenated while decoding.
"""

from __future__ import annotations

import torch


class KVCache:
    """Keys and values of every layer: ``[num_layers, 2, num_slots, num_kv_heads, head_dim]``."""

    def __init__(
        self,
        *,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        self.num_layers = num_layers
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.num_slots = num_blocks * block_size
        self.data = torch.zeros(
            num_layers, 2, self.num_slots, num_kv_heads, head_dim, dtype=dtype, device=device
        )

    @staticmethod
    def bytes_per_block(
        *, num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype
    ) -> int:
        """Bytes one block takes across every layer (keys and values)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        return num_layers * 2 * block_size * num_kv_heads * head_dim * itemsize

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def keys(self, layer: int) -> torch.Tensor:
        return self.data[layer, 0]

    def values(self, layer: int) -> torch.Tensor:
        return self.data[layer, 1]


class FeatureStore:
    """Target hidden states of chosen layers, paged exactly like the KV cache.

    Hidden-state drafters (EAGLE, MTP, DFlash, ...) read the target's features of every committed
    position. Keeping them by slot means positions reused from the prefix cache, or recomputed
    after a preemption, still have their features: the engine hands the speculator any committed
    positions it has not seen yet, wherever they came from. This is the drafter's paged space.
    The target writes ``data`` during its forward pass (``LlamaModel.forward``'s ``hidden_store``).
    """

    def __init__(
        self,
        *,
        num_slots: int,
        num_layers: int,
        hidden_size: int,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        self.data = torch.zeros(num_slots, num_layers, hidden_size, dtype=dtype, device=device)

    def read(self, slots: torch.Tensor) -> torch.Tensor:
        return self.data.index_select(0, slots)
