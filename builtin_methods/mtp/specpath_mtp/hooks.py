"""The entry-point module of ``mtp``: hook implementations only.

specpath imports it on first use of ``mtp`` (or of any MTP model-type alias, which the core
normalises to ``mtp`` first) or when it asks the plugins to recognise a draft checkpoint; it
imports nothing heavy (the config classes are attrs-only, the speculators are
named by strings).
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``mtp`` to ``MTPSpeculatorConfig`` (its ``specialize`` picks the multi-module class)."""
    from specpath_mtp.config import MTPSpeculatorConfig

    register("mtp", MTPSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise an MTP checkpoint: it says so in ``model_type`` (``mtp``, ``deepseek_mtp``, ...)."""
    from specpath_mtp.config import MTPSpeculatorConfig

    if checkpoint is None:
        return None
    return "mtp" if MTPSpeculatorConfig.matches(checkpoint) else None
