"""``torch_dtype``: a dtype from what a context or a ``config.json`` gives (a ``torch.dtype``,
``"bfloat16"``, ``"torch.float16"``, None)."""

from __future__ import annotations

from typing import Any

import torch


def torch_dtype(value: Any, default: torch.dtype = torch.float32) -> torch.dtype:
    """``value`` as a ``torch.dtype``; ``default`` for None or a name torch does not know."""
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, str):
        found = getattr(torch, value.removeprefix("torch."), None)
        if isinstance(found, torch.dtype):
            return found
    return default
