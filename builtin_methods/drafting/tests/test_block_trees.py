"""Best-first trees from one block pass (``specpath_drafting.block.trees``): against a naive
restatement (every top-c path scored, then grown best-first), with and without a per-token bias;
over a reduced vocabulary's kept ids the same trees as over the whole vocabulary with every other
logit ``-inf``; c = 1 is the greedy chain; the flattened layout is ``DraftTree``'s."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_drafting.block.trees import best_first_trees, flatten

VOCAB, RANK = 9, 3


def inputs(seed: int, r: int, k: int):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(r, k, VOCAB, generator=g) * 2
    w1, w2 = torch.randn(VOCAB, RANK, generator=g), torch.randn(RANK, VOCAB, generator=g)
    anchors = torch.randint(0, VOCAB, (r,), generator=g).tolist()
    return base, w1, w2, anchors


def naive(base, bias, anchor, budget, c):
    """Every top-c path with its probability, then the best open candidate added until the budget."""
    k = base.shape[0]
    candidates = []

    def grow(path, prev, prob):
        if len(path) == k:
            return
        logits = base[len(path)] + (bias(torch.tensor([prev]))[0] if bias is not None else 0)
        values, ids = torch.softmax(logits, -1).topk(min(c, base.shape[-1]))
        for p, t in zip(values.tolist(), ids.tolist()):
            if p > 0:
                candidates.append((path + (t,), prob * p))
                grow(path + (t,), t, prob * p)

    grow((), anchor, 1.0)
    chosen: list[tuple] = []
    while len(chosen) < budget:
        open_ = [(p, path) for path, p in candidates if path not in chosen and (len(path) == 1 or path[:-1] in chosen)]
        if not open_:
            break
        chosen.append(max(open_, key=lambda x: x[0])[1])
    return chosen


def paths(tokens, parents):
    out = []
    for t, p in zip(tokens, parents):
        out.append((out[p] if p >= 0 else ()) + (t,))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 3), st.integers(0, 8), st.booleans())
def test_best_first_matches_the_naive_restatement(seed, k, c, budget, markov):
    base, w1, w2, anchors = inputs(seed, 2, k)
    bias = (lambda prev: w1[prev] @ w2) if markov else None
    budgets = [budget, max(budget - 3, 0)]
    trees = best_first_trees(base, anchors, budgets, c, bias=bias)
    for i, (tokens, parents, probs) in enumerate(trees):
        assert paths(tokens, parents) == naive(base[i], bias, anchors[i], budgets[i], c)
        assert all(p < j for j, p in enumerate(parents))  # parents first
        assert sorted(probs, reverse=True) == pytest.approx(probs)  # best-first: scores never rise
        assert len(tokens) <= budgets[i]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(1, 3), st.integers(1, 6), st.booleans())
def test_kept_ids_give_the_whole_vocabulary_trees(seed, k, c, budget, markov):
    """Logits over a reduced vocabulary's sorted kept ids: the trees of the whole vocabulary whose
    other logits are ``-inf`` (what a restricted head's full logits are), in target ids."""
    base, w1, w2, anchors = inputs(seed, 2, k)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randperm(VOCAB, generator=g)[:5].sort().values
    full = torch.full_like(base, float("-inf"))
    full[..., ids] = base[..., ids]
    whole = best_first_trees(full, anchors, [budget, budget], c, bias=(lambda prev: w1[prev] @ w2) if markov else None)
    kept = best_first_trees(base[..., ids], anchors, [budget, budget], c,
                            bias=(lambda prev: w1[prev] @ w2[:, ids]) if markov else None, ids=ids)
    for (t1, p1, q1), (t2, p2, q2) in zip(whole, kept):
        assert (t1, p1) == (t2, p2) and q1 == pytest.approx(q2)
        assert set(t2) <= set(ids.tolist())


def test_top_one_is_the_greedy_chain():
    base, _, _, anchors = inputs(3, 3, 4)
    trees = best_first_trees(base, anchors, [4, 2, 0], 1)
    for row, budget, (tokens, parents, _) in zip(base.argmax(-1).tolist(), [4, 2, 0], trees):
        assert tokens == row[:budget] and parents == list(range(-1, budget - 1))


def test_floor_drops_candidates_below_it():
    base, _, _, anchors = inputs(5, 1, 2)
    floor = base.topk(1, dim=-1).values[..., -1]  # only each position's best survives
    (tokens, parents, probs), = best_first_trees(base, anchors, [4], 3, floor=floor)
    assert tokens == base[0].argmax(-1).tolist() and probs == pytest.approx([1.0, 1.0])


def test_flatten_is_draft_trees_layout():
    trees = [([5, 6], [-1, 0], [0.5, 0.25]), ([7], [-1], [0.9])]
    assert flatten(4, [1, 3], trees) == ([5, 6, 7], [-1, 0, -1], [0.5, 0.25, 0.9], [0, 2, 0, 1])
