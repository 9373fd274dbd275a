"""The mask token of a parallel-drafting checkpoint (PARD, P-EAGLE), under every key the
ecosystem writes it.

PARD drafts (amd/PARD-*) write ``pard_token``; P-EAGLE heads ``ptd_token_id``; block drafters
``dflash_config.mask_token_id``; specpath's own PARD drafts ``pard_token_id``. vLLM's
parallel-drafting proposer reads the first three; specpath reads all four, its own first.
A plain reader of checkpoint data shared by the plugins (they may not import each other).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PARALLEL_DRAFTING_TOKEN_KEYS = ("pard_token_id", "pard_token", "ptd_token_id")
"""Top-level keys, in the order they are read (``dflash_config.mask_token_id`` after them)."""


def parallel_drafting_token_id(config: Mapping[str, Any]) -> int | None:
    """The mask token id a parallel-drafting checkpoint was trained with, or None."""
    for key in PARALLEL_DRAFTING_TOKEN_KEYS:
        value = config.get(key)
        if type(value) is int:
            return value
    nested = config.get("dflash_config")
    if isinstance(nested, Mapping) and type(nested.get("mask_token_id")) is int:
        return nested["mask_token_id"]
    return None
