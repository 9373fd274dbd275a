"""The GGUF container: metadata key/values and tensor descriptors, parsed in one pass.

The ``gguf`` package's ``GGUFReader`` builds a numpy view per array element, which takes
seconds for a 49k-token vocabulary; configuration code reads a file's metadata many times (once
per engine, once per draft), so the container is parsed here directly with ``struct`` (format
versions 2 and 3, little-endian). Tensor data stays in one read-only memory map; dequantising
it is :mod:`specpath_engine.modeling.gguf`'s job.

Every count and length is checked against the bytes left in the file *before* anything is
read or allocated, so a hostile header is a :class:`GGUFFormatError` naming the field, never a
``MemoryError``, ``OverflowError`` or ``RecursionError``. The container rules of the GGUF spec
are enforced here too: an alignment that is a power of two and a multiple of 8, 1-4 dimensions
per tensor with every dimension >= 1 and the element count within int64, tensor offsets that
are multiples of the alignment, tensor data inside the file and not overlapping, no duplicate
keys or tensor names.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import attrs

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"
MAX_DIMS = 4
"""GGML_MAX_DIMS: llama.cpp's tensors have at most four dimensions."""
MAX_ARRAY_DEPTH = 4
"""Arrays of arrays nest at most this deep (real files nest none; the spec sets no limit)."""
INT64_MAX = 2**63 - 1

# GGUF value types -> struct format (scalars); 8 = string, 9 = array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
# The fewest bytes one value of a type takes (a string: its 8-byte length; an array: type + count)
_MIN_BYTES = {**{k: struct.calcsize(v) for k, v in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}
_MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, the smallest value
_MIN_TENSOR_BYTES = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dim, type, offset

GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 40),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110),
    22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}
"""ggml type id -> (elements per block, bytes per block): ``gguf.GGML_QUANT_SIZES`` without
importing the package (a test checks the two agree)."""


class GGUFFormatError(ValueError):
    """The bytes are not a GGUF file this reader understands (the message names the field)."""


@attrs.frozen
class TensorInfo:
    name: str
    #: numpy order (outermost first): the reverse of GGUF's ``ne`` list
    shape: tuple[int, ...]
    #: ``GGMLQuantizationType`` value
    type_id: int
    #: byte offset from the start of the tensor data section
    offset: int

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's data (whole blocks per row; checked by :func:`parse_gguf`)."""
        block, block_bytes = GGML_BLOCKS[self.type_id]
        return math.prod(self.shape[:-1]) * (self.shape[-1] // block) * block_bytes


@attrs.frozen
class GGUFFile:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    #: absolute file offset of the tensor data section
    data_offset: int
    alignment: int = DEFAULT_ALIGNMENT


class _Reader:
    """A buffer (the file's memory map) read with every length checked against the bytes left."""

    def __init__(self, buf: Any, size: int) -> None:
        self.buf, self.size, self.at = buf, size, 0

    @property
    def left(self) -> int:
        return self.size - self.at

    def fits(self, count: int, each: int, what: str) -> None:
        if count * each > self.size - self.at:
            raise GGUFFormatError(f"{what}: {count} items cannot fit in the {self.left} bytes left in the file")

    def read(self, n: int, what: str) -> bytes:
        if n > self.size - self.at:
            raise GGUFFormatError(f"{what}: {n} bytes needed, {self.left} left (truncated file)")
        self.at += n
        return self.buf[self.at - n : self.at]

    def unpack(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        if n > self.size - self.at:
            raise GGUFFormatError(f"{what}: {n} bytes needed, {self.left} left (truncated file)")
        self.at += n
        return struct.unpack_from(fmt, self.buf, self.at - n)[0]

    def string(self, what: str) -> str:
        return self.read(self.unpack("<Q", what), what).decode("utf-8", errors="surrogateescape")

    def strings(self, count: int, what: str) -> list[str]:
        """``count`` strings (a 49k-token vocabulary: the hot loop of the parse)."""
        buf, size, at, out = self.buf, self.size, self.at, []
        length = struct.Struct("<Q").unpack_from
        for i in range(count):
            if at + 8 > size:
                self.at = at
                raise GGUFFormatError(f"{what}[{i}]: truncated file")
            (n,) = length(buf, at)
            if at + 8 + n > size:
                self.at = at
                raise GGUFFormatError(f"{what}[{i}]: {n} bytes needed, {size - at - 8} left (truncated file)")
            out.append(buf[at + 8 : at + 8 + n].decode("utf-8", errors="surrogateescape"))
            at += 8 + n
        self.at = at
        return out

    def value(self, kind: int, what: str, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind], what)
        if kind == _STRING:
            return self.string(what)
        if kind != _ARRAY:
            raise GGUFFormatError(f"{what}: unknown value type {kind}")
        item, count = self.unpack("<I", what), self.unpack("<Q", what)
        if item not in _MIN_BYTES:
            raise GGUFFormatError(f"{what}: array of unknown value type {item}")
        self.fits(count, _MIN_BYTES[item], f"{what} (array)")
        if item == _STRING:
            return self.strings(count, what)
        if item in _NUMPY:
            import numpy as np

            dtype = np.dtype(_NUMPY[item])
            return np.frombuffer(self.read(dtype.itemsize * count, what), dtype=dtype).tolist()
        if depth >= MAX_ARRAY_DEPTH:
            raise GGUFFormatError(f"{what}: arrays nested more than {MAX_ARRAY_DEPTH} deep")
        return [self.value(item, f"{what}[{i}]", depth + 1) for i in range(count)]


def _alignment(metadata: dict[str, Any]) -> int:
    value = metadata.get(ALIGNMENT_KEY, DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int) or value < 8 or value % 8 or value & (value - 1):
        raise GGUFFormatError(f"{ALIGNMENT_KEY}: must be a power of two and a multiple of 8, got {value!r:.40}")
    return value


def _tensor(r: _Reader, index: int) -> TensorInfo:
    name = r.string(f"tensor {index} name")
    what = f"tensor {name!r:.80}"
    n_dims = r.unpack("<I", f"{what} dimension count")
    if not 1 <= n_dims <= MAX_DIMS:
        raise GGUFFormatError(f"{what}: {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
    dims = [r.unpack("<Q", f"{what} dimensions") for _ in range(n_dims)]
    if min(dims) < 1 or math.prod(dims) > INT64_MAX:
        raise GGUFFormatError(f"{what}: dimensions {dims} (each must be >= 1, their product within int64)")
    type_id, offset = r.unpack("<I", f"{what} type"), r.unpack("<Q", f"{what} offset")
    if type_id not in GGML_BLOCKS:
        raise GGUFFormatError(f"{what}: unknown ggml type {type_id}")
    if dims[0] % GGML_BLOCKS[type_id][0]:
        raise GGUFFormatError(f"{what}: rows of {dims[0]} are not whole blocks of {GGML_BLOCKS[type_id][0]}")
    return TensorInfo(name, tuple(reversed(dims)), type_id, offset)


def _header(r: _Reader) -> tuple[int, dict[str, Any], list[TensorInfo]]:
    version = r.unpack("<I", "header version")
    if version not in (2, 3):
        raise GGUFFormatError(f"GGUF version {version} is not supported (2 and 3 are)")
    num_tensors, num_kv = r.unpack("<Q", "header tensor count"), r.unpack("<Q", "header metadata count")
    r.fits(num_kv, _MIN_KV_BYTES, "header metadata count")
    metadata: dict[str, Any] = {}
    for i in range(num_kv):
        key = r.string(f"metadata key {i}")
        if key in metadata:
            raise GGUFFormatError(f"metadata key {key!r:.80} appears twice")
        metadata[key] = r.value(r.unpack("<I", f"{key!r:.80} type"), f"metadata {key!r:.80}")
    r.fits(num_tensors, _MIN_TENSOR_BYTES, "header tensor count")
    tensors: list[TensorInfo] = []
    names: set[str] = set()
    for i in range(num_tensors):
        tensor = _tensor(r, i)
        if tensor.name in names:
            raise GGUFFormatError(f"tensor {tensor.name!r:.80} appears twice")
        names.add(tensor.name)
        tensors.append(tensor)
    return version, metadata, tensors


def parse_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Metadata and tensor descriptors of ``path`` (GGUFFormatError for anything malformed)."""
    path = Path(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 4 or f.read(4) != MAGIC:
            raise GGUFFormatError("no GGUF magic number")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            r = _Reader(buf, size)
            r.at = 4
            version, metadata, tensors = _header(r)
            alignment = _alignment(metadata)
            data_offset = -(-r.at // alignment) * alignment
            _check_layout(tensors, alignment, size - data_offset)
    return GGUFFile(path=path, version=version, metadata=metadata, tensors=tuple(tensors), data_offset=data_offset,
                    alignment=alignment)


def _check_layout(tensors: list[TensorInfo], alignment: int, data_size: int) -> None:
    """Offsets aligned, data inside the file, no two tensors sharing bytes."""
    end, previous = 0, None
    for tensor in sorted(tensors, key=lambda t: t.offset):
        what = f"tensor {tensor.name!r:.80}"
        if tensor.offset % alignment:
            raise GGUFFormatError(f"{what}: offset {tensor.offset} is not a multiple of the alignment {alignment}")
        if tensor.offset < end:
            raise GGUFFormatError(f"{what}: data overlaps tensor {previous!r:.80}")
        end = tensor.offset + tensor.nbytes
        if end > data_size:
            raise GGUFFormatError(f"{what}: data runs past the end of the file")
        previous = tensor.name
