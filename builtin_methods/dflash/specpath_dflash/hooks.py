"""The entry-point module of ``dflash``: hook implementations only (no torch import); they are
the block drafters' shared ones (:mod:`specpath_drafting.block.hooks`)."""

from specpath_drafting.block.hooks import block_drafter_demo, block_drafter_hooks

specpath_register_methods, specpath_detect_method, detect_dflash_by_path = block_drafter_hooks(
    "dflash", "specpath_dflash.config:DFlashSpeculatorConfig")
specpath_demo = block_drafter_demo("dflash")
