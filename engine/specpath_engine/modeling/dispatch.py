"""The one kernel-or-reference choice: a Triton kernel on CUDA, its torch reference elsewhere.

Every kernel (the verification samplers', each drafter's) ships with a plain-torch twin of the
same signature. Kernels are named by import path so Triton is imported only when it runs (CPU
engines and config resolution never load it). Triton runs on CPU only when asked for explicitly
(``backend="triton"``) under ``TRITON_INTERPRET=1``: that is how the tests compare both paths
without a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from specpath.factory import import_object

BACKENDS = ("auto", "torch", "triton")


def backend_for(device: Any, backend: str = "auto") -> str:
    """``"triton"`` or ``"torch"``: ``auto`` picks by device; ``triton`` off CUDA needs the
    interpreter (``TRITON_INTERPRET=1``)."""
    import torch

    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(map(repr, BACKENDS))}")
    device = torch.device(device)
    if backend == "auto":
        return "triton" if device.type == "cuda" else "torch"
    if backend == "triton" and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"backend='triton' on {device.type} needs TRITON_INTERPRET=1 (or a CUDA device)")
    return backend


def _load(target: str | Callable[..., Any]) -> Any:
    return target if callable(target) else import_object(target)


def triton_or_reference(device: Any, kernel: str, reference: str | Callable[..., Any], backend: str = "auto") -> Any:
    """``kernel`` (``"module:function"``, or a module) on the Triton backend, else ``reference``
    (a function, or its import path)."""
    return _load(kernel if backend_for(device, backend) == "triton" else reference)
