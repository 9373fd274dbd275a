import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from specpath_engine.testing.fixtures import one_torch_thread  # noqa: F401,E402  (autouse: one torch thread a test)
