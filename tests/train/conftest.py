"""The training recipes' tests: one torch thread a test, and the draft-model plugin's tiny drafts
(``tiny_drafts``, that plugin's test kit) importable, since its recipe trains those."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "builtin_methods", "draft_model", "tests"))

from specpath_engine.testing.fixtures import one_torch_thread  # noqa: F401,E402  (autouse: one torch thread a test)
