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
    """Counts the native attention calls made inside the block (a one-item list); a drafter's
    fused chain or propose (:meth:`~specpath_engine.modeling.native.NativeKernels.draft_chain`,
    ``draft_propose``, ``draft_propose_batch``, a block drafter's ``block_propose``, a draft model's
    ``model_propose``), whose passes attend natively inside the one call, counts as one."""
    kernels = type(native.kernels())
    names = ("attention", "draft_chain", "draft_propose", "draft_propose_batch", "block_propose", "model_propose")
    originals, calls = {name: getattr(kernels, name) for name in names}, [0]

    def counting(original):
        def counted(self, *args, **kwargs):
            calls[0] += 1
            return original(self, *args, **kwargs)

        return counted

    for name, original in originals.items():
        setattr(kernels, name, counting(original))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(kernels, name, original)
