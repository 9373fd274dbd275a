"""How often a drafter's own estimates come true: its path chances mapped to acceptance.

A drafter's estimate that a draft (and every draft before it) is accepted, its path chance, is
what the step needs to cut drafts that do not pay (:mod:`specpath_engine.draft_worth`), but it is
not a probability of acceptance as it stands. SmolLM2's EAGLE-3 head is about right for its first
draft and under-confident deeper, more so the less likely a path (held-out prompts, K=4 chain,
bf16, greedy; share accepted by the head's path chance):

=========  ==========  ==========  ==========  ==========
depth      0.05-0.10   0.10-0.20   0.20-0.30   0.30-0.40
=========  ==========  ==========  ==========  ==========
first      0.05        0.18        0.37        0.47
second     0.17        0.28        0.45        0.56
third      0.20        0.31        0.50        0.54
=========  ==========  ==========  ==========  ==========

So one scale for all cut deep drafts that paid. :class:`Calibration` keeps, per bin of path
chance and for the first draft apart from the deeper ones, the drafts verified and those
accepted (each bin forgetting its old drafts), from a prior of a few drafts at the drafter's own
estimate, and maps an estimate to its bin's acceptance. Verification decides what is emitted;
this only decides what is verified, so a wrong map costs speed, never output.
"""

from __future__ import annotations

import bisect

EDGES = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9)
"""Upper edges of the bins of path chance but the last (0.9-1)."""

DECAY = 0.97
"""Weight of a bin's past drafts after each new one (about its last 30 count)."""

PRIOR = 3.0
"""Pseudo-drafts per bin at the drafter's own estimate (the map starts as the identity)."""

GROUPS = 2
"""The first draft (depth 0) and the deeper ones are mapped apart."""


class Calibration:
    """The map from a drafter's path chance (and a draft's depth) to the chance it is accepted."""

    def __init__(self) -> None:
        mids = [(lo + hi) / 2 for lo, hi in zip((0.0, *EDGES), (*EDGES, 1.0))]
        self._estimated = [[PRIOR * m for m in mids] for _ in range(GROUPS)]
        """Per group and bin, the decayed sum of the drafter's estimates of its verified drafts."""
        self._accepted = [[PRIOR * m for m in mids] for _ in range(GROUPS)]
        """Per group and bin, the decayed count of those drafts accepted."""

    @staticmethod
    def _where(estimate: float, depth: int) -> tuple[int, int]:
        return min(depth, GROUPS - 1), bisect.bisect_right(EDGES, estimate)

    def chance(self, estimate: float, depth: int) -> float:
        """The chance a draft at ``depth`` whose path the drafter put at ``estimate`` is accepted."""
        g, b = self._where(estimate, depth)
        return min(1.0, estimate * self._accepted[g][b] / max(self._estimated[g][b], 1e-12))

    def observe(self, estimate: float, depth: int, accepted: bool) -> None:
        """One verified draft: its depth, the drafter's path chance and whether it was accepted."""
        g, b = self._where(estimate, depth)
        self._estimated[g][b] = DECAY * self._estimated[g][b] + estimate
        self._accepted[g][b] = DECAY * self._accepted[g][b] + accepted

    def least_estimate(self, chance: float) -> float:
        """The least path chance of its own a drafter must give a draft past the first for it to be
        accepted with ``chance`` (the smallest estimate the map takes there, scanning the bins
        upward): what ``DraftRequest.min_draft_probability`` tells the drafter."""
        if chance <= 0:
            return 0.0
        g = GROUPS - 1
        for b, (lo, hi) in enumerate(zip((0.0, *EDGES), (*EDGES, 1.0))):
            ratio = self._accepted[g][b] / max(self._estimated[g][b], 1e-12)
            if hi * ratio >= chance:  # (just under hi: hi itself is the next bin's)
                return min(hi * (1 - 1e-9) if b < len(EDGES) else hi, max(lo, chance / max(ratio, 1e-12)))
        return 1.0

    def summary(self) -> dict[str, list[float]]:
        """Per group, each bin's acceptance per unit of estimate (1: the drafter's estimates hold)."""
        return {name: [round(a / max(e, 1e-12), 3) for a, e in zip(acc, est)]
                for name, acc, est in zip(("first_draft", "deeper"), self._accepted, self._estimated)}
