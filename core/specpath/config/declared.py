"""The core's own detection hook: a checkpoint that names its config class is what it says.

Registered on the plugin manager before any plugin (``tryfirst``), so a checkpoint's
``speculator_config_class`` wins over every plugin's guess from architectures or paths. The
hook only reports the declared name; the resolution interprets it (a registered method name,
or with ``trust_remote_code=True`` a ``module:Class`` import path, see
:mod:`specpath.config.resolution`).
"""

from __future__ import annotations

from specpath.config.checkpoint import DraftCheckpoint
from specpath.hookspecs import hookimpl

PLUGIN_NAME = "specpath.declared"
"""The name this module is registered under on the plugin manager."""


@hookimpl(tryfirst=True)
def specpath_detect_method(checkpoint: DraftCheckpoint) -> str | None:
    """The checkpoint's declared ``speculator_config_class``, if it is a string."""
    value = None if checkpoint is None else checkpoint.declared_class
    return value if isinstance(value, str) else None
