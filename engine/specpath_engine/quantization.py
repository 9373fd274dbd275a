"""Weight-only int8 and int4 for the target's matrices (``--quantization int8|int4``).

Decoding a small model on a CPU is memory-bound: every token reads every weight.

- ``int8``: each linear layer's weight as int8 with one scale per output row (symmetric,
  round-to-nearest), half the bytes of bf16; ``torch.ops.aten._weight_int8pack_mm`` multiplies
  bf16 (or fp32/fp16) activations by it without materialising a dequantised copy.
- ``int4``: the decoder layers' weights in 4 bits with a scale and a minimum per group of 32
  inputs (asymmetric, round-to-nearest), a quarter of bf16's bytes
  (``torch.ops.aten._weight_int4pack_mm_for_cpu``); the LM head in int8 (:data:`HEAD_NAME`).
  That is GGUF's Q4_1 block, so a target dequantised from a Q4_1 file (SmolLM2's) is re-quantised
  to its own weights: in float32 they are recovered to float32 rounding (the minimum and maximum of
  each block are its Q4_1 minimum and minimum + 15 steps whenever the block uses its whole range;
  tested, and so for every block of SmolLM2's layer-0 gate projection);
  in bf16 the per-group scale and offset are rounded to bf16. bf16 activations are the kernel's
  fast path (float32 runs, ~25x slower).

With bf16 activations both run on the engine's native kernels where they build
(``specpath_engine.modeling.native``: each weight read once for up to eight rows, so a verification step
over K+1 tokens costs little more than one decode step; a row's result does not depend on the
other rows). There the int4 scale and minimum stay fp32 and each weight is rounded to bf16 once
(``level * scale + minimum``); :meth:`Int4Linear.dequantized_weight` is the weight multiplied by
either way.

A drafter's int8 weight that the native propose reads may keep a second copy, its levels in the
AMX tile layout (:meth:`Int8Linear.keep_tiles`, where the CPU has the tiles): passes of
``TILES_FROM_ROWS`` rows and more (a batch's drafting) take it, fewer rows the int8 kernel.
Only drafters: a pass's bits then depend on its row count, which verification must not.
A drafter's int8 layers also multiply int16-quantised activations where the CPU has AVX512-VNNI
(``quantize_model_(..., int16_activations=True)``; :meth:`NativeKernels.q8a16
<specpath_engine.modeling.native.NativeKernels.q8a16>`) in passes of up to
``INT16_ACTIVATION_ROWS`` rows: one sign extension per 32 weights instead of five conversions,
about the bf16 path's accuracy but not its bits, so never a target's.

The quantised weights *are* the target: speculative decoding verifies against them, so it stays
lossless with respect to this model (greedy speculative output equals greedy plain output of
the same int8 model); it is not the bf16 model's output. Embeddings stay in the engine dtype (a
step reads one row per token); a tied LM head gets its own int8 copy.
"""

from __future__ import annotations

import torch
from torch import nn

from specpath_engine.modeling.native import INT16_ACTIVATION_ROWS, TILES_FROM_ROWS, Linear as NativeLinear, kernels

QUANTIZATIONS = ("int8", "int4")
"""The ``quantization`` values the engine accepts."""


class _WeightOnlyLinear(nn.Module):
    """What the int8 and int4 layers share: a forward over the flattened rows (the native kernel
    where the layer runs on it and the rows are bf16, else torch's packed matmul) plus the bias,
    and the layer as the native fused-layer functions take it."""

    BITS: int
    tiles_from_rows: int | None = None
    """Int8 only: passes of this many rows and more take a tile copy (:meth:`Int8Linear.keep_tiles`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        rows = self._rows(x.reshape(-1, self.in_features))
        if self.native and rows.dtype == torch.bfloat16:
            rows, out = rows.contiguous(), rows.new_empty(rows.shape[0], self.out_features)
            if self.tiles_from_rows is not None:  # dual weights: by the rows, as the fused calls
                out = kernels().linear(self.native_linear(), rows, out)
            else:
                out = self._native_mm(rows, out)
        else:
            out = self._torch_mm(rows)
        out = out.to(x.dtype).view(*lead, self.out_features)
        return out if self.bias is None else out + self.bias

    def native_linear(self) -> NativeLinear | None:
        """The layer as the native fused-layer functions take it, or ``None`` (not native, or a bias)."""
        if not self.native or self.bias is not None:
            return None
        return NativeLinear.cached(self, *self._native_weights(), self.BITS)


class Int8Linear(_WeightOnlyLinear):
    """``nn.Linear`` with an int8 weight ``[out, in]`` and per-row scales in the activation dtype."""

    BITS = 8

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scales = weight.abs().amax(dim=1).clamp(min=torch.finfo(torch.float32).tiny) / 127.0
        qweight = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("qweight", qweight.contiguous())
        self.register_buffer("scales", scales.to(linear.weight.dtype))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        #: runs on the native kernel (bf16 activations, a shape it takes, the kernel built here)
        self.native = (linear.weight.dtype == torch.bfloat16 and linear.in_features % 32 == 0
                       and linear.out_features % 16 == 0 and kernels() is not None)
        if self.native:
            self.register_buffer("scales_f32", self.scales.float())
        self.int16_activations = False
        """Rows are quantised to int16 and multiplied on AVX512-VNNI (:meth:`use_int16_activations`)."""

    def use_int16_activations(self, on: bool = True) -> bool:
        """Multiply int16-quantised rows from now on (``NativeKernels.q8a16``) where the layer is
        native and the CPU has AVX512-VNNI: a drafter's layers, whose outputs verification checks
        (not the bf16 path's bits); ``on=False``: bf16 rows again (a drafter whose passes run at
        five rows or more, where q8a16 loses). Returns whether it does."""
        self.int16_activations = bool(on and self.native and kernels().vnni)
        if self.native:
            self.native_linear()  # a descriptor built before (a drafter's native form) takes it too
        return self.int16_activations

    def keep_tiles(self) -> int:
        """Keep a copy of the levels as bf16 in the AMX tile layout (exact: ``|q| <= 127``) beside
        the int8 weight, multiplied (then scaled) for passes of :data:`TILES_FROM_ROWS` rows and
        more: a batch's drafting pass then costs about one row's (the int8 kernel's grows with the
        rows). Only where the layer is native without a bias and the CPU has the tiles
        (``NativeKernels.tiles``); returns the bytes added (0: not here, or kept already)."""
        if not self.native or self.bias is not None or not kernels().tiles or hasattr(self, "tiled_levels"):
            return 0
        self.register_buffer("tiled_levels", kernels().tile_pack(self.qweight.to(torch.bfloat16)))
        self.tiles_from_rows = TILES_FROM_ROWS
        return self.tiled_levels.numel() * self.tiled_levels.element_size()

    def use_tiles_from(self, rows: int | None) -> None:
        """Take the tile copy from ``rows`` rows (None: the int8 kernel only, as without a copy),
        in this layer's native descriptor too, so a drafter's native form built before takes it
        (side-by-side measurements, references of one format)."""
        if not hasattr(self, "tiled_levels"):
            raise ValueError("this layer keeps no tile copy (keep_tiles)")
        self.tiles_from_rows = rows
        self.native_linear()

    def _rows(self, rows: torch.Tensor) -> torch.Tensor:
        return rows  # any float dtype: the packed matmul takes it as is

    def _native_mm(self, rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if self.int16_activations and rows.shape[0] <= INT16_ACTIVATION_ROWS:  # as the fused calls choose
            return kernels().q8a16(self.qweight, self.scales_f32, rows, out)
        return kernels().q8(self.qweight, self.scales_f32, rows, out)

    def _torch_mm(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int8pack_mm(rows, self.qweight, self.scales)

    def _native_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.qweight, self.scales_f32

    def native_linear(self) -> NativeLinear | None:
        """The layer as the native fused-layer functions take it (with its tile copy, if kept),
        or ``None`` (not native, or a bias)."""
        if not self.native or self.bias is not None:
            return None
        return NativeLinear.cached(self, self.qweight, self.scales_f32, self.BITS,
                                   tiles=getattr(self, "tiled_levels", None), tiles_from_rows=self.tiles_from_rows,
                                   int16_activations=self.int16_activations)

    def dequantized_weight(self) -> torch.Tensor:
        """The weight this layer multiplies by, in the activation dtype (for tests and reports)."""
        return (self.qweight.float() * self.scales.float()[:, None]).to(self.scales.dtype)

    def extra_repr(self) -> str:
        tiles = f", AMX tiles from {self.tiles_from_rows} rows" if self.tiles_from_rows is not None else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, int8{', native' * self.native}"
                f"{', int16 activations' * self.int16_activations}{tiles}")


class Int4Linear(_WeightOnlyLinear):
    """``nn.Linear`` with 4-bit weights, a scale and a minimum per group of :attr:`GROUP` inputs
    (GGUF Q4_1's layout), packed for ``aten._weight_int4pack_mm_for_cpu``."""

    BITS = 4
    GROUP = 32
    """Inputs per quantisation group (Q4_1's block)."""
    OUT_MULTIPLE = 16
    """The CPU kernel packs output rows in sixteens."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        n, k = linear.out_features, linear.in_features
        if k % self.GROUP or n % self.OUT_MULTIPLE:
            raise ValueError(f"quantization int4 needs in_features divisible by {self.GROUP} and out_features by "
                             f"{self.OUT_MULTIPLE}; a layer here is {n} x {k}")
        weight = linear.weight.detach().float().reshape(n, k // self.GROUP, self.GROUP)
        low, high = weight.amin(-1, keepdim=True), weight.amax(-1, keepdim=True)
        scales = ((high - low) / 15).clamp(min=torch.finfo(torch.float32).tiny)
        levels = torch.round((weight - low) / scales).clamp(0, 15).to(torch.int32)
        self.dtype = linear.weight.dtype
        self.in_features, self.out_features = k, n
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        #: runs on the native kernel (bf16 activations, a shape it takes, the kernel built here)
        self.native = self.dtype == torch.bfloat16 and k % (2 * self.GROUP) == 0 and kernels() is not None
        if self.native:
            pairs = levels.to(torch.uint8).reshape(n, k // (2 * self.GROUP), 2, self.GROUP)
            self.register_buffer("levels", (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(n, k // 2).contiguous())
            self.register_buffer("scale_mins", torch.cat([scales, low], dim=-1).contiguous())
            return
        self.register_buffer("qweight", torch.ops.aten._convert_weight_to_int4pack_for_cpu(levels.reshape(n, k), 1))
        # the kernel computes (level - 8) * scale + zero, so zero = minimum + 8 scales
        scale_zeros = torch.stack([scales.squeeze(-1), (low + 8 * scales).squeeze(-1)], dim=-1)
        self.register_buffer("scale_zeros", scale_zeros.transpose(0, 1).contiguous().to(self.dtype))

    def _rows(self, rows: torch.Tensor) -> torch.Tensor:
        return rows.to(self.dtype)  # the kernels take the weights' dtype (bf16 where native)

    def _native_mm(self, rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return kernels().q4(self.levels, self.scale_mins, rows, out)

    def _torch_mm(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.qweight, self.GROUP, self.scale_zeros)

    def _native_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.levels, self.scale_mins

    def dequantized_weight(self) -> torch.Tensor:
        """The weight this layer multiplies by (for tests and reports), in the activation dtype."""
        if self.native:
            n, k = self.out_features, self.in_features
            packed = self.levels.view(n, k // (2 * self.GROUP), self.GROUP)
            pairs = torch.stack([packed & 15, packed >> 4], dim=-2).reshape(n, k // self.GROUP, self.GROUP)
            scales, mins = self.scale_mins.unbind(-1)
            return torch.addcmul(mins[..., None], pairs.float(), scales[..., None]).reshape(n, k).to(self.dtype)
        eye = torch.eye(self.in_features, dtype=self.scale_zeros.dtype)
        return torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.qweight, self.GROUP, self.scale_zeros).T

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, int4 (group {self.GROUP})"
                f"{', native' * self.native}")


HEAD_NAME = "lm_head"
"""The LM head's module name: under ``int4`` it is int8, as GGUF's 4-bit files keep the output
(and the tied token embedding: SmolLM2's is Q8_0) at 8 bits; 4 bits there cost most of int4's
distance from the float model (``benchmarks/quantization_quality.py``)."""


def layer_class(method: str, name: str) -> type[nn.Module]:
    """The quantised layer ``method`` puts in place of the linear layer called ``name``."""
    if method == "int4" and name == HEAD_NAME:
        return Int8Linear
    return {"int8": Int8Linear, "int4": Int4Linear}[method]


def quantize_model_(model: nn.Module, method: str, *, int8_where_unfit: bool = False,
                    int16_activations: bool = False) -> nn.Module:
    """Replace every ``nn.Linear`` of ``model`` (decoder layers and LM head) in place; a model
    with a layer the method cannot hold is refused before any layer is replaced, unless
    ``int8_where_unfit`` (drafters: a DSpark confidence row, say) gives such layers int8, which
    holds any shape. A bare ``nn.Linear`` comes back quantised as an LM head (a drafter's kept
    head rows). ``int16_activations`` (drafters): the int8 layers multiply int16-quantised rows
    where the CPU has AVX512-VNNI (:meth:`Int8Linear.use_int16_activations`)."""
    if method not in QUANTIZATIONS:
        raise ValueError(f"quantization: {method!r} is not supported; allowed: {', '.join(QUANTIZATIONS)}")

    def quantized(name: str, linear: nn.Linear) -> nn.Module:
        try:
            layer = layer_class(method, name)(linear)
        except ValueError:
            if not int8_where_unfit:
                raise
            layer = Int8Linear(linear)
        if int16_activations and isinstance(layer, Int8Linear):
            layer.use_int16_activations()
        return layer

    if type(model) is nn.Linear:
        return quantized(HEAD_NAME, model)
    targets = [(name, module) for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    replacements = [(name, quantized(name, linear)) for name, linear in targets]
    for name, layer in replacements:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, layer)
    return model


@torch.no_grad()
def quantized_weights_(model: nn.Module, method: str) -> nn.Module:
    """Give every ``nn.Linear`` of ``model`` the weight :func:`quantize_model_` would have it
    multiply by (:meth:`Int4Linear.dequantized_weight`, :meth:`Int8Linear.dequantized_weight`),
    in place, keeping the layers plain: the quantised target on torch's matmuls, which run a
    drafter's training windows (whole batches of 256-token rows) far faster than the decode
    kernels. Its taps and next-token distributions are the quantised target's, up to the order
    of float additions: the features a drafter for that target trains on. A tied LM head gets
    its own weight, as in the quantised model (the embedding stays as it was)."""
    if method not in QUANTIZATIONS:
        raise ValueError(f"quantization: {method!r} is not supported; allowed: {', '.join(QUANTIZATIONS)}")
    for name, linear in [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]:
        weight = layer_class(method, name)(linear).dequantized_weight().to(linear.weight.dtype)
        linear.weight = nn.Parameter(weight, requires_grad=False)
    return model
