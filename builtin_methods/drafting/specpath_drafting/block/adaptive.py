"""Adaptive verification: how many of its drafts each request verifies this step, chosen from
per-draft acceptance estimates (DSpark's confidence head; DFlash's draft probabilities).

Truncating a draft never changes the output distribution *as long as the decision to verify
draft j does not depend on draft j itself*: the estimates of draft j may read drafts < j and
the block's hidden states, never the token drafted at j (the non-anticipation rule, DSpark
App. A). Both schedulers below only look at estimates in prefix order and stop there.

- :func:`threshold_lengths`: keep the prefix up to the first estimate below a threshold.
- :func:`prefix_schedule`: DSpark's Algorithm 1. Pairs (request, j) are admitted in decreasing
  prefix survival ``a_{r,j} = prod_{i<=j} c_{r,i}``; ``Theta = tau* x SPS(tokens)`` trades the
  expected emitted tokens against the verify pass's speed; the first admission that does not
  raise ``Theta`` stops the search (without that early stop the choice could depend on
  realised drafts and stop being lossless).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import torch


@attrs.frozen(kw_only=True)
class VerifyCost:
    """Seconds of one verify pass as ``overhead + per_token * tokens`` (the profile the prefix
    scheduler reads as steps per second). The default is what this project measured for its
    ~2-5 M parameter targets on CPU: a forward call costs ~6 ms almost regardless of the
    number of tokens (DESIGN.md, performance notes)."""

    overhead: float = 6.0e-3
    per_token: float = 5.0e-5

    def steps_per_second(self, tokens: int) -> float:
        return 1.0 / (self.overhead + self.per_token * tokens)

    @classmethod
    def from_config(cls, value: object) -> VerifyCost:
        """``config.json`` ``verify_cost``: ``[overhead_s, per_token_s]`` (else the default)."""
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
            return cls(overhead=float(value[0]), per_token=float(value[1]))
        return cls()


def threshold_lengths(confidences: torch.Tensor, budgets: Sequence[int], threshold: float) -> list[int]:
    """Per request, the number of leading drafts whose estimate is >= ``threshold`` (capped by
    its budget). ``confidences`` [R, K]."""
    ok = (confidences >= threshold).to(torch.int64)
    lead = ok.cumprod(dim=1).sum(dim=1).tolist()
    return [min(int(n), int(b)) for n, b in zip(lead, budgets)]


def prefix_schedule(confidences: torch.Tensor, budgets: Sequence[int],
                    steps_per_second: Callable[[int], float]) -> list[int]:
    """DSpark's prefix scheduler with its early stop (see the module docstring)."""
    r = confidences.shape[0]
    survival = confidences.double().clamp(0.0, 1.0).cumprod(dim=1).tolist()
    pairs = sorted(((survival[i][j], j, i) for i in range(r) for j in range(min(int(budgets[i]), len(survival[i])))),
                   key=lambda t: (-t[0], t[1], t[2]))
    lengths = [0] * r
    tokens = r  # each request verifies at least its pending token
    expected = float(r)  # tau*: the bonus/corrected token of each request
    theta = expected * steps_per_second(tokens)
    for a, j, i in pairs:
        if j != lengths[i]:  # survival is non-increasing in j, so this only happens on ties
            break
        new_theta = (expected + a) * steps_per_second(tokens + 1)
        if new_theta <= theta:
            break
        lengths[i] += 1
        tokens += 1
        expected += a
        theta = new_theta
    return lengths


def schedule(confidences: torch.Tensor, budgets: Sequence[int], *, threshold: float | None,
             cost: VerifyCost) -> list[int]:
    """The static threshold when one is configured, else the prefix scheduler."""
    if threshold is not None:
        return threshold_lengths(confidences, budgets, threshold)
    return prefix_schedule(confidences, budgets, cost.steps_per_second)
