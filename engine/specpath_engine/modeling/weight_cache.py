"""A GGUF file's dequantised weights cached as safetensors, so a second process starts fast.

Dequantising SmolLM2's Q4_1 file takes ~2 s of a ~5 s ``LLM("smollm2-135m")``; reading the
same tensors back from a safetensors file is a memory map. Entries live under
``cache_root()/weights/`` keyed by the source's resolved path, size and mtime, the engine's
version and the dtype, so an edited or replaced file is dequantised afresh; each is written to a
temporary file and renamed, so concurrent processes never read half an entry. A cache that
cannot be written (read-only home) is skipped, never an error.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

FORMAT = 1
"""Bumped when what is cached changes meaning (tensor names, Q/K row order)."""

MIN_BYTES = 16 * 2**20
"""Smaller sources are dequantised every time: it is quick, and test files must not pile up."""


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("specpath-engine")
    except metadata.PackageNotFoundError:
        return "0"


def cache_file(source: Path, dtype: torch.dtype) -> Path:
    """Where the cached weights of ``source`` in ``dtype`` live."""
    from specpath_engine.cache import cache_root

    stat = source.stat()
    key = f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{_version()}|{FORMAT}|{dtype}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return cache_root() / "weights" / f"{source.stem}-{str(dtype).removeprefix('torch.')}-{digest}.safetensors"


def cached_state_dict(source: Path, dtype: torch.dtype,
                      build: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """``build()``'s tensors, from the cache when an entry for ``source`` exists, else built
    and stored (best effort)."""
    from safetensors.torch import load_file, save_file

    try:
        if source.stat().st_size < MIN_BYTES:
            return build()
        entry = cache_file(source, dtype)
    except OSError:
        return build()
    if entry.is_file():
        try:
            return load_file(str(entry))
        except Exception:  # noqa: BLE001 - a damaged entry is rebuilt, never fatal
            entry.unlink(missing_ok=True)
    tensors = build()
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        for stale in entry.parent.glob(f"{source.stem}-{str(dtype).removeprefix('torch.')}-*.safetensors"):
            stale.unlink(missing_ok=True)  # older versions of the same source
        fd, tmp = tempfile.mkstemp(prefix=f".{entry.name}-", dir=entry.parent)
        os.close(fd)
        try:
            save_file({k: v.contiguous() for k, v in _untied(tensors).items()}, tmp)
            os.replace(tmp, entry)
        finally:
            Path(tmp).unlink(missing_ok=True)
    except OSError:
        pass
    return tensors


def _untied(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses shared storage: keep one name per storage (the loader re-ties)."""
    seen: set[int] = set()
    out = {}
    for name, t in tensors.items():
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        out[name] = t
    return out
