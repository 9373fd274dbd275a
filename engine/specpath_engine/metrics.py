"""Speculation metrics, per request and over a whole ``generate`` call.

Definitions (the ones engine users know):

- ``num_drafts``: verification steps in which the request had at least one draft token;
- ``num_draft_tokens`` / ``num_accepted_tokens``: drafts proposed / accepted over those steps;
- ``mean_acceptance_length`` (τ): tokens emitted per verification step, counting the bonus or
  recovered token: ``1 + num_accepted_tokens / num_drafts`` (1.0 without drafts);
- ``acceptance_rate_by_position[i]``: of the drafts proposed at depth ``i``, the fraction accepted;
- ``tokens_per_s``: generated tokens over wall time (from arrival to finish, or over the call);
- ``num_backoff_steps``: decoding steps in which the request could draft but the adaptive
  draft-length policy chose plain decoding (drafting did not pay at its running acceptance and
  the step's measured costs);
- ``step_costs`` (aggregate only, adaptive policy only): the engine's fitted costs
  (``specpath_engine.step_costs.StepCosts.summary``): a plain single-request step in ms, and
  the cost per extra row, per drafting request, per pass, ... as fractions of it; the probes;
  and the engine-wide guard's verdict (``guard_*``, :mod:`specpath_engine.drafting_guard`):
  whether it backs drafting off, the last measured drafting-over-plain throughput, its back-offs,
  exploration bursts and the current gap between them in steps.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs


@attrs.define(kw_only=True)
class SpecMetrics:
    """Counters of one request, or summed over many."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_generated_tokens: int = 0
    num_steps: int = 0
    """Target forward passes in which the request emitted tokens (prefill's last chunk included)."""
    num_cached_tokens: int = 0
    """Prompt positions whose KV came from the prefix cache."""
    num_backoff_steps: int = 0
    """Decoding steps the draft-length policy ran without drafts (see the module docstring)."""
    drafted_by_position: list[int] = attrs.field(factory=list)
    accepted_by_position: list[int] = attrs.field(factory=list)
    elapsed_s: float = 0.0
    """Wall time the tokens took (request: arrival to finish; aggregate: the whole call)."""
    step_costs: dict | None = None
    """The draft-length policy's fitted costs at the end of the call (aggregate; None: fixed K)."""

    def record_verification(self, num_drafted: int, num_accepted: int) -> None:
        """One verification step: ``num_drafted`` drafts, the first ``num_accepted`` accepted."""
        self.num_steps += 1
        if num_drafted == 0:
            return
        self.num_drafts += 1
        self.num_draft_tokens += num_drafted
        self.num_accepted_tokens += num_accepted
        grow = num_drafted - len(self.drafted_by_position)
        if grow > 0:
            self.drafted_by_position.extend([0] * grow)
            self.accepted_by_position.extend([0] * grow)
        for i in range(num_drafted):
            self.drafted_by_position[i] += 1
        for i in range(num_accepted):
            self.accepted_by_position[i] += 1

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 1.0

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def acceptance_rate_by_position(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.accepted_by_position, self.drafted_by_position)]

    @property
    def tokens_per_s(self) -> float:
        return self.num_generated_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict:
        """The JSON shape of ``specpath run --json``."""
        return {
            "num_drafts": self.num_drafts,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_tokens": self.num_accepted_tokens,
            "mean_acceptance_length": self.mean_acceptance_length,
            "acceptance_rate_by_position": self.acceptance_rate_by_position,
            "tokens_per_s": self.tokens_per_s,
            "num_generated_tokens": self.num_generated_tokens,
            "num_steps": self.num_steps,
            "num_cached_tokens": self.num_cached_tokens,
            "num_backoff_steps": self.num_backoff_steps,
            **({"step_costs": self.step_costs} if self.step_costs is not None else {}),
        }

    @classmethod
    def total(cls, parts: Iterable[SpecMetrics], *, elapsed_s: float) -> SpecMetrics:
        """Sum of ``parts``, with the wall time of the call that produced them."""
        out = cls(elapsed_s=elapsed_s)
        for m in parts:
            out.num_drafts += m.num_drafts
            out.num_draft_tokens += m.num_draft_tokens
            out.num_accepted_tokens += m.num_accepted_tokens
            out.num_generated_tokens += m.num_generated_tokens
            out.num_steps += m.num_steps
            out.num_cached_tokens += m.num_cached_tokens
            out.num_backoff_steps += m.num_backoff_steps
            grow = len(m.drafted_by_position) - len(out.drafted_by_position)
            if grow > 0:
                out.drafted_by_position.extend([0] * grow)
                out.accepted_by_position.extend([0] * grow)
            for i, (d, a) in enumerate(zip(m.drafted_by_position, m.accepted_by_position)):
                out.drafted_by_position[i] += d
                out.accepted_by_position[i] += a
        return out
