"""``triton_or_reference``: a drafter's Triton kernel on CUDA, its torch reference elsewhere.

Every plugin kernel ships with a plain-torch twin of the same signature; the speculator picks
one per device. The kernel is named by import path so Triton is imported only on CUDA (CPU
engines and config resolution never load it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def _load(target: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def triton_or_reference(device: Any, kernel: str, reference: str | Callable[..., Any]) -> Callable[..., Any]:
    """``kernel`` (``"module:function"``) when ``device`` is a CUDA device, else ``reference``
    (a function, or its ``"module:function"`` path)."""
    import torch

    return _load(kernel if torch.device(device).type == "cuda" else reference)
