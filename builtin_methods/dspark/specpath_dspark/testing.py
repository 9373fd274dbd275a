"""Test helpers for DSpark: a random drafter whose Markov and confidence heads matter (at
initialisation the Markov bias is ~0, which would hide a head that is wired wrong)."""

from __future__ import annotations

import torch

from specpath_drafting.block.drafter import DrafterConfig
from specpath_dspark.drafter import DSparkDrafter


def strong_heads(config: DrafterConfig) -> DSparkDrafter:
    """A DSpark drafter whose Markov bias and confidence weights are of order one."""
    drafter = DSparkDrafter(config)
    with torch.no_grad():
        drafter.markov_w1.normal_(0, 1.0)
        drafter.markov_w2.normal_(0, 1.0)
        drafter.confidence_markov.normal_(0, 1.0)
    return drafter
