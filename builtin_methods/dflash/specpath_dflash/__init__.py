"""specpath-dflash: DFlash block drafting for specpath, method ``dflash``.

This package holds the method's config row, hooks (recognition), speculator (its choice of
drafts and acceptance estimates) and shipped checkpoints. What DFlash and DSpark both use (the
backbone, the block loop and its context KV, block queries, adaptive verification, the published
config formats) is the shared library's :mod:`specpath_drafting.block`. Importing it stays light
(no torch).
"""

from specpath_dflash.config import DFLASH_CHECKPOINT, DFlashSpeculatorConfig

__all__ = ["DFLASH_CHECKPOINT", "DFlashSpeculatorConfig"]
