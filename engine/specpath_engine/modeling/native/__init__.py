"""Native CPU kernels for bf16 layers: C compiled on first use, loaded with ``ctypes``.

- ``rows_matmul.c``: weight-only int4/int8 and bf16 matmuls that read each weight once for up to
  eight rows (AVX512-BF16). torch's CPU weight-only kernels (``_weight_int8pack_mm``,
  ``_weight_int4pack_mm_for_cpu``) cost about as much per extra row as for the first, so
  verifying K drafted tokens cost nearly K+1 decode steps; oneDNN's bf16 matmul reads at about
  half the memory bandwidth at one row.
- ``tiled_matmul.c``: the bf16 matmul on AMX tiles where the CPU has AMX-BF16 (and Linux grants
  the tile registers): 1 to 16 rows per pass at the cost of one; bf16 layers then hold their
  weights in its tile layout (``SPECPATH_AMX=0``: the AVX512-BF16 kernel above instead). An int8
  drafter weight the native propose reads keeps a tile copy of its levels too (dual weights,
  :func:`keep_tile_copies`) and each pass picks by its rows: int8 below :data:`TILES_FROM_ROWS`,
  the tiles from there up (``specpath_linear_matmul``).
- ``layer_ops.c``: RMSNorm (optionally fused with the residual add), RoPE and SiLU-and-multiply
  as one call each: a decode step of a small model on a CPU is dominated by per-op overhead;
  ``decoder_layer.c`` runs a layer's two halves around attention as one call each (and holds the
  one dispatch of a weight to its kernel, ``specpath_linear_matmul``), and a whole
  stack of layers for one request as one call (:class:`DecoderStack`).
- ``attention.c``: one request's attention over its KV history (causal, or a token tree's
  mask), the new keys and values written on the way, and a batch of requests' in one call, each
  over its own slots; row-invariant like the matmuls (a row's bits do not depend on the batch).
- ``uniforms.c``: the counter-based uniforms of seeded sampling noise and the Gumbel noise made of
  them (a vocabulary's worth per sampled position; torch's generator takes ~4 ns an entry, its
  log ~1.5). Both the bits of ``specpath_engine.sample.noise``'s torch path.
- ``draft_chain.c``: a one-layer hidden-state drafter's K greedy drafts for one request
  (:class:`DraftHead`, :meth:`NativeKernels.draft_chain`), the per-op chain's bits in one call,
  and with the ingest of the newly verified positions before it (:meth:`NativeKernels.draft_propose`),
  for a batch of requests at once (:meth:`NativeKernels.draft_propose_batch`).
- ``block_draft.c``: a block drafter's step (DFlash, DSpark: :class:`BlockHead`,
  :meth:`NativeKernels.block_propose`): the ingest of the newly committed positions into every
  draft layer's KV and the non-causal block pass of every drafting request, the per-op path's
  bits in one call (SmolLM2's DFlash K=4 at 2 threads: 1.76 -> 1.05 ms a step, most of it the
  Python between the ops).
- ``model_draft.c``: a draft model's greedy chain for one request (:class:`DraftModelHead`,
  :meth:`NativeKernels.model_propose`): the pass over its unseen tokens and one pass per further
  draft, each layer the per-op forward's three calls, in one call.

No library installable here offers these for torch's CPU build (torchao's CPU kernels are not in
its PyPI wheel), so they are built from source: nine C files and a header, no torch headers, about two seconds
with the system's C compiler, cached under :func:`cache_dir`.

The kernels' threads are OpenMP's; the library links ``libgomp.so.1``, which resolves to the copy
torch has already loaded, so they share torch's thread pool and ``torch.set_num_threads``.

When there is no compiler, the CPU lacks AVX512-BF16, or ``SPECPATH_NATIVE=0``,
:func:`kernels` returns ``None`` and :func:`unavailable_reason` says why; callers keep torch's
kernels.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import hashlib
import os
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

ENV_SWITCH = "SPECPATH_NATIVE"
"""Set to ``0`` to use torch's kernels only."""
AMX_SWITCH = "SPECPATH_AMX"
"""Set to ``0`` to keep bf16 matmuls off the AMX tiles (rows_matmul.c's kernel instead)."""

INT16_ACTIVATION_ROWS = 4
"""The most rows a pass of an int8 layer with int16 activations multiplies on the int16 kernel
(:meth:`NativeKernels.q8a16`; ``common.h``): ``vpdpwssd`` retires at about half ``vdpbf16ps``'s
rate, so it pays at one to three rows, breaks even at four and loses from five, where the pass
takes the bf16-activation kernel (like a dual weight's tiles, a drafter's bits then depend on
its pass's row count; verification's never do)."""

VNNI_SWITCH = "SPECPATH_VNNI"
"""Set to ``0`` to keep drafters' int8 matmuls on bf16 activations (side-by-side measurements)."""

SOURCES = tuple(Path(__file__).with_name(name) for name in ("rows_matmul.c", "tiled_matmul.c", "layer_ops.c",
                                                             "decoder_layer.c", "attention.c", "draft_chain.c",
                                                             "block_draft.c", "model_draft.c", "uniforms.c"))
HEADERS = (Path(__file__).with_name("common.h"),)
"""Included by the sources: part of the build's cache key, not of the command line."""
FLAGS = ("-O3", "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx512bf16", "-mf16c", "-mfma", "-fopenmp",
         "-shared", "-fPIC")
LIBS = ("-lm",)
MAX_ROWS = 16
"""Rows one pass of the kernels multiplies; more run in passes of this many (same result per row).
Sixteen, so that a batch of 8 requests drafting a token each reads every weight once."""

TILE_ROWS = 16
"""Rows one pass of the AMX-tile matmul multiplies (tiled_matmul.c), at about the cost of one."""

TILES_FROM_ROWS = 4
"""Rows from which a pass of a dual-weight linear (an int8 weight with its tile copy,
:func:`keep_tile_copies`) runs on the tiles instead of the int8 kernel. The int8 kernel's cost
grows with the rows (its multiplies do), a tile pass costs the same for 1 to 16, but the tile
copy is twice the bytes, and a drafter's weights come from memory again after each target step
streamed the caches. Measured on the Xeon with AMX (1 thread, 256 MB streamed between proposes,
``benchmarks/draft_weight_formats.py``): from 2 rows a propose lost ~20% on the tiles (EAGLE-3,
2 requests), about even at 3, from 4 it gained (1.2-1.7x; 8 requests 1.7-2.1x); with warm caches
the tiles win from 2 rows already (a layer at 2 rows 0.60 -> 0.52 ms), cold memory decides."""

_POINTER, _INT = ctypes.c_void_p, ctypes.c_int


def cache_dir() -> Path:
    """Where built libraries are kept: ``$SPECPATH_CACHE_DIR`` or ``~/.cache/specpath``, ``native/``."""
    root = os.environ.get("SPECPATH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "specpath")
    return Path(root) / "native"


def _function(library: ctypes.CDLL, name: str, *argtypes: Any) -> Any:
    function = getattr(library, name)
    function.argtypes, function.restype = list(argtypes), None
    return function


class Linear(ctypes.Structure):
    """A weight as the fused layer functions take it (``specpath_linear`` in C): 4 bits
    (``levels``, ``scale_mins``), 8 (int8 ``weight``, fp32 ``scales``) or 16 (the bf16 weight, no
    scales). It holds raw pointers: whoever holds it keeps the tensors alive and unmoved."""

    _fields_ = [("weight", ctypes.c_void_p), ("scales", ctypes.c_void_p), ("bits", ctypes.c_int64),
                ("out_features", ctypes.c_int64), ("in_features", ctypes.c_int64), ("tiled", ctypes.c_int64),
                ("tiles", ctypes.c_void_p), ("tiles_from_rows", ctypes.c_int64),
                ("int16_activations", ctypes.c_int64)]

    @classmethod
    def of(cls, weight: torch.Tensor, scales: torch.Tensor | None, bits: int, tiled: bool = False,
           tiles: torch.Tensor | None = None, tiles_from_rows: int | None = None,
           int16_activations: bool = False) -> "Linear":
        """``tiled``: a bf16 weight in the AMX tile layout (:meth:`NativeKernels.tile_pack`).
        ``tiles``: an int8 weight's levels as bf16 in that layout, taken (times the scales) for
        passes of at least ``tiles_from_rows`` rows (None: never; dual weights).
        ``int16_activations``: an int8 weight multiplies int16-quantised rows (:meth:`NativeKernels.q8a16`)."""
        out_features, stored = weight.shape
        in_features = stored * weight.element_size() * 8 // bits
        linear = cls(weight.data_ptr(), None if scales is None else scales.data_ptr(), bits, out_features, in_features,
                     int(tiled), None if tiles is None else tiles.data_ptr(), tiles_from_rows or 0,
                     int(int16_activations))
        linear.tensors = (weight, scales, tiles)  # kept alive with the pointers
        return linear

    @classmethod
    def cached(cls, owner: Any, weight: torch.Tensor, scales: torch.Tensor | None, bits: int,
               tiled: bool = False, tiles: torch.Tensor | None = None,
               tiles_from_rows: int | None = None, int16_activations: bool = False) -> "Linear":
        """``owner``'s descriptor, rebuilt when its tensors are no longer the ones pointed to (a
        replaced buffer, or the same tensor holding other memory after a ``.data`` swap): a layer
        asks every call, so a stale pointer is never used. A new ``tiles_from_rows`` or
        ``int16_activations`` is written into the descriptor in place, so a :class:`DraftHead`
        holding it takes it too."""
        linear = owner.__dict__.get("_native_linear")
        if (linear is None or linear.tensors[0] is not weight or linear.tensors[1] is not scales
                or linear.tensors[2] is not tiles or linear.weight != weight.data_ptr()
                or (scales is not None and linear.scales != scales.data_ptr())
                or (tiles is not None and linear.tiles != tiles.data_ptr())):
            linear = owner.__dict__["_native_linear"] = cls.of(weight, scales, bits, tiled, tiles, tiles_from_rows,
                                                               int16_activations)
            linear.owner = weakref.ref(owner)
            """The module whose weights these are (:func:`keep_tile_copies` asks it for a tile copy)."""
        else:
            if linear.tiles_from_rows != (tiles_from_rows or 0):
                linear.tiles_from_rows = tiles_from_rows or 0
            if linear.int16_activations != int(int16_activations):
                linear.int16_activations = int(int16_activations)
        return linear


class LayerWeights(ctypes.Structure):
    """One decoder layer as ``specpath_decoder_stack`` reads it (``specpath_layer_weights`` in C):
    its two norms and four fused projections. Raw pointers, like :class:`Linear`."""

    _fields_ = [("input_norm", ctypes.c_void_p), ("post_norm", ctypes.c_void_p), ("input_eps", ctypes.c_float),
                ("post_eps", ctypes.c_float), ("qkv", ctypes.POINTER(Linear)), ("o_proj", ctypes.POINTER(Linear)),
                ("gate_up", ctypes.POINTER(Linear)), ("down", ctypes.POINTER(Linear))]


class DraftHead(ctypes.Structure):
    """A one-layer hidden-state head as ``specpath_draft_chain`` reads it (``specpath_draft_head``
    in C): the target's embedding table, the input stage's norms (and MTP's ``fuse`` projection),
    the layer, the final norm and the LM head with its row -> target id map. Raw pointers: built by
    :meth:`of`, which keeps what they point at alive (``tensors``)."""

    _fields_ = [("embed", ctypes.c_void_p), ("embed_norm", ctypes.c_void_p), ("hidden_norm", ctypes.c_void_p),
                ("fuse_norm", ctypes.c_void_p), ("final_norm", ctypes.c_void_p), ("embed_eps", ctypes.c_float),
                ("hidden_eps", ctypes.c_float), ("fuse_eps", ctypes.c_float), ("final_eps", ctypes.c_float),
                ("fuse", ctypes.POINTER(Linear)), ("hidden_first", ctypes.c_int64), ("layer", LayerWeights),
                ("lm_head", ctypes.POINTER(Linear)), ("lm_bias", ctypes.c_void_p), ("ids", ctypes.c_void_p),
                ("fc", ctypes.POINTER(Linear))]

    @classmethod
    def of(cls, *, embed: torch.Tensor, embed_norm: tuple[torch.Tensor, float], hidden_norm: tuple[torch.Tensor, float],
           final_norm: tuple[torch.Tensor, float], post_norm: tuple[torch.Tensor, float], layer: tuple[Linear, ...],
           lm_head: Linear, lm_bias: torch.Tensor | None = None, ids: torch.Tensor | None = None,
           fuse: Linear | None = None, fuse_norm: tuple[torch.Tensor, float] | None = None,
           hidden_first: bool = False, fc: Linear | None = None, ingests: bool = False) -> "DraftHead":
        """``embed [V, d]`` bf16; norms as (bf16 weight, eps); ``layer``: qkv, o_proj, gate_up, down;
        ``lm_bias`` fp32 ``[n]``, ``ids`` int64 ``[n]`` (None: row i is id i); ``fuse``/``fuse_norm``:
        an MTP module's ``eh_proj`` and input norm (None: EAGLE-3's stage); ``fc``: EAGLE-3's tap
        fusion. ``ingests``: :meth:`NativeKernels.draft_propose` may run the ingest too (the head
        reads its taps through ``fc``, or as they are: one tap as wide as the head)."""
        qkv, o_proj, gate_up, down = layer
        fuse_weight, fuse_eps = fuse_norm if fuse_norm is not None else (None, 0.0)
        head = cls(embed.data_ptr(), embed_norm[0].data_ptr(), hidden_norm[0].data_ptr(),
                   None if fuse_weight is None else fuse_weight.data_ptr(), final_norm[0].data_ptr(), embed_norm[1],
                   hidden_norm[1], fuse_eps, final_norm[1], None if fuse is None else ctypes.pointer(fuse),
                   int(hidden_first),
                   LayerWeights(None, post_norm[0].data_ptr(), 0.0, post_norm[1],
                                *(ctypes.pointer(linear) for linear in layer)),
                   ctypes.pointer(lm_head), None if lm_bias is None else lm_bias.data_ptr(),
                   None if ids is None else ids.data_ptr(), None if fc is None else ctypes.pointer(fc))
        head.row_ids = ids
        """The target id of each LM-head row (int64 ``[n]``), None: row i is id i."""
        head.ingests = ingests
        linears = [*layer, lm_head, *(extra for extra in (fuse, fc) if extra is not None)]
        head.linears = linears
        """Every weight the propose multiplies by (:func:`keep_tile_copies` walks them)."""
        head.tensors = (embed, embed_norm[0], hidden_norm[0], final_norm[0], post_norm[0], fuse_weight, lm_bias, ids,
                        linears)  # kept alive with the pointers
        head.pointers = [(t, t.data_ptr()) for t in (embed, embed_norm[0], hidden_norm[0], final_norm[0], post_norm[0],
                                                     fuse_weight, lm_bias, ids) if t is not None]
        head.pointers += [(t, t.data_ptr()) for linear in linears for t in linear.tensors if t is not None]
        head.generation = registrations()
        return head

    def valid(self) -> bool:
        """Nothing it was built from has been replaced or moved since (as :meth:`DecoderStack.valid`)."""
        return self.generation == registrations() and all(t.data_ptr() == p for t, p in self.pointers)


class _OnAStack:
    """A drafter descriptor built on a :class:`DecoderStack`: it keeps the stack and the other
    tensors it points at alive, and is :meth:`valid` while none of them moved."""

    def keep(self, stack: DecoderStack, tensors: Sequence[torch.Tensor | None]) -> None:
        self.stack = stack
        self.pointers = [(t, t.data_ptr()) for t in tensors if t is not None]
        self.generation = registrations()

    def valid(self) -> bool:
        """Nothing it was built from has been replaced or moved since (as :meth:`DecoderStack.valid`)."""
        return (self.generation == registrations() and self.stack.valid()
                and all(t.data_ptr() == p for t, p in self.pointers))


class BlockHead(_OnAStack, ctypes.Structure):
    """A block drafter (DFlash, DSpark) as ``specpath_block_propose`` reads it
    (``specpath_block_head`` in C): the target's embedding table, the mask embedding, the context's
    ``fc`` and norm, and every draft layer. Raw pointers: built by :meth:`of`, which keeps what they
    point at alive."""

    _fields_ = [("embed", ctypes.c_void_p), ("mask_embedding", ctypes.c_void_p), ("fc", ctypes.POINTER(Linear)),
                ("hidden_norm", ctypes.c_void_p), ("hidden_eps", ctypes.c_float), ("num_layers", ctypes.c_int64),
                ("layers", ctypes.POINTER(LayerWeights))]

    @classmethod
    def of(cls, *, embed: torch.Tensor, mask_embedding: torch.Tensor, fc: Linear,
           hidden_norm: tuple[torch.Tensor, float],
           layers: list[tuple[torch.Tensor, float, torch.Tensor, float, tuple[Linear, ...]]]) -> "BlockHead":
        """``embed [V, d]``, ``mask_embedding [d]`` bf16; norms as (bf16 weight, eps); ``layers``: per
        draft layer (input norm, eps, post-attention norm, eps, (qkv, o_proj, gate_up, down))."""
        stack = DecoderStack(layers)
        head = cls(embed.data_ptr(), mask_embedding.data_ptr(), ctypes.pointer(fc), hidden_norm[0].data_ptr(),
                   hidden_norm[1], stack.num_layers, stack.layers)
        head.keep(stack, (embed, mask_embedding, hidden_norm[0], *fc.tensors))
        head.fc_linear = fc  # kept alive with the pointer to it
        return head


class DraftModelHead(_OnAStack, ctypes.Structure):
    """A draft model as ``specpath_model_propose`` reads it (``specpath_model_head`` in C): its
    embedding table, decoder layers, final norm and LM head (a reduced vocabulary's kept rows,
    their fp32 bias and target ids). Raw pointers: built by :meth:`of`, which keeps what they
    point at alive."""

    _fields_ = [("embed", ctypes.c_void_p), ("num_layers", ctypes.c_int64), ("layers", ctypes.POINTER(LayerWeights)),
                ("final_norm", ctypes.c_void_p), ("final_eps", ctypes.c_float), ("lm_head", ctypes.POINTER(Linear)),
                ("lm_bias", ctypes.c_void_p), ("ids", ctypes.c_void_p)]

    @classmethod
    def of(cls, *, embed: torch.Tensor, layers: list[tuple[torch.Tensor, float, torch.Tensor, float, tuple[Linear, ...]]],
           final_norm: tuple[torch.Tensor, float], lm_head: Linear, lm_bias: torch.Tensor | None = None,
           ids: torch.Tensor | None = None) -> "DraftModelHead":
        """``embed [V, d]`` bf16; ``layers`` as :class:`DecoderStack` takes them; ``lm_bias`` fp32
        ``[n]`` and ``ids`` int64 ``[n]`` (None: row i is id i)."""
        stack = DecoderStack(layers)
        head = cls(embed.data_ptr(), stack.num_layers, stack.layers, final_norm[0].data_ptr(), final_norm[1],
                   ctypes.pointer(lm_head), None if lm_bias is None else lm_bias.data_ptr(),
                   None if ids is None else ids.data_ptr())
        head.keep(stack, (embed, final_norm[0], lm_bias, ids, *lm_head.tensors))
        head.lm_head_linear = lm_head  # kept alive with the pointer to it
        return head


def keep_tile_copies(head: DraftHead) -> int:
    """Give every int8 weight ``head`` reads (its owner's ``keep_tiles``: an
    :class:`~specpath_engine.quantization.Int8Linear`) a copy of its levels in the AMX tile layout,
    taken for passes of :data:`TILES_FROM_ROWS` rows and more; returns the bytes added (0: nothing
    new, or no tiles here). Each copy registers a buffer, so ``head`` is stale after a nonzero
    return: rebuild it (its descriptors then carry the copies)."""
    added = 0
    for linear in head.linears:
        owner = getattr(linear, "owner", lambda: None)()
        if owner is not None and callable(keep := getattr(owner, "keep_tiles", None)):
            added += keep()
    return added


def use_tiles_from(head: DraftHead, rows: int | None) -> None:
    """Every int8 weight ``head`` reads that keeps a tile copy takes it from ``rows`` rows (None:
    never, the int8 kernel only; :data:`TILES_FROM_ROWS` again), in place: ``head`` stays valid
    (side-by-side measurements of one head, references of one format)."""
    for linear in head.linears:
        owner = getattr(linear, "owner", lambda: None)()
        if owner is not None and hasattr(owner, "tiled_levels"):
            owner.use_tiles_from(rows)


class DecoderStack:
    """Every decoder layer of a model as one array for :meth:`NativeKernels.decoder_stack`, with
    what it points at kept alive, so no pointer in it can dangle. A model asks :meth:`valid`
    each step and rebuilds it when a module, parameter or buffer was assigned anywhere since
    (:func:`registrations`) or a tensor it points at now holds other memory (``.data`` swapped):
    the weights a step reads are the model's own."""

    def __init__(self, layers: list[tuple[torch.Tensor, float, torch.Tensor, float, tuple[Linear, ...]]]) -> None:
        self.generation = registrations()
        self.layers = (LayerWeights * len(layers))(*(
            LayerWeights(input_norm.data_ptr(), post_norm.data_ptr(), input_eps, post_eps,
                         *(ctypes.pointer(linear) for linear in linears))
            for input_norm, input_eps, post_norm, post_eps, linears in layers))
        self.num_layers = len(layers)
        tensors = [t for norm_in, _, norm_post, _, linears in layers
                   for t in (norm_in, norm_post, *(t for linear in linears for t in linear.tensors)) if t is not None]
        self.pointers = [(t, t.data_ptr()) for t in tensors]

    def valid(self) -> bool:
        """Nothing it was built from has been replaced or moved since."""
        return self.generation == registrations() and all(t.data_ptr() == p for t, p in self.pointers)


_REGISTRATIONS = [0]


def _count_registration(*_: Any) -> None:
    _REGISTRATIONS[0] += 1


@functools.lru_cache(maxsize=None)
def _install_registration_hooks() -> None:
    from torch.nn.modules import module

    module.register_module_module_registration_hook(_count_registration)
    module.register_module_parameter_registration_hook(_count_registration)
    module.register_module_buffer_registration_hook(_count_registration)


def registrations() -> int:
    """How many modules, parameters and buffers have been assigned to any module in this process
    since a :class:`DecoderStack` was first built (torch's global registration hooks, installed
    then): a cached stack whose count differs may point at a replaced weight."""
    _install_registration_hooks()
    return _REGISTRATIONS[0]


def native_linears(*modules: Any) -> tuple[Linear, ...] | None:
    """The modules' native descriptors (``module.native_linear()``), or ``None`` if one has none."""
    linears = tuple(getattr(m, "native_linear", _none)() for m in modules)
    return None if any(l is None for l in linears) else linears


def _none() -> None:
    return None


def native_kernels(x: torch.Tensor, *others: torch.Tensor):
    """The native kernels when they may take over from torch here: bf16 CPU tensors whose last
    dimension is a multiple of 16, no autograd (the kernels have no backward), the kernels built;
    otherwise ``None``."""
    if x.dtype is not torch.bfloat16 or x.device.type != "cpu" or x.shape[-1] % 16 or torch.is_grad_enabled():
        return None
    if any(t.dtype is not torch.bfloat16 for t in others):
        return None
    return kernels()


def attention_kernels(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_cache: torch.Tensor):
    """The kernels when :meth:`NativeKernels.attention` takes these tensors (bf16 inference,
    heads and dims contiguous, a head width of a multiple of 32), else ``None``."""
    dim = q.shape[-1]
    if dim % 32 or key_cache.dtype is not torch.bfloat16 or key_cache.stride(-2) != dim:
        return None
    if any(t.stride(-1) != 1 or t.stride(-2) != dim for t in (q, k, v)):
        return None
    return native_kernels(q, k, v)


class NativeKernels:
    """The loaded kernels. Tensors are CPU bf16 unless said otherwise, contiguous unless said
    otherwise; ``out`` arguments are written in place and returned."""

    def __init__(self, library: ctypes.CDLL) -> None:
        P, I = _POINTER, _INT
        self._q4 = _function(library, "specpath_q4_matmul", P, P, P, P, I, I, I, I)
        self._q8 = _function(library, "specpath_q8_matmul", P, P, P, P, I, I, I, I)
        self._q8a16 = _function(library, "specpath_q8a16_matmul", P, P, P, P, I, I, I, I)
        self.vnni = os.environ.get(VNNI_SWITCH, "1") != "0" and bool(library.specpath_vnni_supported())
        """The CPU has AVX512-VNNI (and ``SPECPATH_VNNI`` is not 0): :meth:`q8a16` runs, and a
        drafter's int8 layers take it (:class:`~specpath_engine.quantization.Int8Linear`)."""
        self._bf16 = _function(library, "specpath_bf16_matmul", P, P, P, I, I, I, I)
        self._tile_pack = _function(library, "specpath_bf16_tile_pack", P, P, I, I)
        self._bf16_tiled = _function(library, "specpath_bf16_tile_matmul", P, P, P, I, I, I, I)
        self._q8_tiled = _function(library, "specpath_q8_tile_matmul", P, P, P, P, I, I, I, I)
        self._linear = _function(library, "specpath_linear_matmul", ctypes.POINTER(Linear), P, P, I)
        self._dual_passes = library.specpath_dual_weight_passes
        self._dual_passes.argtypes, self._dual_passes.restype = [], ctypes.POINTER(ctypes.c_int64 * 2)
        self.tiles = os.environ.get(AMX_SWITCH, "1") != "0" and bool(library.specpath_bf16_tile_supported())
        """bf16 matmuls run on AMX tiles (:meth:`bf16_tiled`, weights in :meth:`tile_pack`'s layout)."""
        self._rms_norm = _function(library, "specpath_rms_norm", P, P, P, P, P, I, I, ctypes.c_float)
        self._rope = _function(library, "specpath_rope", P, I, P, P, P, I, I, I, I)
        self._silu_mul = _function(library, "specpath_silu_mul", P, P, I, I)
        L, F = ctypes.POINTER(Linear), ctypes.c_float
        self._layer_pre = _function(library, "specpath_layer_pre", P, P, F, L, P, P, I, I, I, I, P)
        self._layer_post = _function(library, "specpath_layer_post", P, P, L, P, F, L, L, I, P)
        self._attention = _function(library, "specpath_attention", P, I, P, I, P, I, P, P, I, I, I, I, I, F, P, P, P)
        I64 = ctypes.c_int64
        self._attention_batch = _function(library, "specpath_attention_batch", P, I, P, I, P, I, P, P, I, P, P, P, I64,
                                          P, I64, I64, I, I, I, F, P)
        self._draft_chain = _function(library, "specpath_draft_chain", ctypes.POINTER(DraftHead), P, I, I, I, I, P, P,
                                      I, P, P, F, P, P, P)
        self._draft_propose = _function(library, "specpath_draft_propose", ctypes.POINTER(DraftHead), P, P, I, P, I,
                                        I, I, I, P, P, I, P, P, F, P, P, P, P, P)
        self._draft_propose_batch = _function(library, "specpath_draft_propose_batch", ctypes.POINTER(DraftHead), I,
                                              P, P, P, P, P, P, I, I, I, P, P, P, P, P, P, P, F, P, P, P, P, P, P)
        self._draft_tree = _function(library, "specpath_draft_tree", ctypes.POINTER(DraftHead), P, P, I, P, I, I, I,
                                     ctypes.c_double, I, I, I, P, P, I, P, P, F, P, P, P, P)
        self._draft_tree.restype = ctypes.c_int
        self._log_softmax_terms = _function(library, "specpath_log_softmax_terms", P, I, P)
        self._model_propose = _function(library, "specpath_model_propose", ctypes.POINTER(DraftModelHead), P, I, I, I,
                                        P, P, I64, P, P, I, I, I, F, P, P)
        self._block_propose = _function(library, "specpath_block_propose", ctypes.POINTER(BlockHead), I, P, P, P, I,
                                        I, P, P, P, P, P, I64, P, P, I, I, I, F, P)
        self._draft_timers = library.specpath_draft_timers
        self._draft_timers.argtypes, self._draft_timers.restype = [I], ctypes.POINTER(ctypes.c_double * 8)
        self._draft_argmax = _function(library, "specpath_draft_argmax", P, P, P, I)
        self._draft_argmax.restype = ctypes.c_int
        self._uniforms = _function(library, "specpath_uniforms", ctypes.c_uint64, ctypes.c_int64, P)
        self._gumbel = _function(library, "specpath_gumbel", ctypes.c_uint64, ctypes.c_int64, ctypes.c_float, P)
        self._decoder_stack = _function(library, "specpath_decoder_stack", P, I, P, P, P, I, I, I, I, P, I64, I64, P,
                                        I, F, P, I, P, P, P, P)

    def q4(self, levels: torch.Tensor, scale_mins: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out [M, N] = x [M, K] (bf16) @ w.T`` for 4-bit ``levels [N, K/2]`` (see the C file's
        layout) and fp32 ``scale_mins [N, K/32, 2]``; ``out`` is bf16 or fp32."""
        self._q4(levels.data_ptr(), scale_mins.data_ptr(), x.data_ptr(), out.data_ptr(),
                 out.dtype == torch.float32, x.shape[0], levels.shape[0], x.shape[1])
        return out

    def q8(self, weight: torch.Tensor, scales: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out [M, N] = x [M, K] (bf16) @ (weight * scales[:, None]).T`` for int8 ``weight [N, K]``
        and fp32 ``scales [N]``; ``out`` is bf16 or fp32."""
        self._q8(weight.data_ptr(), scales.data_ptr(), x.data_ptr(), out.data_ptr(),
                 out.dtype == torch.float32, x.shape[0], weight.shape[0], x.shape[1])
        return out

    def q8a16(self, weight: torch.Tensor, scales: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """:meth:`q8` with each row of ``x`` quantised to int16 (one fp32 scale a row) and the
        products summed exactly in int32 (AVX512-VNNI; only where :attr:`vnni`): about the bf16
        path's accuracy, not its bits."""
        if not self.vnni:
            raise RuntimeError("q8a16 needs AVX512-VNNI, which this CPU lacks")
        self._q8a16(weight.data_ptr(), scales.data_ptr(), x.data_ptr(), out.data_ptr(),
                    out.dtype == torch.float32, x.shape[0], weight.shape[0], x.shape[1])
        return out

    def tile_pack(self, weight: torch.Tensor) -> torch.Tensor:
        """A bf16 ``weight [N, K]`` (N a multiple of 16, K of 32) in the AMX tile layout, same shape."""
        packed = torch.empty_like(weight)
        self._tile_pack(weight.data_ptr(), packed.data_ptr(), weight.shape[0], weight.shape[1])
        return packed

    @staticmethod
    def tile_unpack(packed: torch.Tensor) -> torch.Tensor:
        """The ``[N, K]`` weight :meth:`tile_pack` laid out (a copy; for checks, not hot paths)."""
        n, k = packed.shape
        blocks = packed.reshape(n // 16, k // 32, 16, 16, 2)  # [out block, in block, input pair, output, pair]
        return blocks.permute(0, 3, 1, 2, 4).reshape(n, k).contiguous()

    def bf16_tiled(self, packed: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out [M, N] = x [M, K] @ weight.T`` for ``packed = tile_pack(weight)`` (only where
        :attr:`tiles`); ``out`` is bf16 or fp32."""
        self._bf16_tiled(packed.data_ptr(), x.data_ptr(), out.data_ptr(), out.dtype == torch.float32, x.shape[0],
                         packed.shape[0], x.shape[1])
        return out

    def q8_tiled(self, packed: torch.Tensor, scales: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """:meth:`q8` on the AMX tiles (only where :attr:`tiles`): ``packed = tile_pack(levels as
        bf16)`` of an int8 ``weight [N, K]``, fp32 ``scales [N]``; the same products, summed in
        another order; ``out`` is bf16 or fp32."""
        self._q8_tiled(packed.data_ptr(), scales.data_ptr(), x.data_ptr(), out.data_ptr(), out.dtype == torch.float32,
                       x.shape[0], packed.shape[0], x.shape[1])
        return out

    def linear(self, linear: Linear, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out [M, N] = x [M, K] @ weight.T`` (bf16) on the kernel ``linear``'s format takes, as
        the fused functions multiply by it (a dual-weight linear: by the rows, :data:`TILES_FROM_ROWS`)."""
        self._linear(ctypes.byref(linear), x.data_ptr(), out.data_ptr(), x.shape[0])
        return out

    def dual_weight_passes(self) -> tuple[int, int]:
        """Passes of dual-weight linears since the library loaded (any caller): (on the int8 kernel,
        on the tiles); a test diffs two readings to see which kernel its passes took."""
        counts = self._dual_passes().contents
        return int(counts[0]), int(counts[1])

    def uniforms(self, key: int, n: int) -> torch.Tensor:
        """float32 ``[n]``: entries 0..n-1 of ``key``'s counter-based uniform stream (uniforms.c)."""
        out = torch.empty(n, dtype=torch.float32)
        self._uniforms(key, n, out.data_ptr())
        return out

    def gumbel(self, key: int, n: int, first_step: float) -> torch.Tensor:
        """float32 ``[n]``: the Gumbel noise ``-log(max(-log(1 - u), first_step))`` of :meth:`uniforms`'
        ``u`` (uniforms.c: the same bits as ``specpath_engine.sample.noise``'s torch path)."""
        out = torch.empty(n, dtype=torch.float32)
        self._gumbel(key, n, first_step, out.data_ptr())
        return out

    def bf16(self, weight: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out [M, N] = x [M, K] @ weight.T`` for a bf16 ``weight [N, K]``; ``out`` is bf16 or fp32."""
        self._bf16(weight.data_ptr(), x.data_ptr(), out.data_ptr(), out.dtype == torch.float32, x.shape[0],
                   weight.shape[0], x.shape[1])
        return out

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """``weight * bf16(x * rsqrt(mean(x^2) + eps))`` over the last dimension."""
        out = torch.empty_like(x)
        self._rms_norm(x.data_ptr(), None, None, weight.data_ptr(), out.data_ptr(), x.numel() // x.shape[-1],
                       x.shape[-1], eps)
        return out

    def add_rms_norm(self, x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``(s, rms_norm(s))`` for ``s = x + delta`` (the residual add and the next norm at once)."""
        total, out = torch.empty_like(x), torch.empty_like(x)
        self._rms_norm(x.data_ptr(), delta.data_ptr(), total.data_ptr(), weight.data_ptr(), out.data_ptr(),
                       x.numel() // x.shape[-1], x.shape[-1], eps)
        return total, out

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate-half RoPE of ``x [T, H, D]`` (any stride between tokens; heads and dims
        contiguous) by ``cos``/``sin [T, D]``; a new contiguous tensor."""
        t, h, d = x.shape
        out = torch.empty((t, h, d), dtype=x.dtype)
        self._rope(x.data_ptr(), x.stride(0), cos.data_ptr(), sin.data_ptr(), out.data_ptr(), h * d, t, h, d)
        return out

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """``bf16(silu(gate)) * up`` for ``gate_up [..., 2F]`` (gate first)."""
        f = gate_up.shape[-1] // 2
        out = gate_up.new_empty((*gate_up.shape[:-1], f))
        self._silu_mul(gate_up.data_ptr(), out.data_ptr(), gate_up.numel() // (2 * f), f)
        return out


    def layer_pre(self, h: torch.Tensor, norm_weight: torch.Tensor | None, eps: float, qkv: Linear,
                  cos: torch.Tensor, sin: torch.Tensor, heads: int, kv_heads: int, head_dim: int) -> torch.Tensor:
        """``[T, heads + 2 kv_heads, head_dim]``: q, k (RoPE applied) and v of ``rms_norm(h) @ Wqkv``
        (of ``h @ Wqkv`` without ``norm_weight``)."""
        t = h.shape[0]
        out = h.new_empty((t, heads + 2 * kv_heads, head_dim))
        self._layer_pre(h.data_ptr(), None if norm_weight is None else norm_weight.data_ptr(), eps, qkv, cos.data_ptr(), sin.data_ptr(), t, heads,
                        kv_heads, head_dim, out.data_ptr())
        return out

    def layer_post(self, h: torch.Tensor, attn: torch.Tensor, o_proj: Linear, norm_weight: torch.Tensor, eps: float,
                   gate_up: Linear, down: Linear) -> torch.Tensor:
        """``h2 + down(silu(gate) * up)(rms_norm(h2))`` with ``h2 = h + attn @ Wo``: the rest of the layer."""
        out = torch.empty_like(h)
        self._layer_post(h.data_ptr(), attn.data_ptr(), o_proj, norm_weight.data_ptr(), eps, gate_up, down, h.shape[0],
                         out.data_ptr())
        return out


    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_cache: torch.Tensor,
                  value_cache: torch.Tensor, length: int, mask: torch.Tensor | None = None,
                  slots: torch.Tensor | None = None) -> torch.Tensor:
        """Attention of the newest ``Q`` tokens (``q [Q, H, D]``, ``k``/``v [Q, KV, D]``, any
        stride between tokens) over ``length`` cached positions of ``key_cache``/``value_cache``
        (contiguous ``[slots, KV, D]``), writing k/v at positions ``length - Q`` onwards first;
        position ``p`` lives at row ``p`` of the caches, or at row ``slots[p]`` where int64
        ``slots [length]`` is given (a paged request: the same bits as one run of slots); causal,
        or the keys ``mask [Q, length]`` (bool) admits per query; ``[Q, H, D]``."""
        tokens, heads, dim = q.shape
        out = q.new_empty((tokens, heads, dim))
        self._attention(q.data_ptr(), q.stride(0), k.data_ptr(), k.stride(0), v.data_ptr(), v.stride(0),
                        key_cache.data_ptr(), value_cache.data_ptr(), length, tokens, heads, k.shape[1], dim,
                        dim**-0.5, None if mask is None else mask.data_ptr(), None if slots is None else slots.data_ptr(),
                        out.data_ptr())
        return out


    def attention_batch(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_cache: torch.Tensor,
                        value_cache: torch.Tensor, query_start: torch.Tensor, lengths: torch.Tensor,
                        slots: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`attention` for a batch of requests in one call, each row with the bits it gets
        there for its request alone. Request ``b``'s new tokens are rows ``query_start[b] ..
        query_start[b+1]`` of ``q [T, H, D]`` / ``k``, ``v [T, KV, D]`` (any stride between tokens),
        its last positions of ``lengths[b]``; its position ``p`` lives at row ``slots[b, p]`` of the
        whole caches (contiguous ``[slots, KV, D]``). int64 ``query_start [B+1]``, ``lengths [B]``,
        ``slots [B, >= max(lengths)]`` (contiguous rows). Causal, or bool ``mask [B, >= Q, >= L]``
        (last dimension contiguous): request ``b``'s query ``i`` sees position ``j`` where
        ``mask[b, i, j]``. ``[T, H, D]``."""
        tokens, heads, dim = q.shape
        out = q.new_empty((tokens, heads, dim))
        self._attention_batch(q.data_ptr(), q.stride(0), k.data_ptr(), k.stride(0), v.data_ptr(), v.stride(0),
                              key_cache.data_ptr(), value_cache.data_ptr(), lengths.shape[0], query_start.data_ptr(),
                              lengths.data_ptr(), slots.data_ptr(), slots.stride(0),
                              None if mask is None else mask.data_ptr(), 0 if mask is None else mask.stride(0),
                              0 if mask is None else mask.stride(1), heads, k.shape[1], dim, dim**-0.5, out.data_ptr())
        return out
    def draft_chain(self, head: DraftHead, a: torch.Tensor, k: int, heads: int, kv_heads: int, head_dim: int,
                    key_cache: torch.Tensor, value_cache: torch.Tensor, first_position: int, cos: torch.Tensor,
                    sin: torch.Tensor, noise: torch.Tensor | None = None,
                    logps: torch.Tensor | None = None) -> torch.Tensor:
        """K greedy drafts (int64 target ids ``[K]``) of ``head`` from its output ``a [1, d]`` at
        the last committed position: draft j > 0 runs the layer at ``first_position + j - 1`` with
        ``cos``/``sin [K-1, head_dim]`` row j - 1, its k/v written into ``key_cache``/``value_cache``
        (one request's row, ``[positions, KV, D]``). The per-op chain's tokens and KV, to the bit.
        ``noise``: fp32 ``[K, n]`` added to draft j's logits (LM-head rows, ``head.row_ids``), a
        seeded request's race (``specpath_drafting.coupling.scaled_noise``); None: argmax.
        ``logps``: float64 ``[K]`` (or None), filled with each draft's log-probability under the head."""
        tokens = torch.empty(k, dtype=torch.int64)
        if noise is not None:
            noise = noise.float().contiguous()
        self._draft_chain(ctypes.byref(head), a.data_ptr(), k, heads, kv_heads, head_dim, key_cache.data_ptr(),
                          value_cache.data_ptr(), first_position, cos.data_ptr(), sin.data_ptr(), head_dim**-0.5,
                          None if noise is None else noise.data_ptr(), None if logps is None else logps.data_ptr(),
                          tokens.data_ptr())
        return tokens

    DRAFT_SECTIONS = ("ingest input", "ingest layer", "chain LM head", "chain argmax", "chain layers", "whole call")
    """What :meth:`draft_timers` times, in its order (then the count of calls and of ingested positions)."""

    def draft_timers(self, on: bool) -> list[float]:
        """Switch the native propose's section timers on or off (``draft_chain.c``: off costs nothing
        measurable) and read them: nanoseconds summed per :data:`DRAFT_SECTIONS` entry since the
        library loaded, then calls and ingested positions (a benchmark diffs two readings)."""
        return list(self._draft_timers(int(on)).contents)

    def draft_argmax(self, logits: torch.Tensor, bias: torch.Tensor | None = None,
                     noise: torch.Tensor | None = None) -> int:
        """The chain's pick of one draft: the first index of the largest ``(logits + bias) + noise``
        (bf16 ``logits [n]``, fp32 ``bias``/``noise [n]`` or None; n a multiple of 16), torch's
        ``argmax`` of that sum for NaN-free logits."""
        return self._draft_argmax(logits.data_ptr(), None if bias is None else bias.data_ptr(),
                                  None if noise is None else noise.data_ptr(), logits.shape[-1])

    def draft_propose(self, head: DraftHead, taps: torch.Tensor | None, ids: torch.Tensor, a: torch.Tensor, k: int,
                      heads: int, kv_heads: int, head_dim: int, key_cache: torch.Tensor, value_cache: torch.Tensor,
                      first_position: int, cos: torch.Tensor, sin: torch.Tensor,
                      noise: torch.Tensor | None = None, floor: float | None = None,
                      logps: torch.Tensor | None = None) -> torch.Tensor:
        """One request's propose in one call (``head.ingests``): the ingest of its T newly
        committed positions ``first_position ..`` (``taps [T, fc inputs]``, the target's hidden
        states there, flat; int64 ``ids [T]``, the token one position ahead of each), which writes
        their k/v into ``key_cache``/``value_cache`` (one request's row, ``[positions, KV, D]``) and
        the head's output at the last of them into ``a [d]`` (in place; with T = 0 ``a`` is read as
        it is), then :meth:`draft_chain`'s K drafts from ``a`` (int64 target ids ``[K]``).
        ``cos``/``sin [>= T + K - 1, head_dim]``: positions ``first_position`` onwards. ``noise``:
        as :meth:`draft_chain`'s (fp32 ``[K, n]``, a seeded request's race; None: greedy). The
        per-op ingest's KV and output and the per-op chain's drafts, to the bit.

        ``floor``: the least summed log-probability (under the head) the chain may reach: it stops
        before the draft (after the first) that would take it below, so fewer than K come back.
        ``logps``: float64 ``[K]`` (or None), filled with each returned draft's log-probability."""
        tokens = torch.empty(k, dtype=torch.int64)
        if noise is not None:
            noise = noise.float().contiguous()
        t = ids.shape[0]
        kept = ctypes.c_int64(k)
        bound = None if floor is None else ctypes.c_double(floor)
        self._draft_propose(ctypes.byref(head), None if taps is None else taps.data_ptr(), ids.data_ptr(), t,
                            a.data_ptr(), k, heads, kv_heads, head_dim, key_cache.data_ptr(), value_cache.data_ptr(),
                            first_position, cos.data_ptr(), sin.data_ptr(), head_dim**-0.5,
                            None if noise is None else noise.data_ptr(),
                            None if bound is None else ctypes.addressof(bound),
                            None if logps is None else logps.data_ptr(), ctypes.addressof(kept), tokens.data_ptr())
        return tokens[: kept.value]

    def block_propose(self, head: BlockHead, taps: torch.Tensor | None, ingest_slots: torch.Tensor,
                      ingest_pos: torch.Tensor, ids: torch.Tensor, row_base: torch.Tensor, anchor_pos: torch.Tensor,
                      keys: torch.Tensor, values: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
                      kv_heads: int, head_dim: int) -> torch.Tensor:
        """A block drafter's step in one call (``block_draft.c``): the ingest of ``taps [T, num_taps,
        target d]`` (positions int64 ``ingest_pos [T]`` at slots ``ingest_slots [T]`` of every layer),
        then the block pass of R requests: int64 ``ids [R, B]`` (negative: a mask slot), request
        r's row at slot ``row_base[r]`` and its block at ``anchor_pos[r]`` onwards. ``keys``/``values``
        ``[layers, slots, KV, D]``; ``cos``/``sin`` the rotary tables (row p: position p). Returns the
        block's outputs ``[R, B, d]``: the per-op ingest's KV and block pass's outputs, to the bit."""
        num, block = ids.shape
        d = head.stack.layers[0].o_proj.contents.out_features
        out = torch.empty(num, block, d, dtype=torch.bfloat16)
        t = ingest_slots.shape[0]
        self._block_propose(ctypes.byref(head), t, None if taps is None else taps.data_ptr(), ingest_slots.data_ptr(),
                            ingest_pos.data_ptr(), num, block, ids.data_ptr(), row_base.data_ptr(),
                            anchor_pos.data_ptr(), keys.data_ptr(), values.data_ptr(), keys.stride(0),
                            cos.data_ptr(), sin.data_ptr(), heads, kv_heads, head_dim, head_dim**-0.5, out.data_ptr())
        return out

    def model_propose(self, head: DraftModelHead, tokens: torch.Tensor, k: int, first_position: int,
                      keys: torch.Tensor, values: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
                      kv_heads: int, head_dim: int, noise: torch.Tensor | None = None) -> torch.Tensor:
        """A draft model's K greedy (or raced) drafts (int64 target ids ``[K]``) for one request in one call
        (``model_draft.c``): int64 ``tokens [T]`` at positions ``first_position ..`` (its unseen
        tokens, the newest last) go through every layer, their keys and values written into
        ``keys``/``values`` (``[layers, row_len, KV, D]``: the request's row of every layer,
        position p at row p), then one pass per further draft. ``cos``/``sin``: the rotary
        tables (row p: position p). ``noise``: None (greedy) or fp32 ``[K, n]`` added to draft j's
        logits (the head's row order; a seeded request's race, ``coupling.scaled_noise``). The
        per-op forward's KV and drafts, to the bit."""
        drafts = torch.empty(k, dtype=torch.int64)
        if noise is not None:
            noise = noise.float().contiguous()
        self._model_propose(ctypes.byref(head), tokens.data_ptr(), tokens.shape[0], k, first_position,
                            keys.data_ptr(), values.data_ptr(), keys.stride(0), cos.data_ptr(), sin.data_ptr(),
                            heads, kv_heads, head_dim, head_dim**-0.5, None if noise is None else noise.data_ptr(),
                            drafts.data_ptr())
        return drafts

    def draft_tree(self, head: DraftHead, taps: torch.Tensor | None, ids: torch.Tensor, a: torch.Tensor, budget: int,
                   topk: int, passes: int, heads: int, kv_heads: int, head_dim: int, key_cache: torch.Tensor,
                   value_cache: torch.Tensor, first_position: int, cos: torch.Tensor,
                   sin: torch.Tensor, min_score: float = -math.inf,
                   noise: torch.Tensor | None = None) -> tuple[list[int], list[int], list[float]]:
        """One request's ingest (as :meth:`draft_propose`'s, no chain) and then its dynamic draft
        tree of at most ``budget`` nodes (``specpath_drafting.tree_search.grow_tree`` over the
        per-op head passes, with :meth:`log_softmax_terms`' log-probabilities): ``topk`` nodes per
        pass for ``passes`` passes, each node's k/v in the scratch slots past the committed
        positions of ``key_cache``/``value_cache`` (one request's row, ``[positions, KV, D]``).
        ``cos``/``sin``: the rotary table (row p: position p). Returns the nodes' target ids,
        their parents (node index, -1: the root) and their path log-probabilities, best first;
        none scored below ``min_score`` (nor a pass run whose best candidates all are). ``noise``:
        None, or a seeded request's race (fp32 ``[passes + 1, n]``, ``T G`` in the head's row order:
        row d is added to the scores of depth d before they are ranked and normalised)."""
        if noise is not None:
            if tuple(noise.shape) != (passes + 1, head.lm_head.contents.out_features):
                raise ValueError(f"draft_tree: noise of shape {tuple(noise.shape)}, want [passes + 1, draft vocabulary]")
            noise = noise.float().contiguous()
        tokens = torch.empty(max(budget, 1), dtype=torch.int64)
        parents = torch.empty(max(budget, 1), dtype=torch.int64)
        scores = torch.empty(max(budget, 1), dtype=torch.float64)
        n = self._draft_tree(ctypes.byref(head), None if taps is None else taps.data_ptr(), ids.data_ptr(),
                             ids.shape[0], a.data_ptr(), budget, topk, passes, min_score, heads, kv_heads, head_dim,
                             key_cache.data_ptr(), value_cache.data_ptr(), first_position, cos.data_ptr(),
                             sin.data_ptr(), head_dim**-0.5, None if noise is None else noise.data_ptr(),
                             tokens.data_ptr(), parents.data_ptr(), scores.data_ptr())
        return tokens[:n].tolist(), parents[:n].tolist(), scores[:n].tolist()

    def log_softmax_terms(self, scores: torch.Tensor) -> tuple[float, float]:
        """``(max, log(sum(exp(v - max))))`` of fp32 ``scores [n]`` (``-inf`` entries count
        nothing), as the native tree computes them: a log-probability is ``(v - max) - that``."""
        v = scores.float().contiguous()
        out = (ctypes.c_double * 2)()
        self._log_softmax_terms(v.data_ptr(), v.shape[0], ctypes.cast(out, ctypes.c_void_p))
        return out[0], out[1]

    def draft_propose_batch(self, head: DraftHead, taps: torch.Tensor | None, ids: torch.Tensor, plan: Any,
                            outputs: torch.Tensor, heads: int, kv_heads: int, head_dim: int, key_cache: torch.Tensor,
                            value_cache: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                            noise: torch.Tensor | None = None, floors: Any = None,
                            logps: torch.Tensor | None = None, kept: Any = None) -> torch.Tensor:
        """:meth:`draft_propose` for R requests in one call, every weight read once per pass for
        all their rows; each request's drafts, KV and output the bits of its own call (with dual
        weights, :func:`keep_tile_copies`, the bits of the per-op path run with the same passes: a
        pass's kernel follows its rows, so a request's own call may take int8 where the batch
        took the tiles).
        ``plan``: int64 ``[6, R]`` (numpy or torch, contiguous), per request its count T of newly
        committed positions, its row of ``outputs``, its K drafts (0: ingest only), its first KV
        slot (its position p at row first slot + p of ``key_cache``/``value_cache``, the whole
        drafter KV layer ``[slots, KV, D]``), its first new position p0, and its first row of
        ``noise`` (-1: greedy). ``taps [sum T, fc inputs]`` and int64 ``ids [sum T]``: the
        requests' rows one after another. ``outputs [rows, d]``: the kept outputs (in place, as
        :meth:`draft_propose`'s ``a``). ``cos``/``sin [>= positions, head_dim]``: row p is
        position p (the rotary cache). ``noise``: fp32 rows (the coupled requests' ``[K, n]``
        stacked), or None. Returns the drafts (int64 target ids ``[sum K]``), request after request.
        ``floors``: float64 ``[R]`` (numpy, contiguous) or None, each request's :meth:`draft_propose`
        floor: a request that stops early keeps its K slots (its later ones unset); ``kept``: int64
        ``[R]`` numpy (or None), filled with the drafts each made; ``logps``: as :meth:`draft_propose`'s,
        ``[sum K]``."""
        counts, rows, ks, slots, p0s, noise_rows = (int(plan.data_ptr() if isinstance(plan, torch.Tensor) else
                                                        plan.ctypes.data) + 8 * plan.shape[1] * i for i in range(6))
        tokens = torch.empty(int(plan[2].sum()), dtype=torch.int64)
        self._draft_propose_batch(ctypes.byref(head), plan.shape[1], None if taps is None else taps.data_ptr(),
                                  ids.data_ptr(), counts, outputs.data_ptr(), rows, ks, heads, kv_heads, head_dim,
                                  key_cache.data_ptr(), value_cache.data_ptr(), slots, p0s, cos.data_ptr(),
                                  sin.data_ptr(), p0s, head_dim**-0.5, None if noise is None else noise.data_ptr(),
                                  noise_rows, None if floors is None else floors.ctypes.data,
                                  None if logps is None else logps.data_ptr(),
                                  None if kept is None else kept.ctypes.data, tokens.data_ptr())
        return tokens

    def decoder_stack(self, stack: DecoderStack, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
                      kv_heads: int, head_dim: int, kv: torch.Tensor, first_slot: int, length: int,
                      mask: torch.Tensor | None = None, capture: tuple[int, ...] = (),
                      slots: torch.Tensor | None = None,
                      store: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``h [T, hidden]`` through every layer of ``stack`` for one request: per layer exactly
        :meth:`layer_pre`, :meth:`attention` and :meth:`layer_post` (the same bits), in one call.
        ``kv [layers, 2, slots, KV, D]`` holds the request's ``length`` positions (counting the T
        new ones, written on the way) as one run from ``first_slot``, or where int64 ``slots
        [length]`` says; ``mask`` as :meth:`attention`'s. Returns the last layer's output and,
        when ``capture`` names layers, their outputs ``[T, len(capture), hidden]``; with ``store``
        ``(data [rows, len(capture), hidden], int64 rows [T])`` (h's dtype, contiguous) they go to
        those rows of ``data`` instead (None returned): a feature store written in the call."""
        tokens, hidden = h.shape
        out = torch.empty_like(h)
        rows = None
        if store is not None and capture:
            captured, rows = store
        else:
            captured = h.new_empty((tokens, len(capture), hidden)) if capture else None
        layers = (ctypes.c_int * len(capture))(*capture)
        self._decoder_stack(stack.layers, stack.num_layers, h.data_ptr(), cos.data_ptr(), sin.data_ptr(), tokens,
                            heads, kv_heads, head_dim, kv.data_ptr(), kv.shape[2], first_slot,
                            None if slots is None else slots.data_ptr(), length, head_dim**-0.5, None if mask is None else mask.data_ptr(), len(capture), layers,
                            None if captured is None else captured.data_ptr(),
                            None if rows is None else rows.data_ptr(), out.data_ptr())
        return out, None if rows is not None else captured


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def _build(compiler: str) -> Path:
    """The library for this source and these flags, compiled unless already in the cache."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in (*SOURCES, *HEADERS)) + " ".join((compiler, *FLAGS)).encode())
    target = cache_dir() / f"specpath_native-{digest.hexdigest()[:16]}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        command = [compiler, *FLAGS, *map(str, SOURCES), "-o", str(built), *LIBS]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as exc:
            raise RuntimeError(f"the C compiler {compiler} could not run: {exc.strerror or exc}") from None
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{Path(compiler).name} could not build the native kernels: {last}")
        os.replace(built, target)  # atomic: concurrent builders agree on the file
    return target


@functools.lru_cache(maxsize=None)
def _load() -> tuple[NativeKernels | None, str | None]:
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return None, f"{ENV_SWITCH}=0"
    compiler = _compiler()
    if compiler is None:
        return None, "no C compiler found (set CC)"
    try:
        library = ctypes.CDLL(str(_build(compiler)))
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        return None, str(exc).splitlines()[0]
    if not library.specpath_rows_matmul_supported():
        return None, "this CPU lacks AVX512-BF16"
    return NativeKernels(library), None


def kernels() -> NativeKernels | None:
    """The native kernels, built and loaded once per process; ``None`` where they cannot run."""
    return _load()[0]


def unavailable_reason() -> str | None:
    """Why :func:`kernels` is ``None`` (``None`` when the kernels are available)."""
    return _load()[1]


@contextlib.contextmanager
def disabled():
    """Within the block :func:`kernels` is ``None``, so layers built there keep torch's kernels for
    good (for side-by-side measurements); layers built before must not run inside it."""
    saved = os.environ.get(ENV_SWITCH)
    os.environ[ENV_SWITCH] = "0"
    _load.cache_clear()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(ENV_SWITCH, None)
        else:
            os.environ[ENV_SWITCH] = saved
        _load.cache_clear()
