"""``draft_tree_topk``: a hidden-state drafter's dynamic token tree (EAGLE-2).

The chain runs the head once per draft on one node. A tree runs it about as often, on ``k``
nodes at once (rows cost little more than one on a memory-bound CPU or a GPU):

1. The logits of the ingest's output give the ``k`` best tokens: the depth-0 candidates, each
   scored by its log-probability (the drafter's estimate that the target emits it).
2. Each pass runs the ``k`` best candidates of the newest depth through the head at once, each
   seeing the committed positions, its ancestors and itself, and scores the top ``k`` children of
   each: a child's score is its parent's plus its own log-probability.
3. After the passes, the ``budget`` best candidates of every depth are the tree. A child never
   scores above its parent and ties keep the earlier candidate first, so the best ``budget`` in
   that order are a tree whose parents come first, as ``DraftTree`` requires.

Passes: ``min(budget - 1, ceil(budget / k))``; with ``k = 1`` that is the chain's ``budget - 1``
and the tree is the top-1 chain. The search knows nothing of heads or KV: :func:`grow_tree`
calls ``run`` for each pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import torch


@attrs.frozen
class TreeDraft:
    """One request's tree: draft-vocabulary tokens, each node's parent (-1: the root), its
    path's log-probability."""

    tokens: list[int]
    parents: list[int]
    scores: list[float]


def num_passes(budget: int, k: int) -> int:
    """Head passes after the ingest's logits (see the module docstring)."""
    return max(0, min(budget - 1, -(-budget // k)))


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """The tree's scores of one head pass: log-probabilities in float64 (``logits [n, V]``)."""
    return torch.log_softmax(logits.double(), dim=-1)


def grow_tree(
    first_logits: torch.Tensor,
    run: Callable[[Sequence[int], Sequence[int], int], torch.Tensor],
    *,
    k: int,
    budget: int,
    normalise: Callable[[torch.Tensor], torch.Tensor] = log_probs,
) -> TreeDraft:
    """The tree of ``budget`` nodes at most. ``first_logits [V]``: the draft logits of the ingest's
    output. ``run(tokens, parents, depth) -> logits [n, V]`` runs the head on ``n`` nodes of
    ``depth``; ``parents[j]`` is the index, among all nodes run so far (in the order they were
    run, 0 first), of node ``j``'s parent, -1 for a depth-0 node. ``normalise``: logits to
    log-probabilities (float64, :func:`log_probs`). A node's ``k`` children are its ``k`` likeliest
    tokens, the lower id first among equals (the native tree's order: ``draft_chain.c``)."""
    if budget < 1:
        return TreeDraft([], [], [])
    # candidates: (score, token, parent candidate, depth); run_of[c] = run index of candidate c
    cands: list[tuple[float, int, int, int]] = []
    run_of: dict[int, int] = {}

    def add_children(logits: torch.Tensor, parents: Sequence[int], depth: int) -> list[int]:
        values, ids = torch.sort(normalise(logits), dim=-1, descending=True, stable=True)
        values, ids = values[:, : min(k, logits.shape[-1])], ids[:, : min(k, logits.shape[-1])]
        new = []
        for parent, vals, toks in zip(parents, values.tolist(), ids.tolist()):
            base = 0.0 if parent < 0 else cands[parent][0]
            for v, t in zip(vals, toks):
                new.append(len(cands))
                cands.append((base + v, t, parent, depth))
        return new

    frontier = add_children(first_logits[None], [-1], 0)
    for depth in range(num_passes(budget, k)):
        beam = sorted(frontier, key=lambda c: (-cands[c][0], c))[:k]
        parents = [run_of.get(cands[c][2], -1) for c in beam]
        for c in beam:
            run_of[c] = len(run_of)
        logits = run([cands[c][1] for c in beam], parents, depth)
        frontier = add_children(logits, beam, depth + 1)
    chosen = sorted(range(len(cands)), key=lambda c: (-cands[c][0], c))[:budget]
    index = {c: i for i, c in enumerate(chosen)}
    return TreeDraft(tokens=[cands[c][1] for c in chosen],
                     parents=[index[cands[c][2]] if cands[c][2] >= 0 else -1 for c in chosen],
                     scores=[cands[c][0] for c in chosen])


def ancestor_runs(parents: Sequence[int]) -> list[list[int]]:
    """For run nodes given by their parent run indices (-1: the root), each node's ancestors' and
    its own run indices, root side first."""
    out: list[list[int]] = []
    for i, p in enumerate(parents):
        out.append([*(out[p] if p >= 0 else []), i])
    return out
