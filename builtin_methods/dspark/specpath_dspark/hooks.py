"""The entry-point module of ``dspark``: hook implementations only (no torch import); they are
the block drafters' shared ones (:mod:`specpath_drafting.block.hooks`)."""

from specpath_drafting.block.hooks import block_drafter_demo, block_drafter_hooks

specpath_register_methods, specpath_detect_method, detect_dspark_by_path = block_drafter_hooks(
    "dspark", "specpath_dspark.config:DSparkSpeculatorConfig")
specpath_demo = block_drafter_demo("dspark")
