"""Acceptance counts and target processing."""

import torch

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
