"""``FreqgramSpeculatorConfig``: what the freqgram drafter is, declared for every consumer.

The engine never asks for "freqgram": it reads these flags and properties. Being model-free,
the drafter builds on the built-in ``ngram`` shape (no weights, no target hidden states, no
KV of its own: lookahead 0, no extra slots); its one option arrives in
``speculator_options`` and is checked here, at start-up, with a one-line error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError, closest_match

OPTIONS_FIELD = "speculative_config.speculator_options"
DEFAULT_MAX_ORDER = 3
MAX_ORDER_RANGE = range(1, 9)
"""Longer contexts than 8 tokens add memory per token and almost never change the choice."""


def freqgram_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``speculator_options`` and fill in defaults; raise a one-line error."""
    options = dict(options or {})
    known = ["max_order"]
    for key in sorted(options):
        if key not in known:
            raise SpeculativeConfigError(
                "unknown option of method 'freqgram'",
                field=f"{OPTIONS_FIELD}.{key}",
                allowed=known,
                suggestion=closest_match(key, known),
            )
    max_order = options.get("max_order", DEFAULT_MAX_ORDER)
    if type(max_order) is not int or max_order not in MAX_ORDER_RANGE:
        raise SpeculativeConfigError(
            f"must be an integer from {MAX_ORDER_RANGE.start} to {MAX_ORDER_RANGE.stop - 1}",
            field=f"{OPTIONS_FIELD}.max_order",
            value=max_order,
        )
    return {"max_order": max_order}


@attrs.frozen(kw_only=True)
class FreqgramSpeculatorConfig(SpeculatorConfig):
    """A model-free drafter: per-request next-token frequencies of contexts of 1..max_order tokens."""

    base_method = "ngram"
    speculator_class = "specpath_freqgram.speculator:FreqgramSpeculator"
    supported_options = frozenset({"speculator_options"})
    prefer_dense_token_history = True
    supports_variable_draft_length = True
    model_free = True
    example_plugin = True

    @classmethod
    def verify(cls, spec: Any) -> None:
        freqgram_options(spec.speculator_options)

    @property
    def max_order(self) -> int:
        """The longest context counted (``speculator_options["max_order"]``, default 3)."""
        return freqgram_options(self.spec.speculator_options)["max_order"]
