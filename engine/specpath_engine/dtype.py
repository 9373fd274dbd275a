"""The engine's float type: ``dtype="auto"`` and the memory the KV cache may take.

``auto`` keeps a float32 checkpoint in float32 (its numbers are what the user saved). Checkpoints
stored in bf16/fp16 and quantised ones (GGUF) run in bfloat16 where the CPU computes it natively
(AVX512_BF16 or AMX): decoding is memory-bound, and bf16 halves the bytes each token reads. On
CPUs without native bf16, torch emulates it slowly, so those run in float32.
"""

from __future__ import annotations

import functools
import re

ENGINE_DTYPES = ("auto", "float32", "bfloat16", "float16")
_ALIASES = {"float": "float32", "half": "float16"}
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True when /proc/cpuinfo lists AVX512_BF16 or AMX-BF16 (Linux x86); False elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return any(flag in flags for flag in _BF16_CPU_FLAGS)
    except OSError:
        pass
    return False


def resolve_dtype(requested: str, checkpoint_dtype: str | None, device: str = "cpu") -> str:
    """The dtype name the engine runs in (see the module docstring); ValueError for a bad name."""
    requested = _ALIASES.get(requested, requested)
    if requested not in ENGINE_DTYPES:
        raise ValueError(f"dtype: {requested!r} is not one of {', '.join(ENGINE_DTYPES)}")
    if requested != "auto":
        return requested
    if checkpoint_dtype in ("float32", "float"):
        return "float32"
    if not str(device).startswith("cpu"):
        return checkpoint_dtype if checkpoint_dtype in ("bfloat16", "float16") else "bfloat16"
    return "bfloat16" if cpu_has_native_bf16() else "float32"


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?\s*$", re.IGNORECASE)


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string such as ``64MiB``, ``1.5GB``, ``200m`` (ValueError otherwise)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 64MiB, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"expected a positive size, got {value}")
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"expected a size such as 64MiB or 1GB, got {value!r}")
    number, unit, binary = match.groups()
    base = 1024 if binary or not unit else 1000
    power = " kmgt".index(unit.lower() or " ")
    size = int(float(number) * base**power)
    if size <= 0:
        raise ValueError(f"expected a positive size, got {value!r}")
    return size
