"""Weight-only int8 for the target's matrices (``--quantization int8``): half the bytes of bf16.

Decoding a small model on a CPU is memory-bound: every token reads every weight. Storing each
linear layer's weight as int8 with one scale per output row (symmetric, round-to-nearest) halves
what a step reads against bf16; ``torch.ops.aten._weight_int8pack_mm`` multiplies bf16 (or
fp32/fp16) activations by it without materialising a dequantised copy.

The quantised weights *are* the target: speculative decoding verifies against them, so it stays
lossless with respect to this model (greedy speculative output equals greedy plain output of
the same int8 model); it is not the bf16 model's output. Embeddings stay in the engine dtype (a
step reads one row per token); a tied LM head gets its own int8 copy.
"""

from __future__ import annotations

import torch
from torch import nn

QUANTIZATIONS = ("int8",)


class Int8Linear(nn.Module):
    """``nn.Linear`` with an int8 weight ``[out, in]`` and per-row scales in the activation dtype."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scales = weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / 127.0
        qweight = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("qweight", qweight.contiguous())
        self.register_buffer("scales", scales.to(linear.weight.dtype))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        out = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, self.in_features), self.qweight, self.scales)
        out = out.view(*lead, self.out_features)
        return out if self.bias is None else out + self.bias

    def dequantized_weight(self) -> torch.Tensor:
        """The weight this layer multiplies by, in the activation dtype (for tests and reports)."""
        return (self.qweight.float() * self.scales.float()[:, None]).to(self.scales.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_model_(model: nn.Module, method: str) -> nn.Module:
    """Replace every ``nn.Linear`` of ``model`` (decoder layers and LM head) in place."""
    if method not in QUANTIZATIONS:
        raise ValueError(f"quantization: {method!r} is not supported; allowed: {', '.join(QUANTIZATIONS)}")
    targets = [(name, module) for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    for name, linear in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Int8Linear(linear))
    return model
