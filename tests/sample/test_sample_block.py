"""Block verification: the paper's toy case, exact expectations, never worse than token-wise."""

import itertools
import math
from fractions import Fraction

import pytest
import torch

from specpath_engine.sample import num_accepted, rejection_sample


def expected_accepted_block(p, q, gamma):
    """E[accepted drafts] of Sun et al.'s Algorithm 2 for a context-free p, q, by enumerating
    every draft block and the coins' outcomes (exact when p, q are Fractions)."""
    one, zero = type(p[0])(1), type(p[0])(0)
    total = zero
    for block in itertools.product(range(len(p)), repeat=gamma):
        chance = one
        for x in block:
            chance *= q[x]
        w, h = one, []
        for i, x in enumerate(block):
            w = min(one, w * p[x] / q[x])
            if i < gamma - 1:
                z = sum(max(zero, w * p[v] - q[v]) for v in range(len(p)))
                h.append(z / (z + 1 - w) if z + 1 - w > 0 else one)
            else:
                h.append(w)
        for tau in range(1, gamma + 1):  # tau = the last coin that succeeds
            prob = h[tau - 1]
            for later in h[tau:]:
                prob *= 1 - later
            total += chance * tau * prob
    return total


def expected_accepted_tokenwise(p, q, gamma):
    alpha = sum(min(a, b) for a, b in zip(p, q))
    return sum(alpha**i for i in range(1, gamma + 1))


def simulate(p, q, gamma, method, n=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    p, q = torch.tensor(p, dtype=torch.float32), torch.tensor(q, dtype=torch.float32)
    drafts = torch.multinomial(q, n * gamma, replacement=True, generator=g).int()
    bonus = torch.multinomial(p, n, replacement=True, generator=g).int()
    torch.manual_seed(seed + 1)
    out = rejection_sample(drafts, [gamma] * n, p.log().expand(n * gamma, -1), bonus, torch.ones(n),
                           draft_probs=q.expand(n * gamma, -1), method=method)
    return num_accepted(out).double()


def test_toy_case_exact():
    p, q = [Fraction(1, 3), Fraction(2, 3)], [Fraction(2, 3), Fraction(1, 3)]
    assert expected_accepted_block(p, q, 2) == Fraction(11, 9)
    assert expected_accepted_tokenwise(p, q, 2) == Fraction(10, 9)


@pytest.mark.slow
def test_toy_case_simulated():
    p, q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
    for method, expected in (("block", 11 / 9), ("standard", 10 / 9)):
        accepted = simulate(p, q, 2, method)
        error = accepted.std().item() / math.sqrt(accepted.numel())
        assert abs(accepted.mean().item() - expected) < 5 * error, method


@pytest.mark.parametrize("seed", range(3))
def test_random_distributions_match_enumeration_and_beat_tokenwise(seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(3, generator=g) * 1.5, -1).tolist()
    q = torch.softmax(torch.randn(3, generator=g) * 1.5, -1).tolist()
    gamma = 3
    block, tokenwise = expected_accepted_block(p, q, gamma), expected_accepted_tokenwise(p, q, gamma)
    assert block >= tokenwise - 1e-12
    accepted = simulate(p, q, gamma, "block", n=40_000, seed=seed)
    error = accepted.std().item() / math.sqrt(accepted.numel())
    assert abs(accepted.mean().item() - block) < 5 * error


def test_one_hot_drafts_match_tokenwise_expectation():
    """With one-hot drafts nothing beats token-wise: both rules keep sum_i prod_{j<=i} p(X_j)
    drafts on average (the fast path must not lose that)."""
    g = torch.Generator().manual_seed(5)
    n, k = 4000, 4
    logits = torch.randn(n * k, 4, generator=g)
    drafts = torch.randint(0, 4, (n * k,), generator=g)
    p_draft = torch.softmax(logits, -1).gather(1, drafts[:, None]).view(n, k).double()
    expected = p_draft.cumprod(1).sum(1).mean().item()
    bonus = torch.zeros(n, dtype=torch.int32)
    for method in ("standard", "block"):
        accepted = num_accepted(rejection_sample(drafts.int(), [k] * n, logits, bonus, torch.ones(n),
                                                 generators=list(range(n)), method=method)).double()
        error = accepted.std().item() / math.sqrt(n)
        assert abs(accepted.mean().item() - expected) < 5 * error, method
