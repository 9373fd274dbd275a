"""``NgramSpeculatorConfig`` and ``NgramGPUSpeculatorConfig``: the n-gram rows of the method
table, declared for every consumer.

No weights, no target hidden states, nothing written to the KV cache ahead of the target
(lookahead 0) and no extra query rows (extra slots 0); the drafter scans each request's
whole token history, so it prefers that history dense. Both methods share the fields
``prompt_lookup_min``/``prompt_lookup_max`` of the speculative config; they differ only in
where the scan runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from specpath.config.speculator import SpeculatorConfig

DEFAULT_PROMPT_LOOKUP = 5
"""The window when neither end is given (the article's default, chosen, not tuned)."""


def prompt_lookup_window(min_n: int | None, max_n: int | None) -> tuple[int, int]:
    """Fill the window's missing ends: none given -> both default; one given -> the other
    copies it. ``min_n > max_n`` is left for the core's start-up check to reject."""
    if min_n is None and max_n is None:
        return DEFAULT_PROMPT_LOOKUP, DEFAULT_PROMPT_LOOKUP
    if min_n is None:
        return max_n, max_n
    if max_n is None:
        return min_n, min_n
    return min_n, max_n


@attrs.frozen(kw_only=True)
class NgramSpeculatorConfig(SpeculatorConfig):
    """Prompt lookup on the host (numba), or with the Triton kernel on a CUDA device."""

    base_method = "ngram"
    speculator_class = "specpath_ngram.speculator:NgramSpeculator"
    tolerates_skipped_steps = True
    """Catches up on every position since in one pass (tests/engine/test_draft_governor.py)."""
    prefer_dense_token_history = True
    supports_variable_draft_length = True
    model_free = True
    """Each request gets its own draft budget (``DraftRequest.max_draft_tokens``) every step."""

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        min_n, max_n = prompt_lookup_window(spec.prompt_lookup_min, spec.prompt_lookup_max)
        return {**super().configure(spec), "prompt_lookup_min": min_n, "prompt_lookup_max": max_n}

    @property
    def prompt_lookup_min(self) -> int:
        """The shortest n-gram that may match."""
        return self.spec.prompt_lookup_min

    @property
    def prompt_lookup_max(self) -> int:
        """The longest n-gram tried (longer matches are cut to it)."""
        return self.spec.prompt_lookup_max


@attrs.frozen(kw_only=True)
class NgramGPUSpeculatorConfig(NgramSpeculatorConfig):
    """The same drafter with the token history kept on the engine's device."""

    base_method = "ngram_gpu"
    accelerator_only = True
    speculator_class = "specpath_ngram.speculator:NgramGPUSpeculator"
