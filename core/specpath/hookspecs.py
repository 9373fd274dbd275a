"""The hooks a method plugin may implement (pluggy project ``specpath``).

A plugin is a light module named by an entry point in the ``specpath.methods`` group; the
entry-point name is the method name. It implements any of these hooks with
:data:`hookimpl`. Hook implementations may accept fewer arguments than the spec (pluggy's
opt-in arguments), so new arguments can be added here without breaking plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from specpath.config.checkpoint import DraftCheckpoint
    from specpath.config.model import ModelConfig
    from specpath.config.speculator import SpeculatorConfig
    from specpath.demo import Demo

PROJECT = "specpath"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Decorate a plugin's hook functions with this marker."""


@hookspec
def specpath_register_methods(register: Callable[[str, type[SpeculatorConfig]], None]) -> None:
    """Register the plugin's methods: call ``register(method_name, config_class)`` once per
    method. A built-in name (``eagle3``) may be bound here and only here; the class's
    ``base_method`` must equal it. Any other name is a custom method whose class names the
    built-in method it builds on in ``base_method``. Import nothing heavy while doing it."""


@hookspec(firstresult=True)
def specpath_detect_method(checkpoint: DraftCheckpoint) -> str | None:
    """Recognise a draft checkpoint (``checkpoint.path``, ``checkpoint.config`` = its
    ``config.json`` as a dict) and return the method name it is for, or None. The first
    non-None answer wins. Recognise only your own method's checkpoints. Evidence from
    ``config.json`` goes in a plain implementation; a weaker guess (a path hint) in a second
    one marked ``@hookimpl(trylast=True, specname="specpath_detect_method")``, so that every
    plugin's config evidence is asked first. The core's own ``tryfirst`` implementation
    answers first with a checkpoint's declared ``speculator_config_class``. Within a tier,
    plugins are asked in ``specpath.plugins.DETECTION_ORDER``, not in import order."""


@hookspec(historic=True)
def specpath_configure_converter(converter: Any) -> None:
    """Add cattrs hooks for the plugin's own types to the shared strict converter
    (historic: called for plugins registered after the converter was created, too)."""


@hookspec(firstresult=True)
def specpath_demo(method: str, config_class: type[SpeculatorConfig], target: ModelConfig | None) -> Demo | None:
    """What ``specpath demo`` runs for ``method`` (bound to ``config_class``) on ``target`` (a
    ``ModelConfig``; None: the embedded model): a :class:`specpath.demo.Demo` from
    ``specpath.demo.run(**fields)``, ``shipped(config_class, variant, **fields)`` or
    ``leave_out(reason)``. Answer only for your own methods (None for any other name); a method
    nobody answers for gets ``specpath.demo.default_demo``. Import nothing heavy."""
