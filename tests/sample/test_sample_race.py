"""The seeded race (``specpath_engine.sample.race``): its draws follow the target's processed
distribution (Pearson's chi-square over many seeds, as ``test_sample_lossless``), a chain's emitted
tokens are exactly the race winners at its positions (hypothesis), and a fixed draft ``x`` is
accepted with probability ``p(x)`` (token-wise rejection sampling's acceptance of a one-hot draft).

Seeds are fixed and each statistical check fails only below p = 1e-6 (or outside 5 sigma)."""

from __future__ import annotations

import math

import pytest
import torch
from _sample_helpers import chi_square_pvalue
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.sample import target_probs
from specpath_engine.sample.noise import gumbel_noise
from specpath_engine.sample.race import race_tokens, verify_chains

ALPHA = 1e-6
N = 20_000
V = 12


def _logits(seed: int, rows: int = 1) -> torch.Tensor:
    return torch.randn(rows, V, generator=torch.Generator().manual_seed(seed)) * 2


def _noise(seeds, position: int, vocab: int = V) -> torch.Tensor:
    return torch.stack([gumbel_noise(s, position, vocab) for s in seeds])


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 0, 1.0), (0.6, 0, 1.0), (1.3, 5, 1.0), (0.8, 0, 0.8),
                                                            (0.9, 6, 0.7)])
def test_race_draws_follow_the_processed_distribution(temperature, top_k, top_p):
    logits = _logits(1)
    params = (torch.full((N,), temperature), torch.full((N,), top_k) if top_k else None,
              torch.full((N,), top_p) if top_p < 1 else None)
    y = race_tokens(logits.expand(N, -1), *params, _noise(range(N), 7))
    probs = target_probs(logits, *(p[:1] if p is not None else None for p in params))[0]
    assert chi_square_pvalue(torch.bincount(y, minlength=V), probs) > ALPHA


@st.composite
def steps(draw):
    counts = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    seed = draw(st.integers(0, 2**20))
    logits = _logits(seed, sum(counts) + len(counts))
    argmax = logits.argmax(-1).tolist()
    drafts, at = [], 0
    for n in counts:  # drafts mostly equal to the argmax, so that chains get accepted for a while
        chain = [argmax[at + j] if draw(st.booleans()) else draw(st.integers(0, V - 1)) for j in range(n)]
        drafts.append(chain)
        at += n + 1
    temperature = draw(st.lists(st.floats(0.3, 1.5), min_size=len(counts), max_size=len(counts)))
    return drafts, logits, temperature, seed


@settings(max_examples=200, deadline=None)
@given(steps())
def test_a_chain_emits_the_race_winners_at_its_positions(step):
    """Accepted drafts are the winners at their positions; the last emitted token is the winner at
    the first mismatch (or the bonus position): what plain decoding would sample there."""
    drafts, logits, temperature, seed = step
    noise = torch.cat([torch.stack([gumbel_noise(seed + r, 40 + j, V) for j in range(len(d) + 1)])
                       for r, d in enumerate(drafts)])
    emitted = verify_chains(drafts, logits, temperature, None, None, noise)
    sizes = torch.tensor([len(d) + 1 for d in drafts])
    winners = race_tokens(logits, torch.tensor(temperature).repeat_interleave(sizes), None, None, noise).tolist()
    at = 0
    for d, out in zip(drafts, emitted):
        n = len(out) - 1
        assert out == winners[at : at + n + 1]
        assert d[:n] == out[:n] and (n == len(d) or d[n] != out[n])
        at += len(d) + 1


def test_a_fixed_draft_is_accepted_with_its_target_probability():
    """Drafts (x1, x2): P(accept x1) = p1(x1), P(accept both) = p1(x1) p2(x2) (the positions'
    noises are independent), as rejection sampling accepts one-hot drafts."""
    logits = _logits(5, 3)
    probs = target_probs(logits, torch.full((3,), 0.8))
    x1, x2 = int(probs[0].argsort()[-2]), int(probs[1].argmax())  # not the mode: a middling p
    noise = torch.cat([torch.stack([gumbel_noise(s, 20 + j, V) for j in range(3)]) for s in range(N)])
    out = verify_chains([[x1, x2]] * N, logits.repeat(N, 1), [0.8] * N, None, None, noise)
    accepted = torch.tensor([len(o) - 1 for o in out])
    for depth, want in ((1, float(probs[0, x1])), (2, float(probs[0, x1] * probs[1, x2]))):
        got = float((accepted >= depth).double().mean())
        assert abs(got - want) < 5 * math.sqrt(want * (1 - want) / N), (depth, got, want)
