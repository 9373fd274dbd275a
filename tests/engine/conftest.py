import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from engine_helpers import tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def model():
    return tiny_model()
