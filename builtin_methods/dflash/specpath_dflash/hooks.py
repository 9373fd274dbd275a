"""The entry-point module of ``dflash``: hook implementations only (no torch import)."""

from specpath.hookspecs import hookimpl


def _says(config, word):
    kinds = [str(config.get("model_type", ""))] + [str(a) for a in config.get("architectures") or ()]
    return any(word in kind.lower() for kind in kinds)


@hookimpl
def specpath_register_methods(register):
    """Bind ``dflash`` to its config class."""
    from specpath_dflash.config import DFlashSpeculatorConfig

    register("dflash", DFlashSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise a DFlash drafter from its ``config.json`` (``model_type`` / architectures)."""
    if checkpoint is None:
        return None
    return "dflash" if _says(checkpoint.config, "dflash") else None


@hookimpl(trylast=True, specname="specpath_detect_method")
def detect_dflash_by_path(checkpoint):
    """The path hint ``dflash``, asked after every plugin's config evidence."""
    if checkpoint is None:
        return None
    return "dflash" if "dflash" in str(checkpoint.path or "").lower() else None
