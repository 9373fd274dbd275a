"""What the core gives plugin authors without an engine: :func:`check_plugin_hooks`.

The conformance kit, which runs a method in the reference engine, lives in the engine
distribution: ``from specpath_engine.testing import conformance_tests``.
"""

from __future__ import annotations

from specpath.lazy import lazy_exports

_EXPORTS = {
    "check_plugin_hooks": "specpath.testing.hooks",
    "HookCheckError": "specpath.testing.hooks",
    "new_plugin": "specpath.scaffold",  # moved out of the kit; the old name still works
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
