"""Block accounting for the paged KV cache: allocation, prefix caching, rollback.

The KV cache is a pool of fixed-size blocks; a request owns a list of block ids (its block
table) and a pointer, ``num_computed_tokens``, to the first position whose KV is not final.
Positions are written by absolute slot, so rolling back rejected drafts is only a pointer move:
the stale entries past the pointer are never read and are overwritten by the next step.

Prefix caching: once a block's KV is final it gets a hash chained from its parent's, covering its
tokens and the ``num_hash_lookahead_tokens`` tokens after it. A new request reuses the longest run
of cached blocks of its prompt. A drafter whose state at a position depends on the token after it
(``use_eagle_block_drop``) makes the tail of a cached run unstable; the two remedies of the
configuration layer are applied: lookahead hashes (the next tokens must match too) or, when those
are off, dropping the last reused block so it is recomputed. Freed blocks
keep their hash and stay reusable until the pool hands them out again (least recently freed first).

Everything here is plain Python over small integers; nothing touches tensors.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import attrs


class NoFreeBlocksError(RuntimeError):
    """The pool cannot satisfy an allocation; the scheduler preempts or waits."""


@attrs.define(kw_only=True, eq=False)
class BlockTable:
    """One request's blocks and the hashes of those whose KV is final."""

    block_ids: list[int] = attrs.field(factory=list)
    """Physical block ids, in position order (block ``i`` holds positions ``i*bs .. i*bs+bs-1``)."""
    block_hashes: list[int] = attrs.field(factory=list)
    """Hashes of the request's first ``len(block_hashes)`` full blocks (prefix order)."""
    num_registered: int = 0
    """How many leading blocks have been offered to the prefix cache."""


class BlockManager:
    """Owns the free pool, reference counts and the prefix-cache index.

    Args:
        num_blocks: blocks in the pool (block 0 included; every block is allocatable).
        block_size: positions per block.
        enable_prefix_caching: reuse blocks of identical prompt prefixes across requests.
        num_hash_lookahead_tokens: tokens after a block that its hash also covers.
        use_eagle_block_drop: the drafter's state at a position depends on the next token; without
            lookahead hashes, the last matched block of a prefix hit is dropped.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        enable_prefix_caching: bool = False,
        num_hash_lookahead_tokens: int = 0,
        use_eagle_block_drop: bool = False,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks and block_size must be >= 1, got {num_blocks} and {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        self.use_eagle_block_drop = use_eagle_block_drop
        self.ref_counts = [0] * num_blocks
        # Free blocks in eviction order (oldest first); an OrderedDict gives O(1) removal on a hit.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._hash_to_block: dict[int, int] = {}
        self._block_to_hash: dict[int, int] = {}

    # ----------------------------------------------------------------------------- pool
    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def blocks_needed(self, table: BlockTable, num_positions: int) -> int:
        """Extra blocks ``table`` needs to hold ``num_positions`` positions."""
        return max(0, -(-num_positions // self.block_size) - len(table.block_ids))

    def can_allocate(self, table: BlockTable, num_positions: int) -> bool:
        return self.blocks_needed(table, num_positions) <= len(self._free)

    def allocate(self, table: BlockTable, num_positions: int) -> None:
        """Grow ``table`` so it covers ``num_positions`` positions (no-op when it already does)."""
        need = self.blocks_needed(table, num_positions)
        if need > len(self._free):
            raise NoFreeBlocksError(f"need {need} blocks, {len(self._free)} free")
        for _ in range(need):
            block, _ = self._free.popitem(last=False)
            old = self._block_to_hash.pop(block, None)
            if old is not None:  # evict its cached content
                del self._hash_to_block[old]
            self.ref_counts[block] = 1
            table.block_ids.append(block)

    def free(self, table: BlockTable) -> None:
        """Release every block of ``table``. With prefix caching, tail blocks go first so they are
        evicted first; without it, in order, so the next request tends to get consecutive blocks
        (which attention then reads as one slice instead of gathering)."""
        for block in reversed(table.block_ids) if self.enable_prefix_caching else list(table.block_ids):
            self.ref_counts[block] -= 1
            if self.ref_counts[block] == 0:
                self._free[block] = None
        table.block_ids.clear()
        table.num_registered = 0

    # ----------------------------------------------------------------------- prefix cache
    def _extend_hashes(self, table: BlockTable, token_ids: Sequence[int], num_final: int) -> None:
        """Hash every full block whose tokens and lookahead tokens lie within ``num_final``."""
        bs, extra = self.block_size, self.num_hash_lookahead_tokens
        hashes = table.block_hashes
        i = len(hashes)
        while (i + 1) * bs + extra <= num_final:
            parent = hashes[-1] if hashes else 0
            start = i * bs
            hashes.append(hash((parent, tuple(token_ids[start : start + bs + extra]))))
            i += 1

    def match_prefix(self, table: BlockTable, token_ids: Sequence[int]) -> int:
        """Attach the longest cached prefix of ``token_ids`` to an empty ``table``.

        Returns the number of positions whose KV is reused. At least one token is always left to
        compute, because the step that computes it produces the logits to sample from.
        """
        if not self.enable_prefix_caching:
            return 0
        assert not table.block_ids, "match_prefix needs an empty block table"
        self._extend_hashes(table, token_ids, len(token_ids))
        limit = (len(token_ids) - 1) // self.block_size  # leave >= 1 token to compute
        hits: list[int] = []
        for h in table.block_hashes[:limit]:
            block = self._hash_to_block.get(h)
            if block is None:
                break
            hits.append(block)
        if hits and self.use_eagle_block_drop and not self.num_hash_lookahead_tokens:
            hits.pop()  # lookahead hashes, when on, already make the tail block safe to reuse
        for block in hits:
            if self.ref_counts[block] == 0:
                del self._free[block]
            self.ref_counts[block] += 1
        table.block_ids.extend(hits)
        table.num_registered = len(hits)
        return len(hits) * self.block_size

    def register_computed(self, table: BlockTable, token_ids: Sequence[int], num_computed: int) -> None:
        """Offer the request's blocks whose KV is final (below ``num_computed``) to the cache.

        ``token_ids`` must hold only final tokens (no unverified drafts), so a block's lookahead
        tokens are as trustworthy as its own.
        """
        if not self.enable_prefix_caching:
            return
        self._extend_hashes(table, token_ids, len(token_ids))
        upto = min(num_computed // self.block_size, len(table.block_hashes), len(table.block_ids))
        for i in range(table.num_registered, upto):
            h = table.block_hashes[i]
            block = table.block_ids[i]
            if h not in self._hash_to_block and block not in self._block_to_hash:
                self._hash_to_block[h] = block
                self._block_to_hash[block] = h
        table.num_registered = max(table.num_registered, upto)
