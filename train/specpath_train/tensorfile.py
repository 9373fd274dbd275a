"""safetensors files larger than memory: read as mapped views, written a slice at a time.

A drafter's feature cache is ~4.6 GB a data round (four 576-wide layers of 3,700 windows of 256
tokens, float16); several rounds together outgrow a 24 GB machine when they are loaded, or
merged, whole. :func:`mapped` gives every tensor of a file as a view of the file mapped into
memory (pages read as training touches them, evictable, never copied), and
:func:`write_streamed` writes a file from slices produced one after another, so the peak memory
is one slice. The files are plain safetensors files: ``safetensors`` reads them and writes the
files :func:`mapped` reads.

Example::

    write_streamed(path, {"x": (torch.float16, (1000, 64), lambda: (rows(i) for i in range(10)))})
    x = mapped(path)["x"]  # [1000, 64] float16, read from disk as it is indexed
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
NAMES = {dtype: name for name, dtype in DTYPES.items()}


def header(path: str | Path) -> tuple[int, dict]:
    """(where the data begins, the JSON header) of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def mapped(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the file at ``path``, a view of the file mapped privately into memory
    (writes to a view would stay in memory, never reach the file)."""
    path = Path(path)
    base, head = header(path)
    storage = torch.UntypedStorage.from_file(str(path), shared=False, nbytes=path.stat().st_size)
    out = {}
    for name, info in head.items():
        if name == "__metadata__":
            continue
        dtype = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        size = dtype.itemsize
        shape = tuple(info["shape"])
        if (base + begin) % size or end - begin != size * _numel(shape):
            raise ValueError(f"{path}: tensor {name} is misaligned or its size disagrees with its shape")
        out[name] = torch.empty(0, dtype=dtype).set_(storage, (base + begin) // size, shape)
    return out


def write_streamed(path: str | Path,
                   tensors: Mapping[str, tuple[torch.dtype, Sequence[int], Callable[[], Iterable[torch.Tensor]]]],
                   metadata: Mapping[str, str] | None = None) -> Path:
    """Write ``tensors`` (name -> (dtype, shape, a function yielding its consecutive slices along
    the first dimension)) to ``path`` as a safetensors file; each slice is written as it comes."""
    path = Path(path)
    order = sorted(tensors, key=lambda n: (-tensors[n][0].itemsize, n))  # larger items first: every tensor aligned
    head: dict = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name in order:
        dtype, shape, _ = tensors[name]
        nbytes = dtype.itemsize * _numel(shape)
        head[name] = {"dtype": NAMES[dtype], "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    tmp = path.with_name(path.name + ".part")
    try:
        _write(tmp, text, order, tensors)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    return path


def _write(tmp: Path, text: bytes, order: list[str], tensors: Mapping) -> None:
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in order:
            dtype, shape, slices = tensors[name]
            written = 0
            for t in slices():
                if t.dtype != dtype or tuple(t.shape[1:]) != tuple(shape[1:]):
                    raise ValueError(f"{name}: a slice of {t.dtype} {tuple(t.shape)} for a tensor of {dtype} {tuple(shape)}")
                if t.numel():
                    f.write(t.contiguous().view(torch.uint8).numpy())
                written += t.shape[0]
            if written != shape[0]:
                raise ValueError(f"{name}: {written} rows written of {shape[0]}")


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
