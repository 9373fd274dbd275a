"""Pytest fixtures shared by the core's and the plugins' test suites.

Import one into a ``conftest.py`` to use it there (``from specpath_engine.testing.fixtures import
one_torch_thread``): an autouse fixture applies to every test below that conftest. This module
imports pytest; ``specpath`` never imports it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Tiny models run several times faster on one torch thread (no OpenMP barriers on a busy,
    small machine); the caller's thread count is restored after the test."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
