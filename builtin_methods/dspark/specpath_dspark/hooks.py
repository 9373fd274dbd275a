"""The entry-point module of ``dspark``: hook implementations only (no torch import)."""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``dspark`` to its config class."""
    from specpath_dspark.config import DSparkSpeculatorConfig

    register("dspark", DSparkSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise a DSpark drafter from its ``config.json`` in any published format (z-lab,
    SpecForge, speculators, specpath: ``specpath_drafting.block.published.block_kind``)."""
    from specpath_drafting.block.published import block_kind

    if checkpoint is None:
        return None
    return "dspark" if block_kind(checkpoint.config) == "dspark" else None


@hookimpl(trylast=True, specname="specpath_detect_method")
def detect_dspark_by_path(checkpoint):
    """The path hint ``dspark``, asked after every plugin's config evidence, and only for a
    checkpoint whose ``config.json`` says nothing about block drafting."""
    from specpath_drafting.block.published import block_kind

    if checkpoint is None or block_kind(checkpoint.config) is not None:
        return None
    return "dspark" if "dspark" in str(checkpoint.path or "").lower() else None
