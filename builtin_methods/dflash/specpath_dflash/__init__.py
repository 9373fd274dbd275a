"""specpath-dflash: DFlash block drafting for specpath, method ``dflash``.

The block drafter it configures (drafter, context KV, kernel, speculator, training) is the
shared library's :mod:`specpath_drafting.block`; this package holds the method's config row,
hooks, shipped checkpoint and training recipe. Importing it stays light (no torch).
"""

from specpath_dflash.config import DFLASH_CHECKPOINT, DFlashSpeculatorConfig

__all__ = ["DFLASH_CHECKPOINT", "DFlashSpeculatorConfig"]
