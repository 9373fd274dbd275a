"""RMSNorm, the one the target and every drafter use (so a drafter's norm of a shared
feature is the target's, to the bit).

float32 runs as one fused kernel; lower precision follows the Hugging Face order (normalise in
float32, cast back, then scale), which is how the checkpoints these layers load were trained.
bf16 inference runs on the native kernel where it is built (``specpath_engine.modeling.native``: one
call instead of five torch ops, same order of roundings).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from specpath_engine.modeling.native import native_kernels


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (native := native_kernels(x, self.weight)) is not None:
            return native.rms_norm(x.contiguous(), self.weight, self.eps)
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)  # one kernel, same maths
        # Normalised in float32 by the fused kernel (bit-equal to x * rsqrt(mean(x^2) + eps) there,
        # tested), cast back, then scaled: half the element-wise calls of spelling it out.
        return self.weight * F.rms_norm(x.float(), self.weight.shape, None, self.eps).to(x.dtype)

    def add_and_norm(self, x: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x + delta, norm(x + delta))``: a residual add and the norm after it, in one native call
        where it runs."""
        if (native := native_kernels(x, delta, self.weight)) is not None and x.shape == delta.shape:
            return native.add_rms_norm(x.contiguous(), delta.contiguous(), self.weight, self.eps)
        total = x + delta
        return total, self(total)
