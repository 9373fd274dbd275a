"""Linear layers with their weights pre-packed for oneDNN, the CPU's bf16/fp16 matmul path.

``F.linear`` on a bf16 CPU tensor hands the plain ``[out, in]`` weight to oneDNN, which reorders
it into its blocked layout on every call: at batch 1 that reorder costs as much as the multiply
(a decode step of SmolLM2-135M is ~80% matmul). Packing each weight once at load time
(``torch.ops.mkldnn._reorder_linear_weight``, the op ``torch.compile``'s CPU backend uses when
it freezes weights) halves a bf16 decode step on an AVX512-BF16 CPU; the products are the same
oneDNN kernel's, so the outputs are bit-identical to ``F.linear``'s (tested).

Only low-precision CPU models are packed: float32 keeps MKL's ``F.linear`` (its batch-1 and
multi-token products agree to the bit, which the float32 greedy-identity tests rely on).
``SPECPATH_PREPACK=0`` turns packing off (to measure what it buys).
"""

from __future__ import annotations

import os

import torch
from torch import nn

ENV_SWITCH = "SPECPATH_PREPACK"
"""Set to ``0`` to keep plain ``F.linear`` layers."""

_PACKABLE = {torch.bfloat16: "_is_mkldnn_bf16_supported", torch.float16: "_is_mkldnn_fp16_supported"}


def packing_enabled(dtype: torch.dtype, device: str | torch.device = "cpu") -> bool:
    """Whether :func:`pack_linears_` would pack a model of ``dtype`` on ``device`` here."""
    if os.environ.get(ENV_SWITCH, "1") == "0" or torch.device(device).type != "cpu" or dtype not in _PACKABLE:
        return False
    mkldnn = getattr(torch.ops, "mkldnn", None)
    try:
        supported = getattr(mkldnn, _PACKABLE[dtype])()
    except (AttributeError, RuntimeError):
        return False
    return bool(supported) and torch.backends.mkldnn.is_available()


class PackedLinear(nn.Module):
    """``nn.Linear`` whose weight is held only in oneDNN's packed layout (inference only)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach()
        self.dtype = weight.dtype
        # Packed for batch-1 steps (decode); any number of rows runs on it.
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), 1)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed {self.dtype}"


def pack_linears_(model: nn.Module) -> nn.Module:
    """Replace every ``nn.Linear`` of ``model`` by a :class:`PackedLinear`, in place.

    A head tied to the embedding gets its own packed copy; the embedding keeps its weight.
    Call only on a model that is no longer trained or saved (``state_dict`` loses the
    replaced weights, as with ``--quantization``). A bare ``nn.Linear`` comes back packed."""
    if type(model) is nn.Linear:
        return PackedLinear(model)
    targets = [(name, module) for name, module in model.named_modules() if type(module) is nn.Linear]
    for name, linear in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, PackedLinear(linear))
    return model
