"""specpath-draft-model: a separate small causal LM drafts for the target.

Three shapes of one method (``draft_model``): autoregressive drafts (K passes), PARD parallel
drafting (``parallel_drafting``: one pass with K-1 mask tokens) and a draft with a vocabulary of
its own (``use_heterogeneous_vocab``: drafted strings are verified as the target's tokens).
"""

from specpath_draft_model.config import CHECKPOINTS

__all__ = ["CHECKPOINTS"]
