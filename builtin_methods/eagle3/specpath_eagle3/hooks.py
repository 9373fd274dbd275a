"""The entry-point module of ``eagle3``: hook implementations only (no torch import).

Checkpoint detection for EAGLE-3 heads lives with ``eagle`` (``specpath_eagle.hooks``), which
recognises both kinds from ``config.json``; this distribution depends on it.
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``eagle3`` to its config class."""
    from specpath_eagle3.config import Eagle3SpeculatorConfig

    register("eagle3", Eagle3SpeculatorConfig)
