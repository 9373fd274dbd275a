"""specpath-dflash: DFlash block drafting for specpath, method ``dflash``.

Importing this package stays light (no torch): the drafter, its KV and kernels live in
:mod:`specpath_dflash.drafter`, :mod:`specpath_dflash.speculator` and :mod:`specpath_dflash.kernels`.
"""

from specpath_dflash.config import DFLASH_CHECKPOINT, DFlashSpeculatorConfig

__all__ = ["DFLASH_CHECKPOINT", "DFlashSpeculatorConfig"]
