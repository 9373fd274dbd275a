"""The plugin authors' kit: a conformance suite that runs a method in the reference engine.

``from specpath_engine.testing import conformance_tests`` in a plugin's tests and give it the
method's table (or subclass ``SpeculatorConformance`` and set the same table as class
attributes; see :mod:`specpath_engine.testing.conformance`). Nothing here is a pytest plugin
that loads itself: pytest is imported only when the suite is.
"""

from __future__ import annotations

from specpath.lazy import lazy_exports

_EXPORTS = {
    "SpeculatorConformance": "specpath_engine.testing.conformance",
    "conformance_tests": "specpath_engine.testing.conformance",
    "MODEL_FREE_FLAGS": "specpath_engine.testing.conformance",
    "check_plugin_hooks": "specpath.testing.hooks",
    "HookCheckError": "specpath.testing.hooks",
    "check_proposal": "specpath_engine.testing.synthetic",
    "drive_speculator": "specpath_engine.testing.synthetic",
    "tiny_context": "specpath_engine.testing.synthetic",
    "ProposalError": "specpath_engine.testing.synthetic",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
