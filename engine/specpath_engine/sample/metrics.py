"""Acceptance counts read off ``rejection_sample``'s output, for per-request and aggregate metrics."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specpath_engine.sample.rejection import PLACEHOLDER_TOKEN_ID


def num_accepted(output: torch.Tensor) -> torch.Tensor:
    """int64 ``[batch]``: drafts accepted per request (emitted tokens minus the final one)."""
    return (output != PLACEHOLDER_TOKEN_ID).sum(dim=1) - 1


def accepted_per_position(output: torch.Tensor, num_draft_tokens: Sequence[int] | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(accepted, drafted): int64 ``[max_k]`` each; ``accepted[i]`` requests kept their draft
    ``i``, out of ``drafted[i]`` that had one. Their ratio is the per-position acceptance rate."""
    counts = torch.as_tensor(num_draft_tokens, dtype=torch.long, device=output.device)
    max_k = output.shape[1] - 1
    position = torch.arange(max_k, device=output.device)
    accepted = (position < num_accepted(output)[:, None]).sum(dim=0)
    drafted = (position < counts[:, None]).sum(dim=0)
    return accepted, drafted
