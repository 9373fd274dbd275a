"""Per-request random numbers, drawn on the host side before any kernel runs.

A request that needs randomness and has ``K >= 1`` drafts draws ``K + 1`` uniforms from its own
``torch.Generator`` (or, when it has none, from torch's default generator) in a fixed order: one
per draft position for the acceptance coins, then one that picks the corrected token if a draft
is rejected. A request without drafts draws nothing (it only emits its bonus token), so being
verified beside drafting requests never moves its stream. The count and order depend only on
the request, so a seeded request emits the same tokens in every run and whatever else shares
its batch. Engines can go further with :func:`position_generator` (and :func:`draft_generator`
for the drafter): a fresh generator per step keyed by the request's seed and the step's first
position, so the numbers depend on nothing else at all, not even on a preemption that re-runs
the request's steps. Because the numbers are tensors handed
to the kernels, the torch and Triton paths consume identical randomness and can be compared
exactly. A seeded request in the reference engine's standard mode uses none of this: its tokens
are race winners on per-position noise (:mod:`specpath_engine.sample.noise`), so they do not
depend on its drafts either.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

Generators = Sequence["torch.Generator | int | None"]


def resolve_generators(generators: Generators | None, batch: int) -> list[torch.Generator | None]:
    """One generator or None per request; an int seeds a fresh generator for this call only
    (engines keep one generator per request across steps instead)."""
    if generators is None:
        return [None] * batch
    resolved: list[torch.Generator | None] = []
    for g in generators:
        if isinstance(g, int) and not isinstance(g, bool):
            g = torch.Generator().manual_seed(g)
        resolved.append(g)
    return resolved


_MASK64 = (1 << 64) - 1


SPLITMIX_GOLDEN, SPLITMIX_MIX1, SPLITMIX_MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
"""splitmix64's increment and multipliers (the seeded noise's uniforms use them too: noise.py, uniforms.c)."""


def _splitmix64(x: int) -> int:
    x = (x + SPLITMIX_GOLDEN) & _MASK64
    x = ((x ^ (x >> 30)) * SPLITMIX_MIX1) & _MASK64
    x = ((x ^ (x >> 27)) * SPLITMIX_MIX2) & _MASK64
    return x ^ (x >> 31)


def stream_key(seed: int, position: int) -> int:
    """A 64-bit key that is a function of ``(seed, position)`` only (splitmix64 of both)."""
    return _splitmix64(_splitmix64(seed & _MASK64) ^ (position & _MASK64))


def position_generator(seed: int, position: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator whose stream is a function of ``(seed, position)`` only (:func:`stream_key`):
    an engine makes one per sampling request per step, at the position of the step's first new
    token, and draws the bonus token and the verification uniforms from it."""
    return torch.Generator(device=device).manual_seed(stream_key(seed, position))


_DRAFT_SALT = 0x5D5A_0D7A_F7E5_D1A1  # keeps the drafter's stream apart from the verifier's


def draft_generator(seed: int, position: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The drafter's generator for a step whose first draft lands at ``position``: like
    :func:`position_generator` a function of ``(seed, position)`` only, on its own stream, so a
    step re-run after preemption drafts the same tokens."""
    return position_generator(seed ^ _DRAFT_SALT, position, device)


def draw_uniforms(
    needs: Sequence[bool], counts: Sequence[int], generators: list[torch.Generator | None], device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(float32 ``[sum(counts)]`` acceptance uniforms, float32 ``[batch]`` recovery uniforms),
    in [0, 1), for the requests with ``needs[r]`` and at least one draft (zeros for the others).
    Requests without a generator share one batched draw."""
    batch = len(counts)
    needs = [need and count > 0 for need, count in zip(needs, counts)]
    drawn = torch.zeros(sum(counts) + batch)
    slots = torch.tensor(counts, dtype=torch.long) + 1
    unseeded = [need and g is None for need, g in zip(needs, generators)]
    if any(unseeded):
        mask = torch.tensor(unseeded).repeat_interleave(slots)
        drawn[mask] = torch.rand(int(mask.sum()))
    seeded = [need and g is not None for need, g in zip(needs, generators)]
    if any(seeded):
        own = [torch.rand(count + 1, generator=g, device=g.device).cpu()
               for count, g, s in zip(counts, generators, seeded) if s]
        drawn[torch.tensor(seeded).repeat_interleave(slots)] = torch.cat(own)
    ends = torch.tensor(counts, dtype=torch.long).cumsum(0) + torch.arange(batch)
    accept = torch.ones(drawn.numel(), dtype=torch.bool)
    accept[ends] = False
    return drawn[accept].to(device), drawn[ends].to(device)
