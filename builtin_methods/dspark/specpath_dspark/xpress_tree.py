"""``xpress_topc``: DSpark drafts as token trees, best-first under a node budget.

The block pass yields base logits ``U_k`` for every block position at once; the Markov head
makes position ``k``'s distribution depend only on the token before it:
``q_k(. | x) = softmax(U_k + W1[x] W2)`` (restricted to the ``dspark_draft_topk`` candidates,
as the chain's). So a tree costs no extra drafter pass: each node's children are the ``c`` most
likely tokens of ``q_{depth+1}(. | node's token)``.

Shape (documented in ``docs/methods/dspark.md``): best-first. Every candidate's score is the
product of ``q`` along its path (the drafter's estimate that the target emits that path); the
tree grows by repeatedly adding the best-scoring candidate whose parent is already in the tree,
until it has ``budget`` nodes (the request's K for this step, so the tree takes the same slots
and target rows as the chain) or the block's depth is exhausted. Each node has at most ``c``
children. With ``c = 1`` the tree is the top-1 chain. Since the chain is one of the trees this
search considers, the tree's estimated acceptance is never below the chain's. Nodes come out in
the order they were added, so parents precede children as ``DraftTree`` requires.

All requests grow in lockstep: one batched Markov-head evaluation per added node layer.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import torch


def best_first_trees(
    base_logits: torch.Tensor,
    floor: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    anchors: Sequence[int],
    budgets: Sequence[int],
    top_c: int,
) -> list[tuple[list[int], list[int], list[float]]]:
    """Per request ``(tokens, parents, path_probs)``.

    ``base_logits`` ``[R, K, V]`` (``U_k``), ``floor`` ``[R, K]`` (``topk_floor``), ``w1`` ``[V, r]``,
    ``w2`` ``[r, V]``, ``anchors`` ``[R]`` (the last sampled tokens), ``budgets`` ``[R]`` node budgets.
    """
    r_count, depth_max, vocab = base_logits.shape
    c = max(1, min(int(top_c), vocab))
    w1, w2 = w1.float(), w2.float()
    trees: list[tuple[list[int], list[int], list[float]]] = [([], [], []) for _ in range(r_count)]
    frontiers: list[list[tuple[float, int, int, int, int]]] = [[] for _ in range(r_count)]
    order = 0

    def expand(rows: list[int], depth: list[int], prev: list[int], parent: list[int], score: list[float]) -> None:
        """Push the top-c children (at block position ``depth``) of each given node."""
        nonlocal order
        dev = base_logits.device
        ri = torch.tensor(rows, dtype=torch.int64, device=dev)
        di = torch.tensor(depth, dtype=torch.int64, device=dev)
        base = base_logits[ri, di].float()
        logits = base + w1[torch.tensor(prev, dtype=torch.int64, device=dev)] @ w2
        logits = logits.masked_fill(base < floor[ri, di, None], float("-inf"))
        values, ids = torch.softmax(logits, dim=-1).topk(c, dim=-1)
        for j, (vals, toks) in enumerate(zip(values.tolist(), ids.tolist())):
            for p, t in zip(vals, toks):
                if p > 0:
                    order += 1  # ties: earlier (more probable) candidates first
                    heapq.heappush(frontiers[rows[j]], (-score[j] * p, order, parent[j], depth[j], t))

    live = [i for i in range(r_count) if budgets[i] > 0]
    if live and depth_max > 0:
        expand(live, [0] * len(live), [int(anchors[i]) for i in live], [-1] * len(live), [1.0] * len(live))
    while live:
        nxt: list[tuple[int, int, int, int, float]] = []
        still = []
        for i in live:
            tokens, parents, probs = trees[i]
            if len(tokens) >= budgets[i] or not frontiers[i]:
                continue
            neg, _, parent, depth, token = heapq.heappop(frontiers[i])
            tokens.append(token)
            parents.append(parent)
            probs.append(-neg)
            if depth + 1 < depth_max:
                nxt.append((i, depth + 1, token, len(tokens) - 1, -neg))
            still.append(i)
        if nxt:
            expand([n[0] for n in nxt], [n[1] for n in nxt], [n[2] for n in nxt], [n[3] for n in nxt],
                   [n[4] for n in nxt])
        live = still
    return trees
