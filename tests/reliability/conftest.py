"""Shared pieces of the reliability suite: every installed drafting method on the embedded model."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def installed_methods() -> list[tuple[str, dict]]:
    """(method, config) of every installed method that drafts, as ``specpath demo`` runs them."""
    from specpath.engine.cli_run import demo_configs

    return demo_configs(3)[0]


@pytest.fixture(scope="session")
def plain_llm():
    from specpath.engine.llm import LLM

    return LLM(None)
