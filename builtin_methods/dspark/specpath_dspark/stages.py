"""Targets that carry their own DSpark stages (DeepSeek-V4): the article's "no separate
download". Only DSpark serves them, so the rule is this plugin's. Pure functions: no torch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEEPSEEK_V4_MODEL_TYPES = ("deepseek_v4", "deepseek_v41")
"""Targets whose own checkpoint ships DSpark stages (the article: no separate download)."""


def carries_dspark_stages(config: Mapping[str, Any]) -> bool:
    """A *target* checkpoint with DSpark weights inside: a DeepSeek-V4-style ``model_type`` or
    ``dspark_*`` keys of its own (``dspark_block_size``, ``dspark_noise_token_id``, ...)."""
    return config.get("model_type") in DEEPSEEK_V4_MODEL_TYPES or any(
        isinstance(k, str) and k.startswith("dspark_") for k in config)
