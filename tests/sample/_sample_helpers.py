"""Shared builders for the verification tests."""

from __future__ import annotations

import torch


def layout(counts: list[int]) -> torch.Tensor:
    cu = torch.zeros(len(counts) + 1, dtype=torch.long)
    cu[1:] = torch.tensor(counts, dtype=torch.long).cumsum(0)
    return cu


def random_step(counts: list[int], vocab: int, seed: int, *, match: float = 0.7, draft_probs: bool = True):
    """Random logits, drafts that copy the target argmax with probability ``match``, and bonus tokens."""
    g = torch.Generator().manual_seed(seed)
    total = sum(counts)
    logits = torch.randn(total, vocab, generator=g) * 3
    argmax = logits.argmax(-1)
    other = torch.randint(0, vocab, (total,), generator=g)
    drafts = torch.where(torch.rand(total, generator=g) < match, argmax, other).to(torch.int32)
    q = torch.softmax(torch.randn(total, vocab, generator=g) * 2, -1) if draft_probs else None
    bonus = torch.randint(0, vocab, (len(counts),), generator=g).to(torch.int32)
    return drafts, logits, bonus, q


def chi_square_pvalue(observed: torch.Tensor, expected_probs: torch.Tensor) -> float:
    """Upper tail of Pearson's chi-square; cells with zero expected mass must stay empty."""
    observed = observed.double().flatten()
    expected_probs = expected_probs.double().flatten()
    assert observed[expected_probs == 0].sum() == 0, "a token with zero target probability was emitted"
    keep = expected_probs > 0
    expected = expected_probs[keep] * observed.sum()
    stat = ((observed[keep] - expected) ** 2 / expected).sum()
    df = int(keep.sum()) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), stat / 2))
