"""Choose the kernel implementation for a device: torch on CPU, Triton on CUDA.

Triton runs on CPU only when asked for explicitly (``backend="triton"``) and only under
``TRITON_INTERPRET=1``: that is how the tests compare the two paths without a GPU.
"""

from __future__ import annotations

import os
from types import ModuleType

import torch

BACKENDS = ("auto", "torch", "triton")


def kernels_for(device: torch.device | str, backend: str = "auto") -> ModuleType:
    """The module holding ``accept_*``, ``recover`` and ``lift_probs`` for ``device``."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(map(repr, BACKENDS))}")
    device = torch.device(device)
    if backend == "auto":
        backend = "triton" if device.type == "cuda" else "torch"
    if backend == "torch":
        from specpath_engine.sample import reference

        return reference
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"backend='triton' on {device.type} needs TRITON_INTERPRET=1 (or a CUDA device)")
    from specpath_engine.sample import triton_kernels

    return triton_kernels
