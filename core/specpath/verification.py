"""Verification modes and acceptance-rate maths: one torch-free truth for config and sampler.

The config layer validates ``rejection_sample_method`` and the synthetic schedule; the
sampler (``specpath_engine.sample``, torch) runs them. Both read the names and the maths here, so a
new mode or a changed schedule cannot drift between the two.

Rates are *unconditional*: ``a_i`` is the probability that the first ``i+1`` drafts are all
accepted, so the mean number of emitted tokens is ``1 + sum(a)``. A kernel needs the
*conditional* rate of each position given that all earlier ones were accepted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, get_args

RejectionSampleMethod = Literal["standard", "synthetic", "block", "fly"]
"""The verification modes (the ``rejection_sample_method`` field, ``rejection_sample(method=)``)."""

VERIFICATION_MODES: tuple[str, ...] = get_args(RejectionSampleMethod)

LOSSLESS_METHODS = frozenset({"standard", "block"})
"""Modes whose output follows the target distribution exactly."""

LOSSY_METHODS = frozenset(VERIFICATION_MODES) - LOSSLESS_METHODS
"""Modes that may change the output distribution (warned about, and marked)."""

TREE_VERIFY_METHODS = frozenset({"standard"})
"""Modes in which the reference engine verifies token trees (``DraftProposal.tree``); block,
FLy and synthetic verification are defined on chains, so drafters propose chains there."""


def acceptance_length_to_rates(length: float, num_positions: int) -> list[float]:
    """Minimum-variance unconditional rates whose mean emitted length is ``length``.

    ``n = length - 1`` drafts are accepted on average: the first ``floor(n)`` always, the next
    with probability ``n - floor(n)``, none after, so the accepted count is always floor(n)
    or floor(n) + 1. Capped at ``num_positions`` accepted drafts.
    """
    if not (isinstance(length, (int, float)) and math.isfinite(length) and length >= 1):
        raise ValueError(f"acceptance_length={length!r} must be a finite number >= 1")
    n = float(length) - 1
    whole = math.floor(n)
    rates = [1.0] * whole + [n - whole] + [0.0] * num_positions
    return rates[:num_positions]


def check_rates(rates: Sequence[float]) -> list[float]:
    """Validate unconditional rates: each in [0, 1], non-increasing."""
    rates = [float(a) for a in rates]
    for i, a in enumerate(rates):
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"acceptance_rates[{i}]={a!r} is outside [0, 1]")
        if i and a > rates[i - 1]:
            raise ValueError(f"acceptance_rates must be non-increasing; [{i}]={a!r} > [{i - 1}]={rates[i - 1]!r}")
    return rates


def conditional_rates(rates: Sequence[float]) -> list[float]:
    """P(position i accepted | positions before it accepted): ``a_1``, then ``a_i / a_(i-1)``
    (at most 1), and 0 once a rate has reached 0."""
    out: list[float] = []
    prev = 1.0
    for a in rates:
        out.append(min(1.0, a / prev) if prev > 0 else 0.0)
        prev = a
    return out
