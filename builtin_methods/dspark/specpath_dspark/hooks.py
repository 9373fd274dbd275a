"""The entry-point module of ``dspark``: hook implementations only (no torch import)."""

from specpath.hookspecs import hookimpl


def _says(config, word):
    kinds = [str(config.get("model_type", ""))] + [str(a) for a in config.get("architectures") or ()]
    return any(word in kind.lower() for kind in kinds)


@hookimpl
def specpath_register_methods(register):
    """Bind ``dspark`` to its config class."""
    from specpath_dspark.config import DSparkSpeculatorConfig

    register("dspark", DSparkSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise a DSpark drafter from its ``config.json`` (``model_type`` / architectures)."""
    if checkpoint is None:
        return None
    return "dspark" if _says(checkpoint.config, "dspark") else None


@hookimpl(trylast=True, specname="specpath_detect_method")
def detect_dspark_by_path(checkpoint):
    """The path hint ``dspark``, asked after every plugin's config evidence."""
    if checkpoint is None:
        return None
    return "dspark" if "dspark" in str(checkpoint.path or "").lower() else None
