"""Seeded sampling noise (``specpath_engine.sample.noise``): a function of (seed, position) only,
Exp(1)-distributed in its exponential form, and cached per request so that the drafter's and
the verifier's calls of one step generate each position once, holding at most one step's worth."""

from __future__ import annotations

import math

import pytest
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


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(1, 5000))
def test_the_uniforms_are_the_same_bits_with_and_without_the_native_library(key, n):
    """splitmix64's outputs, whoever makes them: the native library where it is built, torch's
    integer ops where not (a seeded request's tokens must not depend on the machine's compiler),
    checked against Python's own integers at a few entries."""
    from specpath_engine.modeling.native import kernels

    mask = (1 << 64) - 1

    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    import specpath_engine.modeling.native as native_module

    with pytest.MonkeyPatch.context() as patch:  # hypothesis runs many examples in one test call
        patch.setattr(native_module, "kernels", lambda: None)
        with_torch = noise_module.uniforms(key, n)
    assert with_torch.dtype == torch.float32 and with_torch.shape == (n,)
    for i in {0, n // 2, n - 1}:
        assert float(with_torch[i]) == (mix((key + (i + 1) * 0x9E3779B97F4A7C15) & mask) >> 40) * 2.0**-24
    if kernels() is not None:
        assert torch.equal(noise_module.uniforms(key, n), with_torch)


def test_the_uniforms_are_uniform():
    """Mean 1/2 and each tenth of [0, 1) holding a tenth, over 400k entries (5 sigma bands), and
    neighbouring keys' streams uncorrelated."""
    u = torch.cat([noise_module.uniforms(k, 100_000) for k in range(4)]).double()
    n = u.numel()
    assert abs(float(u.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / n)
    counts = torch.histc(u, bins=10, min=0, max=1)
    assert bool(((counts - n / 10).abs() < 5 * math.sqrt(n * 0.09)).all())
    a, b = noise_module.uniforms(1, 100_000).double(), noise_module.uniforms(2, 100_000).double()
    assert abs(float(torch.corrcoef(torch.stack([a, b]))[0, 1])) < 5 / math.sqrt(100_000)


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
    monkeypatch.setattr(noise_module, "uniforms", lambda key, n: torch.zeros(n))
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


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(0, 10**6), st.integers(1, 3000))
def test_the_gumbel_noise_is_the_same_bits_with_and_without_the_native_library(seed, position, vocab):
    """uniforms.c's Gumbel noise and the torch path (:func:`noise._log`) run the same float32
    operations in the same order: a seeded request's tokens do not depend on the library being
    built (vocabularies of any length: the native loop's last vector is masked)."""
    import specpath_engine.modeling.native as native_module
    from specpath_engine.modeling.native import kernels

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_module, "kernels", lambda: None)
        with_torch = gumbel_noise(seed, position, vocab)
    assert with_torch.dtype == torch.float32 and with_torch.shape == (vocab,)
    if kernels() is not None:
        assert torch.equal(gumbel_noise(seed, position, vocab), with_torch)


def test_the_noise_is_the_gumbel_transform_of_its_uniforms_to_float32_accuracy():
    """G = -log(max(-log1p(-u), first step)) in float64 against the float32 polynomial: within a
    few float32 ulps everywhere (u near 0, where E is tiny and G large, and near 1 included)."""
    key = noise_module.stream_key(11 ^ noise_module._NOISE_SALT, 5)
    u = noise_module.uniforms(key, 200_000).double()
    exact = -(-torch.log1p(-u)).clamp_min(2.0**-25).log()
    got = gumbel_noise(11, 5, 200_000).double()
    assert float(((got - exact).abs() / exact.abs().clamp_min(1.0)).max()) < 4e-7
    grid = torch.tensor([2.0**-24 * k for k in (0, 1, 2, 3, 1000)] + [1 - 2.0**-24 * k for k in (1, 2, 3, 1000)],
                        dtype=torch.float32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(noise_module, "uniforms", lambda key, n: grid)
        import specpath_engine.modeling.native as native_module

        patch.setattr(native_module, "kernels", lambda: None)
        edge = gumbel_noise(0, 0, grid.numel()).double()
    exact = -(-torch.log1p(-grid.double())).clamp_min(2.0**-25).log()
    assert torch.isfinite(edge).all()
    assert float(((edge - exact).abs() / exact.abs().clamp_min(1.0)).max()) < 4e-7


@settings(max_examples=40, deadline=None)
@given(st.floats(min_value=2.0**-126, max_value=2.0**127, allow_nan=False, allow_infinity=False, width=32))
def test_the_polynomial_log_is_within_an_ulp_or_two_of_the_exact_log(x):
    got = float(noise_module._log(torch.tensor([x], dtype=torch.float32))[0])
    exact = math.log(x)
    assert abs(got - exact) <= 3e-7 * max(abs(exact), 1.0) + 1e-12
