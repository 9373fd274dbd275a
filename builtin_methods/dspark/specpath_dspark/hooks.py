"""The entry-point module of ``dspark``: hook implementations only (no torch import)."""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``dspark`` to its config class."""
    from specpath_dspark.config import DSparkSpeculatorConfig

    register("dspark", DSparkSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise a DSpark drafter from its ``config.json`` (``model_type`` / architectures)."""
    from specpath_drafting.block.config import checkpoint_kind

    if checkpoint is None:
        return None
    return "dspark" if checkpoint_kind(checkpoint.config) == "dspark" else None
