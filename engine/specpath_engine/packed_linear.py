"""Linear layers with their weights pre-packed for oneDNN, the CPU's matmul path (bf16, fp16, float32).

``F.linear`` on a bf16 CPU tensor hands the plain ``[out, in]`` weight to oneDNN, which reorders
it into its blocked layout on every call: at batch 1 that reorder costs as much as the multiply
(a decode step of SmolLM2-135M is ~80% matmul). Packing each weight once at load time
(``torch.ops.mkldnn._reorder_linear_weight``, the op ``torch.compile``'s CPU backend uses when
it freezes weights) halves a bf16 decode step on an AVX512-BF16 CPU; the products are oneDNN's,
so the outputs agree with ``F.linear``'s to one bf16 rounding, and are mostly bit-identical
(tested; some widths, e.g. 44 inputs, sum in another order).

float32 CPU models are packed too: MKL's ``F.linear`` multiplies a verification's few rows
slowly (SmolLM2-135M on an AMD EPYC, one thread: a layer's four products 0.22 ms for one row,
0.84 ms for five, against 0.23 / 0.49 ms packed; the 49,152-row head 7.3 / 15.5 ms against 4.0 /
7.6 ms), which priced every draft out of a float32 target, and its one-row head is slower too
(float32 plain decoding 23.4 -> 31.5 tok/s, EAGLE-3 over it 1.07x -> 1.35x). Neither product
gives a row the same bits whatever else is in the step (measured there for both), so float32
greedy identity rests, as before, on the argmax, not on bit-equal logits.
``SPECPATH_PREPACK=0`` turns packing off (to measure what it buys).

Where the native kernels run (``specpath_engine.modeling.native``), a bf16 layer keeps its plain weight
for their bf16 matmul instead: it streams the weight at close to the memory bandwidth, reads it
once for up to eight rows, and gives each row the same bits whatever else is in the batch. On a
CPU with AMX-BF16 the weight is held in the tile layout instead and multiplied on the AMX tiles
(up to sixteen rows per pass at the cost of one, row-invariant too).
"""

from __future__ import annotations

import os

import torch
from torch import nn

from specpath_engine.modeling.native import Linear as NativeLinear, kernels

ENV_SWITCH = "SPECPATH_PREPACK"
"""Set to ``0`` to keep plain ``F.linear`` layers."""

_PACKABLE = {torch.float32: "", torch.bfloat16: "_is_mkldnn_bf16_supported", torch.float16: "_is_mkldnn_fp16_supported"}


def packing_enabled(dtype: torch.dtype, device: str | torch.device = "cpu") -> bool:
    """Whether :func:`pack_linears_` would pack a model of ``dtype`` on ``device`` here."""
    if os.environ.get(ENV_SWITCH, "1") == "0" or torch.device(device).type != "cpu" or dtype not in _PACKABLE:
        return False
    if not _PACKABLE[dtype]:  # float32: any oneDNN build multiplies it
        return torch.backends.mkldnn.is_available()
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
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        #: runs on the native bf16 kernel (a shape it takes, the kernels built here) on its plain weight
        self.native = (self.dtype == torch.bfloat16 and self.in_features % 32 == 0 and self.out_features % 16 == 0
                       and kernels() is not None)
        #: the native weight is in the AMX tile layout (``NativeKernels.tiles``), not [out, in]
        self.tiled = self.native and kernels().tiles
        if self.tiled:
            self.register_buffer("tiled_weight", kernels().tile_pack(weight.contiguous()))
            return
        if self.native:
            self.register_buffer("weight", weight.contiguous().clone())
            return
        # Packed for batch-1 steps (decode); any number of rows runs on it.
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        if self.native:
            rows = x.reshape(-1, self.in_features).contiguous()
            out = rows.new_empty(rows.shape[0], self.out_features)
            out = kernels().bf16_tiled(self.tiled_weight, rows, out) if self.tiled else kernels().bf16(self.weight, rows, out)
            out = out.view(*x.shape[:-1], self.out_features)
            return out if self.bias is None else out + self.bias
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, "none", [], "")

    def dense_weight(self) -> torch.Tensor:
        """A native layer's weight as ``[out, in]`` (a copy when it is held in the tile layout)."""
        if not self.native:
            raise ValueError("this layer's weight is held only in oneDNN's packed layout")
        return kernels().tile_unpack(self.tiled_weight) if self.tiled else self.weight

    def native_linear(self) -> NativeLinear | None:
        """The layer as the native fused-layer functions take it, or ``None`` (not native, or a bias)."""
        if not self.native or self.bias is not None:
            return None
        if self.tiled:
            return NativeLinear.cached(self, self.tiled_weight, None, 16, tiled=True)
        return NativeLinear.cached(self, self.weight, None, 16)

    def extra_repr(self) -> str:
        kind = "native, AMX tiles" if self.tiled else "native" if self.native else "packed"
        return f"in_features={self.in_features}, out_features={self.out_features}, {kind} {self.dtype}"


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
