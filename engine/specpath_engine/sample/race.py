"""The seeded sampling rule and the verification it makes exact by construction.

A seeded request's token at position ``p`` is ``y_p = argmax_v probs_p[v] / E_p[v]``, computed as
``argmax_v processed_p[v] + G_p[v]`` (:func:`race_tokens`): ``processed_p`` is the target's
processed logits at ``p`` (temperature, top-k, top-p, exactly as
:func:`~specpath_engine.sample.processing.target_probs`) and ``G_p`` the request's noise there
(:mod:`specpath_engine.sample.noise`). Plain decoding samples with this rule.

Verification of a chain computes ``y`` at every draft position and at the bonus position (one
target pass gives all their logits), keeps drafts while ``draft == y`` and emits the first
mismatching ``y`` (or the bonus ``y``): the host walk greedy chains use
(:func:`~specpath_engine.sample.greedy.accept_greedy_chains`), on race winners instead of argmaxes.
The emitted tokens are plain decoding's samples, so the method is lossless whatever the drafts;
a deterministic draft ``x`` is accepted with probability ``p(x)``, as token-wise rejection
sampling accepts it, and a draft that raced on the same noise over a distribution close to the
target's is accepted far more often. Trees do the same walk from the root
(:func:`~specpath_engine.sample.tree_verification.verify_trees`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specpath_engine.sample.greedy import accept_greedy_chains, greedy_ids
from specpath_engine.sample.processing import processed_logits


def race_tokens(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor | None,
    top_p: torch.Tensor | None,
    gumbel: torch.Tensor,
) -> torch.Tensor:
    """int64 ``[rows]``: each row's race winner. ``logits`` and ``gumbel`` ``[rows, V]``; the
    sampling parameters one per row (``top_k``/``top_p`` None: no filter); every row samples."""
    return greedy_ids(processed_logits(logits, temperature, top_k, top_p) + gumbel)


def verify_chains(
    drafts: Sequence[Sequence[int]],
    logits: torch.Tensor,
    temperature: Sequence[float],
    top_k: Sequence[int] | None,
    top_p: Sequence[float] | None,
    gumbel: torch.Tensor,
) -> list[list[int]]:
    """Emitted tokens per request (accepted drafts, then one race winner). ``logits`` and
    ``gumbel`` ``[sum(len(d) + 1), V]``: each request's draft positions then its bonus position,
    requests in order."""
    sizes = torch.tensor([len(d) + 1 for d in drafts], dtype=torch.long)
    dev = logits.device

    def per_row(values, dtype):
        return torch.tensor(values, dtype=dtype).repeat_interleave(sizes).to(dev)

    winners = race_tokens(logits, per_row(temperature, torch.float32),
                          None if top_k is None else per_row(top_k, torch.long),
                          None if top_p is None else per_row(top_p, torch.float32), gumbel)
    return accept_greedy_chains(drafts, winners.tolist())
