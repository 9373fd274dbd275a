"""Per-request random numbers, drawn on the host side before any kernel runs.

Each request draws from its own ``torch.Generator`` (or, when it has none, from torch's default
generator), in an order that depends only on the request itself: first its acceptance uniforms,
one per draft position, then, only if it rejected a draft on a random row, one row of
exponential noise over the vocabulary for the corrected token. So a seeded request emits the
same tokens in every run and whatever else shares its batch. Because the numbers are tensors
handed to the kernels, the torch and Triton paths consume identical randomness and can be
compared exactly.
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


def _draw(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device, kind: str) -> torch.Tensor:
    draw_device = generator.device if generator is not None else device
    out = torch.empty(shape, device=draw_device)
    if kind == "uniform":
        out.uniform_(generator=generator)
    else:
        out.exponential_(generator=generator)
    return out.to(device)


def draw_uniforms(
    needs: Sequence[bool], counts: Sequence[int], generators: list[torch.Generator | None], device: torch.device,
) -> torch.Tensor:
    """float32 ``[sum(counts)]`` uniforms in [0, 1), one per draft position of each request
    with ``needs[r]`` (zeros elsewhere). Requests without a generator share one batched draw."""
    uniforms = torch.zeros(sum(counts), device=device)
    unseeded = [need and g is None for need, g in zip(needs, generators)]
    if any(unseeded):
        mask = torch.tensor(unseeded).repeat_interleave(torch.tensor(counts, dtype=torch.long)).to(device)
        uniforms[mask] = _draw((int(mask.sum()),), None, device, "uniform")
    start = 0
    for need, g, count in zip(needs, generators, counts):
        if need and g is not None and count:
            uniforms[start : start + count] = _draw((count,), g, device, "uniform")
        start += count
    return uniforms


def draw_inverse_noise(
    requests: Sequence[int], vocab: int, generators: list[torch.Generator | None], device: torch.device,
) -> torch.Tensor:
    """float32 ``[len(requests), vocab]`` of 1/E with E ~ Exp(1): ``argmax(w * inverse_noise)``
    is an exact sample of the (unnormalised) weights ``w`` (the exponential race)."""
    noise = torch.empty((len(requests), vocab), device=device)
    unseeded = [i for i, r in enumerate(requests) if generators[r] is None]
    if unseeded:
        noise[torch.tensor(unseeded, device=device)] = _draw((len(unseeded), vocab), None, device, "exponential")
    for i, r in enumerate(requests):
        if generators[r] is not None:
            noise[i] = _draw((vocab,), generators[r], device, "exponential")
    return noise.clamp_min_(torch.finfo(torch.float32).tiny).reciprocal_()
