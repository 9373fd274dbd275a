"""Shared pieces of the reliability suite: every installed drafting method on the embedded model."""

from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def plain_llm():
    from specpath.engine.llm import LLM

    return LLM(None)
