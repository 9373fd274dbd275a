"""The entry-point module of ``dflash``: hook implementations only (no torch import)."""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``dflash`` to its config class."""
    from specpath_dflash.config import DFlashSpeculatorConfig

    register("dflash", DFlashSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise a DFlash drafter from its ``config.json`` (``model_type`` / architectures)."""
    from specpath_dflash.config import checkpoint_kind

    if checkpoint is None:
        return None
    return "dflash" if checkpoint_kind(checkpoint.config) == "dflash" else None
