"""Best-first token trees from one block pass: DFlash's and DSpark's tree drafts.

A block pass yields logits for every block position at once (``U_k``, ``[R, K, n]``). A node
at depth ``d`` has as children the ``c`` most likely tokens of position ``d + 1``'s
distribution ``q_{d+1}(. | node's token) = softmax(U_{d+1} + bias(node's token))``: DFlash's
positions are independent (no bias: every node of a depth has the same children), DSpark's
Markov head adds ``W1[x] W2``. So a tree costs no extra drafter pass.

Shape: best-first. A candidate's score is the product of ``q`` along its path (the drafter's
estimate that the target emits that path); the tree grows by adding the best-scoring candidate
whose parent is already in it, until it has ``budget`` nodes (the request's K this step: the
same slots and target rows as the chain) or the block's depth is exhausted; at most ``c``
children a node; ``c = 1`` gives the top-1 chain, one of the trees the search considers, so a
tree's estimated acceptance is never below the chain's. Nodes come out in the order they were
added (parents before children, as ``DraftTree`` requires).

Worked example (one request, K = 3, c = 2, no bias): position tops ``q_1`` = {a: .6, b: .3},
``q_2`` = {c: .5, d: .2}, ``q_3`` = {e: .9, ...}. Candidates a (.6), b (.3); a is taken, its
children a-c (.30), a-d (.12) join; b (.3) and a-c (.30) tie, the earlier-pushed b wins
(the tie rule: more probable parents' candidates first), then a-c: nodes [a, b, a-c], parents
[-1, -1, 0].

Over a reduced draft vocabulary (``ids``: the kept target ids, sorted) the logits cover only
those ids, every other one being ``-inf``: the same trees, in target ids, at a twelfth of the
work (SmolLM2: 4,096 of 49,152).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import torch

Tree = tuple[list[int], list[int], list[float]]
"""A request's ``(tokens, parents, path_probs)``: ``DraftTree``'s per-request lists."""


def best_first_trees(base_logits: torch.Tensor, anchors: Sequence[int], budgets: Sequence[int], top_c: int, *,
                     floor: torch.Tensor | None = None,
                     bias: Callable[[torch.Tensor], torch.Tensor] | None = None,
                     ids: torch.Tensor | None = None) -> list[Tree]:
    """Per request its best-first tree (see the module docstring).

    ``base_logits`` ``[R, K, n]``; ``anchors`` ``[R]`` the last sampled tokens (target ids);
    ``budgets`` ``[R]`` node budgets (0: no tree); ``floor`` ``[R, K]``: candidates whose base logit
    is below it get probability 0 (DSpark's ``dspark_draft_topk``), None: none; ``bias(prev)``:
    ``prev`` ``[m]`` target ids -> ``[m, n]`` logits added for the position after them, None:
    independent positions; ``ids`` ``[n]``: the target ids of the logits' last axis (a reduced
    draft vocabulary), None: the whole vocabulary.
    """
    r_count, depth_max, vocab = base_logits.shape
    c = max(1, min(int(top_c), vocab))
    dev = base_logits.device
    trees: list[Tree] = [([], [], []) for _ in range(r_count)]
    frontiers: list[list[tuple[float, int, int, int, int]]] = [[] for _ in range(r_count)]
    order = 0
    fixed = None
    if bias is None:  # independent positions: every node of a depth has the same children, computed once
        logits = base_logits.float()
        if floor is not None:
            logits = logits.masked_fill(base_logits < floor[..., None], float("-inf"))
        values, top = torch.softmax(logits, dim=-1).topk(c, dim=-1)  # [R, K, c]
        if ids is not None:
            top = ids[top]
        fixed = (values.tolist(), top.tolist())

    def expand(rows: list[int], depth: list[int], prev: list[int], parent: list[int], score: list[float]) -> None:
        """Push the top-c children (at block position ``depth``) of each given node."""
        nonlocal order
        if fixed is not None:
            children = [(fixed[0][i][d], fixed[1][i][d]) for i, d in zip(rows, depth)]
        else:
            ri = torch.tensor(rows, dtype=torch.int64, device=dev)
            di = torch.tensor(depth, dtype=torch.int64, device=dev)
            base = base_logits[ri, di].float()
            logits = base + bias(torch.tensor(prev, dtype=torch.int64, device=dev))
            if floor is not None:
                logits = logits.masked_fill(base < floor[ri, di, None], float("-inf"))
            values, top = torch.softmax(logits, dim=-1).topk(c, dim=-1)
            if ids is not None:
                top = ids[top]
            children = list(zip(values.tolist(), top.tolist()))
        for j, (vals, toks) in enumerate(children):
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


def flatten(num_reqs: int, drafting: Sequence[int], trees: Sequence[Tree]):
    """``DraftTree``'s flat fields from the drafting requests' trees: ``(tokens, parents, probs,
    sizes)``, sizes per request of the batch (0 where it does not draft)."""
    sizes = [0] * num_reqs
    tokens: list[int] = []
    parents: list[int] = []
    probs: list[float] = []
    for i, (t, p, q) in zip(drafting, trees):
        sizes[i] = len(t)
        tokens += t
        parents += p
        probs += q
    return tokens, parents, probs, sizes
