"""Acceptance counts and target processing."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.sample import accepted_per_position, num_accepted, target_probs


def test_counts_from_output():
    out = torch.tensor([[5, 6, 7, -1], [1, -1, -1, -1], [2, 3, 4, 9]], dtype=torch.int32)
    assert num_accepted(out).tolist() == [2, 0, 3]
    accepted, drafted = accepted_per_position(out, [3, 0, 3])
    assert accepted.tolist() == [2, 2, 1] and drafted.tolist() == [2, 2, 2]


def test_target_probs_filters():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(5, 1)
    temperature = torch.tensor([1.0, 1.0, 0.5, 0.0, 1.0])
    top_k = torch.tensor([1, 0, 0, 1, 2])
    top_p = torch.tensor([1.0, 1e-3, 1.0, 1e-3, 1.0])
    p = target_probs(logits, temperature, top_k, top_p)
    assert p[0].tolist() == [1.0, 0.0, 0.0, 0.0]  # top-k 1
    assert p[1].tolist() == [1.0, 0.0, 0.0, 0.0]  # tiny top-p keeps the most likely token
    assert torch.allclose(p[2], torch.softmax(logits[2] / 0.5, -1))
    assert torch.allclose(p[3], torch.softmax(logits[3], -1))  # greedy rows: plain softmax, no filters
    assert torch.allclose(p[4], torch.softmax(torch.tensor([2.0, 1.0, -float("inf"), -float("inf")]), -1))


def test_top_p_keeps_the_smallest_nucleus():
    logits = torch.tensor([[0.5, 0.3, 0.2]]).log()
    p = target_probs(logits, torch.ones(1), None, torch.tensor([0.7]))
    assert torch.allclose(p, torch.tensor([[0.625, 0.375, 0.0]]))


def _nucleus_by_sorting(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """The top-p nucleus (bool [rows, vocab]) by ranking the whole vocabulary, and the mass ranked
    before each token (for the near-ties a float rounding may decide either way)."""
    probs = torch.softmax(logits.double(), -1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(-1) - sorted_probs
    keep = before < top_p.double()[:, None]
    keep[:, 0] = True
    nucleus = torch.zeros_like(keep).scatter_(1, order, keep)
    return nucleus, torch.zeros_like(before).scatter_(1, order, before)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), vocab=st.sampled_from([3, 64, 65, 700, 5000]), spread=st.floats(0.05, 8.0),
       top_p=st.floats(0.01, 0.999), masked=st.booleans())
def test_top_p_matches_ranking_the_whole_vocabulary(seed, vocab, spread, top_p, masked):
    """The candidates-first nucleus (NUCLEUS_FIRST, then 8x as many) is the one a full sort finds,
    from peaked rows (inside the first candidates) to flat ones (past them, up to the vocabulary);
    only tokens whose mass ranked before them lies within float rounding of top_p may differ."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, vocab, generator=g) * spread
    if masked:  # rows a top-k filter left mostly -inf
        logits[:, vocab // 2:] = float("-inf")
    p = torch.full((4,), top_p)
    got = target_probs(logits, torch.ones(4), None, p) > 0
    want, before = _nucleus_by_sorting(logits, p)
    differ = got != want
    assert not differ.any() or ((before[differ] - top_p).abs() < 1e-5).all()
    assert got.any(-1).all()
