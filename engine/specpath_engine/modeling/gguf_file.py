"""The GGUF container: metadata key/values and tensor descriptors, parsed in one pass.

The ``gguf`` package's ``GGUFReader`` builds a numpy view per array element, which takes
seconds for a 49k-token vocabulary; configuration code reads a file's metadata many times (once
per engine, once per draft), so the container is parsed here directly with ``struct`` (format
versions 2 and 3, little-endian). Tensor data stays in one read-only memory map; dequantising
it is :mod:`specpath_engine.modeling.gguf`'s job.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

import attrs

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# GGUF value types -> struct format (scalars); 8 = string, 9 = array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9


class GGUFFormatError(ValueError):
    """The bytes are not a GGUF file this reader understands."""


@attrs.frozen
class TensorInfo:
    name: str
    #: numpy order (outermost first): the reverse of GGUF's ``ne`` list
    shape: tuple[int, ...]
    #: ``GGMLQuantizationType`` value
    type_id: int
    #: byte offset from the start of the tensor data section
    offset: int


@attrs.frozen
class GGUFFile:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    #: absolute file offset of the tensor data section
    data_offset: int


def _read(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise GGUFFormatError("truncated file")
    return data


def _unpack(f: BinaryIO, fmt: str) -> Any:
    return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]


def _string(f: BinaryIO) -> str:
    return _read(f, _unpack(f, "<Q")).decode("utf-8", errors="surrogateescape")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind in _SCALARS:
        return _unpack(f, _SCALARS[kind])
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        item, count = _unpack(f, "<I"), _unpack(f, "<Q")
        if item == _STRING:
            out = []
            for _ in range(count):
                (n,) = struct.unpack("<Q", _read(f, 8))
                out.append(_read(f, n).decode("utf-8", errors="surrogateescape"))
            return out
        if item in _NUMPY:
            import numpy as np

            dtype = np.dtype(_NUMPY[item])
            return np.frombuffer(_read(f, dtype.itemsize * count), dtype=dtype).tolist()
        return [_value(f, item) for _ in range(count)]  # arrays of arrays
    raise GGUFFormatError(f"unknown metadata value type {kind}")


def parse_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Metadata and tensor descriptors of ``path`` (GGUFFormatError for anything malformed)."""
    path = Path(path)
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise GGUFFormatError("no GGUF magic number")
        version = _unpack(f, "<I")
        if version not in (2, 3):
            raise GGUFFormatError(f"GGUF version {version} is not supported (2 and 3 are)")
        num_tensors, num_kv = _unpack(f, "<Q"), _unpack(f, "<Q")
        metadata: dict[str, Any] = {}
        for _ in range(num_kv):
            key = _string(f)
            metadata[key] = _value(f, _unpack(f, "<I"))
        tensors = []
        for _ in range(num_tensors):
            name = _string(f)
            dims = [_unpack(f, "<Q") for _ in range(_unpack(f, "<I"))]
            type_id, offset = _unpack(f, "<I"), _unpack(f, "<Q")
            tensors.append(TensorInfo(name, tuple(reversed(dims)), type_id, offset))
        alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        position = f.tell()
        data_offset = -(-position // alignment) * alignment
    return GGUFFile(path=path, version=version, metadata=metadata, tensors=tuple(tensors), data_offset=data_offset)
