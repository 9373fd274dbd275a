"""The plugin authors' kit: a conformance suite and helpers, shipped with the core.

``from specpath.testing import conformance_tests`` in a plugin's tests and give it the method's
table (or subclass ``SpeculatorConformance`` and set the same table as class attributes; see
:mod:`specpath.testing.conformance`). Nothing here is a pytest plugin
that loads itself: pytest is imported only when the suite is, so importing ``specpath`` or
running ``specpath new-plugin`` never touches it.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "SpeculatorConformance": "specpath.testing.conformance",
    "conformance_tests": "specpath.testing.conformance",
    "MODEL_FREE_FLAGS": "specpath.testing.conformance",
    "check_plugin_hooks": "specpath.testing.hooks",
    "HookCheckError": "specpath.testing.hooks",
    "check_proposal": "specpath.testing.synthetic",
    "drive_speculator": "specpath.testing.synthetic",
    "tiny_context": "specpath.testing.synthetic",
    "ProposalError": "specpath.testing.synthetic",
    "new_plugin": "specpath.scaffold",  # moved out of the kit; the old name still works
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'specpath.testing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
