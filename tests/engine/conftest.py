import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

from engine_helpers import tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def model():
    return tiny_model()


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run faster on one thread (no OpenMP barriers on a busy 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
