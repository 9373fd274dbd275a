"""The entry-point module of ``mtp``: hook implementations only.

specpath imports it on first use of ``mtp`` (or of any MTP model-type alias, which the core
normalises to ``mtp`` first) or when it asks the installed config classes to recognise a draft
checkpoint; it imports nothing heavy (the config classes are attrs-only, the speculators are
named by strings).
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``mtp`` to ``MTPSpeculatorConfig`` (its ``specialize`` picks the multi-module class)."""
    from specpath_mtp.config import MTPSpeculatorConfig

    register("mtp", MTPSpeculatorConfig)
