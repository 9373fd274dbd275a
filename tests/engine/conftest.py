import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from engine_helpers import tiny_model  # noqa: E402
from specpath_engine.testing.fixtures import one_torch_thread  # noqa: F401,E402  (autouse: one torch thread a test)


@pytest.fixture(scope="session")
def model():
    return tiny_model()
