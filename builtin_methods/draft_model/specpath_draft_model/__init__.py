"""specpath-draft-model: a separate small causal LM drafts for the target.

Three shapes of one method (``draft_model``): autoregressive drafts (K passes), PARD parallel
drafting (``parallel_drafting``: one pass with K-1 mask tokens) and a draft with a vocabulary of
its own (``use_heterogeneous_vocab``: drafted strings are verified as the target's tokens).
"""

from pathlib import Path

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
"""The shipped drafts for the embedded default model (see the README for how they were made)."""

__all__ = ["CHECKPOINTS"]
