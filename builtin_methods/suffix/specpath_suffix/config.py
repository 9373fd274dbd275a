"""``SuffixSpeculatorConfig``: the suffix row of the method table.

No weights, no target hidden states, nothing written to the KV cache ahead of the target
(lookahead 0: drafts are known before the step is scheduled and go in as ordinary query
tokens) and no extra query rows; the target's vocabulary; drafts vary in length per request
and step (``num_speculative_tokens`` is a maximum). The four ``suffix_decoding_*`` fields of
the speculative config are this method's own and refused by every other method.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError

DEFAULTS: dict[str, Any] = {
    "suffix_decoding_max_tree_depth": 24,
    "suffix_decoding_max_cached_requests": 10000,
    "suffix_decoding_max_spec_factor": 1.0,
    "suffix_decoding_min_token_prob": 0.1,
}
"""vLLM's defaults for ``method="suffix"`` (Arctic Inference's own default depth is 64)."""


def _spec_field(name: str, doc: str) -> property:
    """A read-only view of one of the speculative config's ``suffix_decoding_*`` fields."""
    return property(lambda self: getattr(self.spec, name), doc=doc)


@attrs.frozen(kw_only=True)
class SuffixSpeculatorConfig(SpeculatorConfig):
    """Suffix decoding (Oliaro et al., arXiv 2411.04975) on the host, compiled with numba."""

    base_method = "suffix"
    speculator_class = "specpath_suffix.speculator:SuffixSpeculator"
    tolerates_skipped_steps = True
    """Catches up on every position since in one pass (tests/engine/test_draft_governor.py)."""
    supported_options = frozenset(DEFAULTS)
    supports_variable_draft_length = True
    model_free = True
    """Each request drafts 0..K tokens, as many as its best match supports."""

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        """Fill the defaults; K defaults to the tree depth (drafts never run deeper)."""
        updates = {name: default if getattr(spec, name) is None else getattr(spec, name)
                   for name, default in DEFAULTS.items()}
        if spec.num_speculative_tokens is None:
            updates["num_speculative_tokens"] = updates["suffix_decoding_max_tree_depth"]
        return {**super().configure(spec), **updates}

    @classmethod
    def verify(cls, spec: Any) -> None:
        if spec.suffix_decoding_max_cached_requests < 0:
            raise SpeculativeConfigError(
                "must be >= 0 (0 disables the global tree)",
                field="speculative_config.suffix_decoding_max_cached_requests",
                value=spec.suffix_decoding_max_cached_requests,
            )
        factor = spec.suffix_decoding_max_spec_factor
        if not (math.isfinite(factor) and factor > 0):
            raise SpeculativeConfigError(
                "must be a finite number > 0", field="speculative_config.suffix_decoding_max_spec_factor", value=factor
            )
        prob = spec.suffix_decoding_min_token_prob
        if not (math.isfinite(prob) and 0.0 <= prob <= 1.0):
            raise SpeculativeConfigError(
                "must be in [0, 1]", field="speculative_config.suffix_decoding_min_token_prob", value=prob
            )

    max_tree_depth = _spec_field("suffix_decoding_max_tree_depth", "The deepest match plus draft the trees hold.")
    max_cached_requests = _spec_field("suffix_decoding_max_cached_requests",
                                      "Finished responses the global tree keeps (FIFO); 0: no global tree.")
    max_spec_factor = _spec_field("suffix_decoding_max_spec_factor", "A match of p tokens drafts at most factor * p tokens.")
    min_token_prob = _spec_field("suffix_decoding_min_token_prob",
                                 "Drafting stops once the estimated probability of the path falls below this.")

    @property
    def notes(self) -> tuple[str, ...]:
        if self.max_cached_requests == 0:
            return ()
        return (
            "the global tree learns from every finished response, so later calls on one LLM draft differently; "
            "greedy output never changes, nor does seeded sampled text under standard verification in the "
            "reference engine, but under other verification modes or in other engines the same seeded sampled "
            "call can give different text from one call to the next: "
            "llm.speculator.forget_responses() before a call keeps earlier calls out of it, and "
            "suffix_decoding_max_cached_requests: 0 turns the global tree off",
        )

    def hash_factors(self) -> tuple[Any, ...]:
        # Drafts never change the target's graph, but the fields are kept so two configs
        # that draft differently never share a cache entry keyed on the method.
        return tuple((name, getattr(self.spec, name)) for name in DEFAULTS)
