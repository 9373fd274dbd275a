"""How every drafter turns draft logits into drafts, with seeded requests coupled to the target.

A seeded request that samples carries its sampling noise (``DraftRequest.noise``): the engine
emits at position ``p`` the race winner ``argmax_v log probs_p[v] + G_p[v]``. Its draft at ``p`` is
the same race over the drafter's distribution, ``argmax_v logits_p[v] / T + G_p[v]``, computed as
``argmax_v logits_p[v] + T G_p[v]`` (the same token; additions only on the logits, so the native
drafting chain, given the scaled noise, picks the per-op chain's token to the bit), so whenever
the drafter's distribution is close to the target's the draft is the very token the target emits
(acceptance near 1 where independent draws accept ``sum min(p, q)`` and greedy drafts ``p(argmax q)``).
The verifier needs no draft probabilities for such a draft. With a reduced draft vocabulary the
noise is indexed by the target ids the draft ids stand for.

Other rows keep their rule: greedy (temperature 0, or ``draft_sample_method = "greedy"``) takes
the argmax; ``draft_sample_method = "random"`` samples from ``softmax(logits / T)`` with the
request's generator and hands the probabilities to the verifier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from specpath.speculator import DraftRequest


def coupled(request: DraftRequest) -> bool:
    """Whether ``request``'s drafts race on its sampling noise."""
    return request.noise is not None and request.temperature > 0


def request_noise(requests: Sequence[DraftRequest], count: int) -> list[torch.Tensor | None]:
    """Per request, its noise at its next ``count`` draft positions (float32 ``[count, V]``, draft
    ``j`` at position ``len(token_ids) + j``), or None for a request that is not coupled."""
    return [r.noise.gumbel(len(r.token_ids), count) if coupled(r) else None for r in requests]


def scaled_noise(noise: torch.Tensor, temperature: Sequence[float], vocab_ids: torch.Tensor | None = None) -> torch.Tensor:
    """float32 ``[R, Vd]``: ``T G`` per row in the draft vocabulary's order. ``noise`` ``[R, V]`` over
    the target vocabulary, ``vocab_ids`` ``[Vd]`` the target id of each draft id (None: the same
    vocabulary)."""
    if vocab_ids is not None:
        noise = noise.index_select(1, vocab_ids.to(noise.device))
    return noise.float() * torch.tensor(temperature, dtype=torch.float32, device=noise.device)[:, None]


def race(logits: torch.Tensor, temperature: Sequence[float], noise: torch.Tensor,
         vocab_ids: torch.Tensor | None = None) -> torch.Tensor:
    """int64 ``[R]`` draft-vocabulary ids: ``argmax(logits / T + G)`` per row, as
    ``argmax(logits + T G)``. ``logits`` ``[R, Vd]``; ``noise`` and ``vocab_ids`` as :func:`scaled_noise`."""
    return (logits.float() + scaled_noise(noise, temperature, vocab_ids).to(logits.device)).argmax(dim=-1)


def choose(logits: torch.Tensor, temperature: Sequence[float], generators: Sequence[Any],
           noise: Sequence[torch.Tensor | None], *, sample: bool, vocab_ids: torch.Tensor | None = None,
           argmax: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(draft ids int64 ``[R]``, float32 probabilities ``[R, Vd]`` they were drawn from or None)
    for draft rows ``logits`` ``[R, Vd]`` with one temperature, generator and noise row
    (``[V]`` or None) each: coupled rows race, the others are greedy or (``sample``) sampled;
    probabilities only when a row was sampled (one-hot for the others). ``argmax`` replaces the
    greedy rows' plain argmax (a vocabulary-sharded one, say)."""
    raced = [i for i, g in enumerate(noise) if g is not None]
    sampled = [i for i, t in enumerate(temperature) if sample and t > 0 and noise[i] is None]
    ids = argmax(logits) if argmax is not None else logits.argmax(dim=-1)
    if raced:
        rows = torch.tensor(raced, dtype=torch.int64, device=logits.device)
        ids[rows] = race(logits.index_select(0, rows), [temperature[i] for i in raced],
                         torch.stack([noise[i] for i in raced]), vocab_ids)
    if not sampled:
        return ids, None
    probs = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device)
    probs.scatter_(1, ids[:, None], 1.0)
    for i in sampled:
        probs[i] = torch.softmax(logits[i].float() / temperature[i], dim=-1)
        ids[i] = torch.multinomial(probs[i], 1, generator=generators[i])[0]
    return ids, probs
