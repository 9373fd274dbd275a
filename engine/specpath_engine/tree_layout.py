"""The engine side of token-tree verification: trees in the step's flattened batch.

A request verified as a tree puts its nodes where a chain's drafts would go (after its last
token), so slots, logits rows and the scheduler's budgets are those of a chain of as many drafts:
a tree never has more nodes than the request's ``max_draft_tokens``. Three things differ, and
this module does them:

- attention: :func:`apply_tree_attention` gives each node its position ``prefix + depth`` and
  lets it see the prefix and its own ancestors only (``specpath_engine.sample.tree_verification.ancestor_mask``);
- acceptance: ``specpath_engine.sample.tree_verification.verify_trees``;
- commit: the accepted path's KV (and drafter features) is moved into place at consecutive
  positions (:func:`compact_path`); the other nodes' entries lie past the request's computed
  pointer, so they are simply overwritten later, like rejected chain drafts.

The engine verifies trees only in standard verification (``verifies_trees``); other modes keep
chains.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch

from specpath_engine.attention import AttentionMetadata
from specpath_engine.sample.tree_verification import ancestor_mask, check_tree, depths
from specpath.verification import TREE_VERIFY_METHODS


def verifies_trees(verify_method: str, enabled: bool = True) -> bool:
    """Whether the reference engine verifies ``DraftProposal.tree`` under ``verify_method`` (and
    tree verification is ``enabled``): the one rule behind ``SpeculatorContext.verifies_trees``."""
    return bool(enabled) and verify_method in TREE_VERIFY_METHODS


@attrs.frozen
class Tree:
    """One request's tree as the step uses it."""

    tokens: list[int]
    parents: list[int]

    @property
    def branches(self) -> bool:
        """False for a plain path (each node the child of the one before)."""
        return any(p != j - 1 for j, p in enumerate(self.parents))

    @property
    def depth(self) -> int:
        """Its levels: the most drafts one verification can accept."""
        return max(depths(self.parents), default=-1) + 1


def take_trees(tree, num_requests: int, budgets: Sequence[int], vocab_size: int, who: str) -> list[Tree | None]:
    """Per drafting request, its tree cut to its budget (nodes are in an order where parents come
    first, so the first ``budget`` nodes are a tree), or None when it has no nodes."""
    counts = [int(n) for n in tree.num_tree_tokens]
    tokens, parents = [int(t) for t in tree.token_ids], [int(p) for p in tree.parents]
    if len(counts) != num_requests or min(counts, default=0) < 0:
        raise ValueError(f"{who}.propose returned tree sizes {counts} for {num_requests} requests")
    if len(tokens) != sum(counts) or len(parents) != sum(counts):
        raise ValueError(f"{who}.propose returned a tree of {len(tokens)} tokens and {len(parents)} parents, "
                         f"num_tree_tokens sums to {sum(counts)}")
    out: list[Tree | None] = []
    start = 0
    for n, budget in zip(counts, budgets):
        t, p = tokens[start : start + n], parents[start : start + n]
        check_tree(p, t, vocab_size, f"{who}.propose tree")
        keep = min(n, budget)
        out.append(Tree(t[:keep], p[:keep]) if keep else None)
        start += n
    return out


def apply_tree_attention(
    meta: AttentionMetadata,
    positions: torch.Tensor,
    *,
    trees: Sequence[Tree | None],
    num_computed: Sequence[int],
    num_new: Sequence[int],
    num_query: Sequence[int],
    num_query_groups: int,
) -> tuple[AttentionMetadata, torch.Tensor]:
    """The step's layout with request ``b``'s last ``len(trees[b].tokens)`` query tokens laid out as
    its tree: tree positions, and a mask over the tree's columns that admits ancestors only.
    ``num_query[b]``: all of request ``b``'s query tokens (new tokens, then drafts or nodes)."""
    mask = meta.mask.clone()
    b_count, _, rows, length = mask.shape
    q = meta.max_query_len
    grid = mask.view(b_count, num_query_groups, q, length)
    positions = positions.clone()
    row = 0
    for b, tree in enumerate(trees):
        n_new = num_new[b]
        n = 0 if tree is None else len(tree.tokens)
        if n:
            first = num_computed[b] + n_new  # flattened position (and slot) of node 0
            grid[b, :, n_new : n_new + n, first : first + n] = ancestor_mask(tree.parents, mask.device)
            depth = torch.tensor(depths(tree.parents), dtype=positions.dtype, device=positions.device)
            positions[row + n_new : row + n_new + n] = first + depth
        row += num_query[b]
    return attrs.evolve(meta, mask=mask, causal=False), positions


def compact_path(kv_data: torch.Tensor, features: torch.Tensor | None, sources: list[int], targets: list[int]) -> None:
    """Copy the accepted nodes' KV (``kv_data`` ``[layers, 2, slots, ...]``) and features
    (``[slots, ...]``) from their node slots to the slots of consecutive positions."""
    moves = [(s, t) for s, t in zip(sources, targets) if s != t]
    if not moves:
        return
    src = torch.tensor([s for s, _ in moves], dtype=torch.int64, device=kv_data.device)
    dst = torch.tensor([t for _, t in moves], dtype=torch.int64, device=kv_data.device)
    kv_data.index_copy_(2, dst, kv_data.index_select(2, src))
    if features is not None:
        features.index_copy_(0, dst.to(features.device), features.index_select(0, src.to(features.device)))
