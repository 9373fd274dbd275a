"""Malformed GGUF files, byte by byte: a valid tiny file decoded into typed parts that a test
edits (a metadata value, a tensor's dims or offset, the alignment) and encodes again.

``gguf.GGUFWriter`` refuses most defects on purpose, so the parts are written here with
``struct``, bypassing every check the reader must make itself.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import attrs

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY, UINT32, UINT64, FLOAT32, INT32 = 8, 9, 4, 10, 6, 5


@attrs.define
class Value:
    """A typed metadata value: ``kind`` a GGUF value type; arrays hold ``(item_kind, [values])``."""

    kind: int
    value: Any


@attrs.define
class Tensor:
    name: str
    ne: list[int]  # GGUF order (innermost first)
    type_id: int
    offset: int


@attrs.define
class Parts:
    version: int
    metadata: dict[str, Value]
    tensors: list[Tensor]
    data: bytes
    alignment: int = 32

    def encode(self, *, num_kv: int | None = None, num_tensors: int | None = None, pad_to: int | None = None) -> bytes:
        """The file's bytes; ``num_kv``/``num_tensors`` override the header counts (lies),
        ``pad_to`` the alignment the data section is padded to (default: the declared one)."""
        out = bytearray(b"GGUF" + struct.pack("<I", self.version))
        out += struct.pack("<QQ", len(self.tensors) if num_tensors is None else num_tensors,
                           len(self.metadata) if num_kv is None else num_kv)
        for key, value in self.metadata.items():
            out += _string(key) + struct.pack("<I", value.kind) + _value(value.kind, value.value)
        for t in self.tensors:
            out += _string(t.name) + struct.pack("<I", len(t.ne)) + b"".join(struct.pack("<Q", d) for d in t.ne)
            out += struct.pack("<IQ", t.type_id, t.offset)
        pad = pad_to or self.alignment
        out += b"\0" * (-len(out) % pad)
        return bytes(out + self.data)

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8", errors="surrogateescape")
    return struct.pack("<Q", len(raw)) + raw


def _value(kind: int, value: Any) -> bytes:
    if kind in _SCALARS:
        return struct.pack(_SCALARS[kind], value)
    if kind == STRING:
        return _string(value)
    if isinstance(value, bytes):  # pre-encoded (nested_array)
        return value
    item, items = value
    return struct.pack("<IQ", item, len(items)) + b"".join(_value(item, v) for v in items)


def nested_array(depth: int) -> Value:
    """``[[[...[1]...]]]``, ``depth`` arrays deep, pre-encoded (too deep to encode recursively)."""
    inner = struct.pack("<IQI", UINT32, 1, 1)
    outer = struct.pack("<IQ", ARRAY, 1) * (depth - 1)
    return Value(ARRAY, outer + inner)


class _Decoder:
    def __init__(self, raw: bytes) -> None:
        self.raw, self.at = raw, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.raw, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.take("<Q")
        self.at += n
        return self.raw[self.at - n : self.at].decode("utf-8", errors="surrogateescape")

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == STRING:
            return self.string()
        item, count = self.take("<I"), self.take("<Q")
        return (item, [self.value(item) for _ in range(count)])


def decode(raw: bytes) -> Parts:
    """The typed parts of a valid GGUF file (tensor data from the aligned data section)."""
    d = _Decoder(raw)
    assert raw[:4] == b"GGUF"
    d.at = 4
    version, num_tensors, num_kv = d.take("<I"), d.take("<Q"), d.take("<Q")
    metadata = {}
    for _ in range(num_kv):
        key = d.string()
        kind = d.take("<I")
        metadata[key] = Value(kind, d.value(kind))
    tensors = []
    for _ in range(num_tensors):
        name = d.string()
        ne = [d.take("<Q") for _ in range(d.take("<I"))]
        tensors.append(Tensor(name, ne, d.take("<I"), d.take("<Q")))
    alignment = metadata["general.alignment"].value if "general.alignment" in metadata else 32
    start = -(-d.at // alignment) * alignment
    return Parts(version, metadata, tensors, raw[start:], alignment)


def tiny_parts(tmp_path: Path, **kwargs: Any) -> Parts:
    """The parts of ``gguf_helpers.write_tiny_gguf``'s file (F32 matrices unless told)."""
    import gguf_helpers

    file = tmp_path / "base.gguf"
    gguf_helpers.write_tiny_gguf(file, **{"matrix_type": "F32", "embed_type": "F32", **kwargs})
    return decode(file.read_bytes())
