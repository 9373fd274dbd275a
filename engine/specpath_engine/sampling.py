"""Sampling of the token at each request's bonus position.

Random rows use the verifier's own logits processing (``specpath_engine.sample.processing``), so the
bonus token and the verification of drafts see the very same distribution. Each sampling request
draws from its own generator, so its tokens do not depend on the batch. A seeded request under
standard verification is sampled by the race instead (``specpath_engine.sample.race``), which also
makes its tokens independent of the drafts.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specpath_engine.sample.greedy import greedy_ids


def sample_tokens(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor | None,
    top_p: torch.Tensor | None,
    generators: Sequence[torch.Generator | None],
    random_rows: Sequence[int],
) -> torch.Tensor:
    """int64 ``[rows]``: argmax for greedy rows, a draw for ``random_rows``."""
    tokens = greedy_ids(logits)
    if random_rows:
        from specpath_engine.sample.processing import target_probs

        rows = torch.tensor(random_rows, dtype=torch.int64, device=logits.device)
        probs = target_probs(
            logits.index_select(0, rows),
            temperature.index_select(0, rows),
            None if top_k is None else top_k.index_select(0, rows),
            None if top_p is None else top_p.index_select(0, rows),
        )
        for j, row in enumerate(random_rows):
            tokens[row] = torch.multinomial(probs[j], 1, generator=generators[row])[0]
    return tokens
