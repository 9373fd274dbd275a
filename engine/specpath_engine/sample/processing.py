"""Turn target logits into the distribution a token is sampled from.

The verifier must judge a draft against exactly the distribution the target would have
sampled the token from, so temperature, top-k and top-p are applied here, in the same way
and in the same order as for the bonus token: scale by temperature, mask outside the top-k,
mask outside the top-p nucleus, softmax. Engines sample their bonus tokens from
:func:`target_probs` too, so both sides can never drift apart.
"""

from __future__ import annotations

import torch

GREEDY_EPS = 1e-5
"""Temperatures below this are greedy (argmax); dividing by them would overflow anyway."""


def is_greedy(temperature: torch.Tensor) -> torch.Tensor:
    """Bool mask of the greedy rows of a temperature vector."""
    return temperature < GREEDY_EPS


def target_probs(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor | None = None,
    top_p: torch.Tensor | None = None,
) -> torch.Tensor:
    """float32 probabilities ``[rows, vocab]`` from logits and per-row sampling parameters.

    ``temperature``, ``top_k`` and ``top_p`` hold one value per row. ``top_k`` of 0 (or >= vocab)
    and ``top_p`` of 1 disable those filters. Greedy rows get the plain softmax (temperature 1,
    no filters): verification decides them by argmax and reads their probabilities only for
    FLy's entropy gate.
    """
    return torch.softmax(processed_logits(logits, temperature, top_k, top_p), dim=-1)


def processed_logits(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor | None = None,
    top_p: torch.Tensor | None = None,
) -> torch.Tensor:
    """float32 ``[rows, vocab]``: what :func:`target_probs` takes the softmax of (logits over the
    temperature, ``-inf`` outside the top-k and the top-p nucleus): the log-probabilities up to
    a constant per row, which is all the seeded race (:mod:`specpath_engine.sample.race`) needs."""
    greedy = is_greedy(temperature)
    scale = torch.where(greedy, torch.ones_like(temperature), temperature).float()
    if bool((scale != 1).any()):
        logits = logits.float() / scale[:, None]
    else:  # the filters below write in place: never into the caller's tensor
        logits = logits.float().clone() if top_k is not None or top_p is not None else logits.float()
    vocab = logits.shape[-1]
    if top_k is not None:
        k = torch.where(greedy | (top_k <= 0) | (top_k >= vocab), 0, top_k).long()
        rows = (k > 0).nonzero().squeeze(1)
        if rows.numel():
            sub = logits[rows]
            kth = sub.topk(int(k[rows].max()), dim=-1).values.gather(1, (k[rows] - 1)[:, None])
            logits[rows] = sub.masked_fill(sub < kth, float("-inf"))
    if top_p is not None:
        rows = ((top_p < 1.0) & ~greedy).nonzero().squeeze(1)
        if rows.numel():
            logits[rows] = _mask_top_p(logits[rows], top_p[rows].float())
    return logits


def _mask_top_p(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches ``top_p`` (at least one)."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    drop = mass_before >= top_p[:, None]
    drop[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(1, order, sorted_logits)
