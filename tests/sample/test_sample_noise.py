"""Seeded sampling noise (``specpath_engine.sample.noise``): a function of (seed, position) only,
Exp(1)-distributed in its exponential form, and cached per request so that the drafter's and
the verifier's calls of one step generate each position once, holding at most one step's worth."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.sample import noise as noise_module
from specpath_engine.sample.noise import SeededNoise, gumbel_noise


def test_noise_is_a_function_of_seed_and_position_only():
    a = gumbel_noise(7, 100, 64)
    assert a.dtype == torch.float32 and a.shape == (64,)
    assert torch.equal(a, gumbel_noise(7, 100, 64))
    assert not torch.equal(a, gumbel_noise(7, 101, 64))
    assert not torch.equal(a, gumbel_noise(8, 100, 64))
    assert torch.isfinite(a).all()


def test_the_exponential_form_is_exp_1():
    """E = exp(-G): mean 1, P(E > 1) = 1/e, P(E > 5) = e^-5, over 400k entries (5 sigma bands)."""
    e = torch.cat([gumbel_noise(3, p, 100_000) for p in range(4)]).double().neg().exp()
    n = e.numel()
    assert abs(float(e.mean()) - 1.0) < 5 / math.sqrt(n)
    for x in (1.0, 5.0):
        tail = math.exp(-x)
        assert abs(float((e > x).double().mean()) - tail) < 5 * math.sqrt(tail * (1 - tail) / n)


def test_a_zero_uniform_gives_a_finite_noise(monkeypatch):
    """u = 0 (probability 2**-24 per entry) must not make G infinite: -inf logits must never win."""
    monkeypatch.setattr(noise_module.torch, "rand", lambda n, **kw: torch.zeros(n))
    g = gumbel_noise(0, 0, 4)
    assert torch.isfinite(g).all()
    assert int((torch.tensor([float("-inf"), 0.0, float("-inf"), -1.0]) + g).argmax()) == 1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5)), min_size=1, max_size=12))
def test_the_cache_gives_the_noise_and_holds_at_most_one_step(calls):
    """Calls as steps make them (first positions only move forward): each answer is the noise
    itself, and the cache never holds positions before the last first position asked."""
    noise = SeededNoise(seed=11, vocab_size=16)
    first = 50
    for advance, count in calls:
        first += advance
        got = noise.gumbel(first, count)
        assert got.shape == (count, 16)
        for j in range(count):
            assert torch.equal(got[j], gumbel_noise(11, first + j, 16))
        assert all(p >= first for p in noise._cache)
        assert len(noise._cache) <= max(c for _, c in calls)


def test_a_step_generates_each_position_once(monkeypatch):
    """The drafter's K positions, then the verifier's K + 1, then the next step after two accepted
    drafts: K + 1 + 3 generations, not 2K + 1 + K + 1."""
    made = []
    original = noise_module.gumbel_noise
    monkeypatch.setattr(noise_module, "gumbel_noise", lambda *a: made.append(a[1]) or original(*a))
    noise = SeededNoise(seed=5, vocab_size=8)
    noise.gumbel(10, 4)  # drafter, positions 10..13
    noise.gumbel(10, 5)  # verifier, 10..14
    noise.gumbel(13, 4)  # next step's drafter: 13, 14 are known
    assert made == [10, 11, 12, 13, 14, 15, 16]
