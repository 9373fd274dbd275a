"""The dynamic draft tree (``draft_tree_topk``): a valid tree of at most the budget, best
candidates first; with k = 1 the top-1 chain; the head runs as often as the module says, on at
most k nodes a pass, each told its parent."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_drafting.tree_search import ancestor_runs, grow_tree, num_passes

VOCAB = 12


def _logits(seed: int, *key: int) -> torch.Tensor:
    """Deterministic logits for a node (its path and depth as the seed)."""
    g = torch.Generator().manual_seed(hash((seed, *key)) % 2**31)
    return torch.randn(VOCAB, generator=g) * 3


class Head:
    """A fake head: a node's logits depend on its whole path, as a real head's do."""

    def __init__(self, seed: int) -> None:
        self.seed, self.paths, self.calls = seed, [], []

    def run(self, tokens, parents, depth):
        self.calls.append((list(tokens), list(parents), depth))
        rows = []
        for t, p in zip(tokens, parents):
            path = (*(self.paths[p] if p >= 0 else ()), t)
            assert len(path) == depth + 1
            self.paths.append(path)
            rows.append(_logits(self.seed, *path))
        return torch.stack(rows)


@given(k=st.integers(1, 4), budget=st.integers(0, 12), seed=st.integers(0, 2**16))
@settings(max_examples=60, deadline=None)
def test_the_tree_is_the_best_candidates_with_parents_first(k, budget, seed):
    head = Head(seed)
    tree = grow_tree(_logits(seed), head.run, k=k, budget=budget)
    n = len(tree.tokens)
    assert n == len(tree.parents) == len(tree.scores) <= budget
    assert n == budget or budget == 0 or n == k + len(head.calls) * k * k  # all candidates fit
    assert all(-1 <= p < i for i, p in enumerate(tree.parents))  # parents first
    assert all(tree.scores[i] <= tree.scores[p] for i, p in enumerate(tree.parents) if p >= 0)
    assert tree.scores == sorted(tree.scores, reverse=True)
    assert len(head.calls) == (num_passes(budget, k) if budget else 0)
    assert all(len(tokens) <= k and depth == i for i, (tokens, _, depth) in enumerate(head.calls))
    if budget:
        assert tree.tokens[0] == int(_logits(seed).argmax()) and tree.parents[0] == -1
    # every node's score is its path's log-probability under the fake head
    paths = []
    for t, p in zip(tree.tokens, tree.parents):
        paths.append((*(paths[p] if p >= 0 else ()), t))
    for path, score in zip(paths, tree.scores):
        logp = sum(float(torch.log_softmax(_logits(seed, *path[:d]), -1)[path[d]]) for d in range(len(path)))
        assert abs(logp - score) < 1e-4


@given(budget=st.integers(1, 10), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_k_1_is_the_top_1_chain(budget, seed):
    head = Head(seed)
    tree = grow_tree(_logits(seed), head.run, k=1, budget=budget)
    chain = []
    for _ in range(budget):
        chain.append(int(_logits(seed, *chain).argmax()))
    assert tree.tokens == chain and tree.parents == list(range(-1, budget - 1))


def test_ancestor_runs():
    assert ancestor_runs([-1, -1, 0, 1, 2]) == [[0], [1], [0, 2], [1, 3], [0, 2, 4]]
