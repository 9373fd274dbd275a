"""Seeded sampling noise: one Gumbel vector per (seed, position), shared by drafter and verifier.

A seeded request samples its token at position ``p`` by the exponential race
``y_p = argmax_v probs_p[v] / E_p[v]`` with ``E_p ~ Exp(1)^V`` a function of ``(seed, p)`` alone
(:func:`gumbel_noise`); ``y_p`` follows ``probs_p`` exactly because ``E_p`` is independent of
everything that shaped ``probs_p``. The noise is kept as ``G = -log E`` (Gumbel-max:
``argmax_v log probs_p[v] + G_p[v]`` is the same token), so the race is one add and one argmax
over logits (:mod:`specpath_engine.sample.race`). Since nothing else enters the draw, the token
at ``p`` does not depend on the drafter, on how many drafts a step verified, on the batch or on
a preemption: speculative decoding of a seeded request emits plain decoding's tokens.

Cost: one uniform per vocabulary entry and two logs. The uniforms are counter-based
(:func:`uniforms`: splitmix64 of the entry's index under a key of ``(seed, position)``), and the
logs one float32 polynomial (:func:`_log`), both made by the native library where it is built and
by torch's ops, bit for bit the same, where it is not: torch's CPU generator took ~0.2 ms a
position at V = 49,152 on one core of an AMD EPYC, and torch's two logs after the uniforms
~0.09 ms of the ~0.11 left, on every sampled position of every step. A step needs the noise at each
draft position and at the bonus position, and the drafter needs it first: :class:`SeededNoise`
keeps each position's vector from the drafter's call for the verifier's (and for the next step,
which starts after the accepted drafts).
"""

from __future__ import annotations

import torch

from specpath_engine.sample.randomness import SPLITMIX_GOLDEN, SPLITMIX_MIX1, SPLITMIX_MIX2, stream_key

_NOISE_SALT = 0x2C1B_3C6D_5F7E_8A9B  # keeps the noise apart from the request's other streams

_FIRST_STEP = 2.0**-25
"""``E`` where ``u = 0`` (probability 2**-24 per entry): half the grid's first step, never 0, so
``G`` stays finite and a masked (``-inf``) logit can never win."""


def _int64(x: int) -> int:
    """A 64-bit pattern as torch's int64 holds it (wrapping arithmetic keeps the bits)."""
    return x - (1 << 64) if x >= 1 << 63 else x


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns (torch's ``>>`` is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def uniforms(key: int, n: int) -> torch.Tensor:
    """float32 ``[n]`` in [0, 1), multiples of 2**-24: entry ``i`` is the top 24 bits of
    splitmix64's output ``i`` from state ``key`` (a function of ``(key, i)`` alone). The native
    library's ``specpath_uniforms`` where it is built, else the same integer steps in torch."""
    from specpath_engine.modeling.native import kernels

    native = kernels()
    if native is not None:
        return native.uniforms(key, n)
    z = torch.arange(1, n + 1, dtype=torch.int64) * _int64(SPLITMIX_GOLDEN) + _int64(key)
    z = (z ^ _shift_right(z, 30)) * _int64(SPLITMIX_MIX1)
    z = (z ^ _shift_right(z, 27)) * _int64(SPLITMIX_MIX2)
    z = z ^ _shift_right(z, 31)
    return _shift_right(z, 40).float().mul_(2.0**-24)


def gumbel_noise(seed: int, position: int, vocab_size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """float32 ``[vocab_size]``: ``G = -log E`` with ``E ~ Exp(1)`` per entry, from the uniforms
    of a key of ``(seed, position)`` only (``E = -log(1 - u)``, floored at half the grid's first
    step). The native library's ``specpath_gumbel`` where it is built, else :func:`_log` in torch:
    the same float32 operations in the same order, so the same bits."""
    from specpath_engine.modeling.native import kernels

    key = stream_key(seed ^ _NOISE_SALT, position)
    native = kernels()
    if native is not None:
        return native.gumbel(key, vocab_size, _FIRST_STEP).to(device)
    e = _log(_ONE - uniforms(key, vocab_size)).neg_().clamp_min_(_FIRST_STEP)  # 1 - u is exact: u = k 2**-24
    return _log(e).neg_().to(device)


def _f32(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


_ONE, _HALF_LN = _f32(1.0), _f32(0.707106781186547524)
_LOG_POLY = tuple(map(_f32, (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                             -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)))
_LN2_LOW, _MINUS_HALF, _LN2_HIGH = _f32(-2.12194440e-4), _f32(-0.5), _f32(0.693359375)


def _log(x: torch.Tensor) -> torch.Tensor:
    """Natural log of positive normal float32 ``x``, as ``uniforms.c``'s ``log16`` computes it
    (each multiply and add a float32 op of its own, in its order): ``x = m 2**e`` with ``m`` in
    [sqrt(1/2), sqrt(2)), a degree-9 polynomial in ``f = m - 1`` (the Cephes single-precision
    minimax coefficients, ~1 ulp), then ``e log 2`` in two parts. Not torch's ``log``: its bits
    are the machine's vector library's."""
    bits = x.view(torch.int32)
    e = (bits >> 23) - 126
    m = ((bits & 0x007FFFFF) | 0x3F000000).view(torch.float32)  # [1/2, 1)
    low = m < _HALF_LN
    e = e - low.to(torch.int32)
    f = torch.where(low, m + m, m) - _ONE
    ef = e.to(torch.float32)
    z = f * f
    y = _LOG_POLY[0] * f
    for c in _LOG_POLY[1:]:
        y = (y + c) * f
    y = y * z
    y = y + ef * _LN2_LOW
    y = y + z * _MINUS_HALF
    return (f + y) + ef * _LN2_HIGH


class SeededNoise:
    """One seeded request's noise (``specpath.speculator.SamplingNoise``), cached by position.

    A step asks for the positions from the step's first new token on (the drafter for its
    drafts, then the verifier for those and the bonus position); positions before the first one
    asked are never asked again and are dropped, so a request holds at most ``K + 1`` vectors.
    """

    __slots__ = ("seed", "vocab_size", "device", "_cache")

    def __init__(self, seed: int, vocab_size: int, device: torch.device | str = "cpu") -> None:
        self.seed = seed
        self.vocab_size = vocab_size
        self.device = torch.device(device)
        self._cache: dict[int, torch.Tensor] = {}

    def gumbel(self, first: int, count: int) -> torch.Tensor:
        """float32 ``[count, vocab]``: the noise at positions ``first .. first + count - 1``."""
        cache = self._cache
        for p in [p for p in cache if p < first]:
            del cache[p]
        rows = []
        for p in range(first, first + count):
            row = cache.get(p)
            if row is None:
                row = cache[p] = gumbel_noise(self.seed, p, self.vocab_size, self.device)
            rows.append(row)
        if not rows:
            return torch.empty(0, self.vocab_size, device=self.device)
        return torch.stack(rows)
