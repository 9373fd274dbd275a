"""Helpers for tests of code that takes the native CPU kernels (:mod:`specpath_engine.modeling.native`)
where they run: skip where they cannot be built, and check that a path really took them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from specpath_engine.modeling import native


def native_kernels_missing() -> str | None:
    """Why the native kernels cannot run here (for ``pytest.mark.skipif``), or None."""
    return None if native.kernels() is not None else f"native kernels unavailable: {native.unavailable_reason()}"


@contextlib.contextmanager
def counting_native_attention() -> Iterator[list[int]]:
    """Counts the native attention calls made inside the block (a one-item list)."""
    kernels = type(native.kernels())
    original, calls = kernels.attention, [0]

    def counted(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    kernels.attention = counted
    try:
        yield calls
    finally:
        kernels.attention = original
