"""Shared pieces of the reliability suite: every installed drafting method on the embedded model."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from specpath_engine.testing.fixtures import one_torch_thread  # noqa: F401,E402  (autouse: one torch thread a test)


@pytest.fixture(scope="module", autouse=True)
def _installed_plugins():
    """The real installed plugins: other test modules narrow the plugin scan to their fakes
    (some at import time, during collection), and these tests run every installed method."""
    from specpath import plugins

    plugins.reset()
    yield


@pytest.fixture(scope="session")
def plain_llm():
    from specpath_engine.llm import LLM

    return LLM(None)
