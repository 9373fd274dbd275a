"""The entry-point module of ``dflash``: hook implementations only (no torch import).

A DFlash drafter is recognised from a published block-drafting ``config.json`` naming its kind
(z-lab, SpecForge, speculators, specpath: :func:`specpath_drafting.block.published.block_kind`),
else, after every plugin's config evidence, from ``dflash`` in the checkpoint's path when its
``config.json`` says nothing about block drafting.
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``dflash`` to its config class."""
    from specpath_dflash.config import DFlashSpeculatorConfig

    register("dflash", DFlashSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise a DFlash drafter from its published ``config.json``."""
    from specpath_drafting.block.published import block_kind

    if checkpoint is None:
        return None
    return "dflash" if block_kind(checkpoint.config) == "dflash" else None


@hookimpl(trylast=True, specname="specpath_detect_method")
def detect_dflash_by_path(checkpoint):
    """The path hint ``dflash``, asked after every plugin's config evidence, for a checkpoint
    whose ``config.json`` says nothing about block drafting."""
    from specpath_drafting.block.published import path_names

    if checkpoint is None:
        return None
    return "dflash" if path_names(checkpoint.config, checkpoint.path, "dflash") else None


@hookimpl
def specpath_demo(method, config_class, target):
    """The embedded model: the shipped drafter at K = 4 (a block of four); another target: the
    method's defaults."""
    from specpath.demo import shipped_or_defaults

    if method != "dflash":
        return None
    return shipped_or_defaults(config_class, target, num_speculative_tokens=config_class.shipped_drafter_k)
