"""Check a plugin module's hook implementations against specpath's hook specifications.

pluggy registers a function marked ``@hookimpl`` whatever its name, so a typo such as
``specpath_register_method`` (singular) would silently never be called. Registering the
module in a fresh manager and calling ``check_pending()`` turns that into an error.
"""

from __future__ import annotations

import types

import pluggy

from specpath import hookspecs


class HookCheckError(AssertionError):
    """A plugin module's hooks do not match specpath's hook specifications."""


def check_plugin_hooks(plugin: types.ModuleType | object, name: str | None = None) -> list[str]:
    """Register ``plugin`` in a fresh ``specpath`` plugin manager and verify its hooks.

    Returns the names of the hooks it implements. Raises :class:`HookCheckError` naming the
    problem when a hook is misspelled (``check_pending``), when an implementation asks for an
    argument the spec does not have, or when the module implements no hook at all.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    label = name or getattr(plugin, "__name__", repr(plugin))
    try:
        pm.register(plugin, name=label)
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise HookCheckError(f"plugin {label!r}: {' '.join(str(exc).split())}") from None
    implemented = sorted(
        caller.name for caller in pm.hook.__dict__.values()
        if isinstance(caller, pluggy.HookCaller) and caller.get_hookimpls()
    )
    if not implemented:
        raise HookCheckError(
            f"plugin {label!r} implements no specpath hook; decorate its functions with "
            "specpath.hookspecs.hookimpl"
        )
    return implemented
