"""``SpecDecodeMetadata``: one engine step's layout of drafts and logits, built once.

The runner flattens a step as, per scheduled request, its new tokens (a prefill chunk or the
last sampled token) followed by its drafts. The target pass returns logits only at the rows that
decide a token: for a request that samples this step, its last new token and each draft. Those
rows, request after request, form the step's *logits*; per sampling request ``j`` with
``n_j`` drafts they are ``n_j`` target rows (the distribution each draft is checked against)
then one bonus row. Example, three scheduled requests, the second a prefill chunk that does not
sample::

    scheduled          r0: 1 new + 2 drafts    r1: 4 new, no sample    r2: 1 new + 1 draft
    flattened rows     0 | 1 2                 3 4 5 6                 7 | 8
    logits_indices     0 1 2                                           7 8
    sampling           (0, 2)
    num_draft_tokens   (2, 1)
    logits_start       (0, 3)     target_logits_indices (0, 1, 3)     bonus_logits_indices (2, 4)

Verification reads this object instead of recomputing row indices (vLLM's ``SpecDecodeMetadata``
plays the same part).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import torch

if TYPE_CHECKING:  # pragma: no cover
    from specpath_engine.tree_layout import Tree


@attrs.frozen(kw_only=True)
class SpecDecodeMetadata:
    """The step's verification layout (see the module docstring); ``S`` = sampling requests."""

    num_query_tokens: tuple[int, ...]
    """Per scheduled request: rows it takes in the flattened batch (new tokens + drafts)."""
    sampling: tuple[int, ...]
    """Indices (into the step's scheduled requests) of those that sample a token, [S]."""
    draft_token_ids: tuple[tuple[int, ...], ...]
    """Per sampling request, its drafts in order, [S][n_j] (a tree's nodes in node order)."""
    trees: tuple[Tree | None, ...] | None
    """Per sampling request, the tree its drafts form, or None for a chain; None: all chains."""
    logits_indices: tuple[int, ...]
    """Flattened-batch rows whose logits the target pass returns, [sum(n_j + 1)]."""
    device: Any = "cpu"

    @classmethod
    def build(cls, num_new_tokens: Sequence[int], samples: Sequence[bool], drafts: Sequence[Sequence[int]],
              trees: Sequence[Tree | None] | None, device: Any = "cpu") -> SpecDecodeMetadata:
        """From each scheduled request's new-token count, whether it samples, its drafts and
        (where the engine verifies trees) its tree."""
        num_query, sampling, logits_indices, row = [], [], [], 0
        for i, (n, s, d) in enumerate(zip(num_new_tokens, samples, drafts)):
            q = n + len(d)
            if s:
                sampling.append(i)
                logits_indices.extend(range(row + n - 1, row + q))
            num_query.append(q)
            row += q
        chosen = None if trees is None else tuple(trees[i] for i in sampling)
        return cls(num_query_tokens=tuple(num_query), sampling=tuple(sampling),
                   draft_token_ids=tuple(tuple(drafts[i]) for i in sampling),
                   trees=chosen if chosen is not None and any(t is not None for t in chosen) else None,
                   logits_indices=tuple(logits_indices), device=device)

    def select(self, js: Sequence[int]) -> SpecDecodeMetadata:
        """The metadata of sampling requests ``js`` alone (their logits rows, in order, are
        :meth:`logits_rows_of` ``js`` of this one); ``logits_indices`` are not carried."""
        return SpecDecodeMetadata(
            num_query_tokens=(), sampling=tuple(self.sampling[j] for j in js),
            draft_token_ids=tuple(self.draft_token_ids[j] for j in js),
            trees=None if self.trees is None else tuple(self.trees[j] for j in js),
            logits_indices=(), device=self.device)

    @property
    def num_draft_tokens(self) -> list[int]:
        """Drafts of each sampling request, [S]."""
        return [len(d) for d in self.draft_token_ids]

    @property
    def logits_start(self) -> list[int]:
        """First logits row of each sampling request, [S]: ``sum(n_i + 1 for i < j)``."""
        starts, row = [], 0
        for d in self.draft_token_ids:
            starts.append(row)
            row += len(d) + 1
        return starts

    @property
    def bonus_logits_indices(self) -> torch.Tensor:
        """Logits row of each request's bonus token, int64 [S]."""
        rows = [s + len(d) for s, d in zip(self.logits_start, self.draft_token_ids)]
        return torch.tensor(rows, dtype=torch.int64, device=self.device)

    @property
    def target_logits_indices(self) -> torch.Tensor:
        """Logits rows the drafts are checked against, request after request, int64 [sum(n_j)]."""
        rows = [s + k for s, d in zip(self.logits_start, self.draft_token_ids) for k in range(len(d))]
        return torch.tensor(rows, dtype=torch.int64, device=self.device)

    @property
    def flat_draft_token_ids(self) -> torch.Tensor:
        """Every draft, request after request, int32 [sum(n_j)] (``rejection_sample``'s layout)."""
        return torch.tensor([t for d in self.draft_token_ids for t in d], dtype=torch.int32, device=self.device)

    def logits_rows_of(self, js: Sequence[int]) -> torch.Tensor:
        """The logits rows of sampling requests ``js``, in order, int64 [sum(n_j + 1)]."""
        rows = [r for j in js for r in range(self.logits_start[j], self.logits_start[j] + len(self.draft_token_ids[j]) + 1)]
        return torch.tensor(rows, dtype=torch.int64, device=self.device)

    @property
    def tree_positions(self) -> list[int]:
        """Positions ``j`` (into ``sampling``) verified as trees."""
        return [] if self.trees is None else [j for j, t in enumerate(self.trees) if t is not None]

    @property
    def chain_positions(self) -> list[int]:
        """Positions ``j`` (into ``sampling``) verified as chains."""
        return list(range(len(self.sampling))) if self.trees is None else [
            j for j, t in enumerate(self.trees) if t is None]
