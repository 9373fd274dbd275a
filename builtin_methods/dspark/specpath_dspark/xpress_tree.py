"""``xpress_topc``: DSpark drafts as token trees, best-first under a node budget.

The block pass yields base logits ``U_k`` for every block position at once; the Markov head
makes position ``k``'s distribution depend only on the token before it:
``q_k(. | x) = softmax(U_k + W1[x] W2)`` (restricted to the ``dspark_draft_topk`` candidates,
as the chain's). So a tree costs no extra drafter pass: each node's children are the ``c`` most
likely tokens of ``q_{depth+1}(. | node's token)``; the search itself, best-first under the
request's K nodes, is the block drafters' shared one (:mod:`specpath_drafting.block.trees`).
Shape documented in ``docs/methods/dspark.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specpath_drafting.block import trees


def best_first_trees(
    base_logits: torch.Tensor,
    floor: torch.Tensor | None,
    w1: torch.Tensor,
    w2: torch.Tensor,
    anchors: Sequence[int],
    budgets: Sequence[int],
    top_c: int,
    ids: torch.Tensor | None = None,
) -> list[trees.Tree]:
    """Per request ``(tokens, parents, path_probs)``.

    ``base_logits`` ``[R, K, n]`` (``U_k``), ``floor`` ``[R, K]`` (``topk_floor``; None: none),
    ``w1`` ``[V, r]``, ``w2`` ``[r, n]``, ``anchors`` ``[R]`` (the last sampled tokens),
    ``budgets`` ``[R]`` node budgets; ``ids`` ``[n]``: the kept target ids of a reduced draft
    vocabulary (``base_logits`` and ``w2`` cover only those), None: ``n`` is the vocabulary.
    """
    w1, w2 = w1.float(), w2.float()
    return trees.best_first_trees(base_logits, anchors, budgets, top_c, floor=floor,
                                  bias=lambda prev: w1[prev] @ w2, ids=ids)
