"""Test helpers for DSpark: a random drafter whose Markov and confidence heads matter (at
initialisation the Markov bias is ~0, which would hide a head that is wired wrong)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from specpath_drafting.block.drafter import DrafterConfig
from specpath_drafting.block.testing import tiny_drafter
from specpath_dspark.drafter import DSparkDrafter


def strong_heads(config: DrafterConfig) -> DSparkDrafter:
    """A DSpark drafter whose Markov bias and confidence weights are of order one."""
    drafter = DSparkDrafter(config)
    with torch.no_grad():
        drafter.markov_w1.normal_(0, 1.0)
        drafter.markov_w2.normal_(0, 1.0)
        drafter.confidence_markov.normal_(0, 1.0)
    return drafter


def tiny_dspark(target_path: str | Path, out: str | Path, *, markov_rank: int = 8, **options: Any) -> str:
    """A random DSpark drafter (anchor-first unless ``anchor_sampling=False``) for a target."""
    return tiny_drafter("dspark", target_path, out, markov_rank=markov_rank, build=strong_heads, **options)
