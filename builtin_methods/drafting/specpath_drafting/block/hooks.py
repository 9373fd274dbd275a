"""The hook implementations a block-drafter plugin's entry-point module exposes (no torch import).

DFlash and DSpark recognise their drafters the same way: a published block-drafting
``config.json`` naming the kind (z-lab, SpecForge, speculators, specpath: see
:func:`specpath_drafting.block.published.block_kind`), else, after every plugin's config
evidence, the method's name in the checkpoint's path when its ``config.json`` says nothing about
block drafting. :func:`block_drafter_hooks` builds the three hooks for one method, and
:func:`block_drafter_demo` its ``specpath_demo`` hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specpath.hookspecs import hookimpl


def block_drafter_hooks(method: str, config_class: str) -> tuple[Callable[..., Any], ...]:
    """``(specpath_register_methods, specpath_detect_method, detect_by_path)`` for the block
    drafter ``method`` whose config class is ``config_class`` (``"module:Class"``, imported only
    when the method is registered)."""

    @hookimpl
    def specpath_register_methods(register: Any) -> None:
        from specpath.factory import import_object

        register(method, import_object(config_class))

    @hookimpl
    def specpath_detect_method(checkpoint: Any) -> str | None:
        from specpath_drafting.block.published import block_kind

        if checkpoint is None:
            return None
        return method if block_kind(checkpoint.config) == method else None

    @hookimpl(trylast=True, specname="specpath_detect_method")
    def detect_by_path(checkpoint: Any) -> str | None:
        from specpath_drafting.block.published import block_kind

        if checkpoint is None or block_kind(checkpoint.config) is not None:
            return None
        return method if method in str(checkpoint.path or "").lower() else None

    import sys

    caller = sys._getframe(1).f_globals.get("__name__", __name__)  # the plugin's entry-point module
    detect_by_path.__name__ = detect_by_path.__qualname__ = f"detect_{method}_by_path"
    for hook in (specpath_register_methods, specpath_detect_method, detect_by_path):
        hook.__module__ = caller  # resolution traces name the plugin's module, not this one
    specpath_register_methods.__doc__ = f"Bind ``{method}`` to ``{config_class}``."
    specpath_detect_method.__doc__ = f"Recognise a {method} drafter from its published ``config.json``."
    detect_by_path.__doc__ = (f"The path hint ``{method}``, asked after every plugin's config evidence, "
                              "for a checkpoint whose ``config.json`` says nothing about block drafting.")
    return specpath_register_methods, specpath_detect_method, detect_by_path


def block_drafter_demo(name: str) -> Callable[..., Any]:
    """The ``specpath_demo`` hook of the block drafter ``name``: on the embedded model its
    shipped drafter at K = 4 (a block of four), on another target the method's defaults."""

    @hookimpl
    def specpath_demo(method: str, config_class: Any, target: Any) -> Any:
        from specpath.demo import shipped_or_defaults

        if method != name:
            return None
        return shipped_or_defaults(config_class, target, num_speculative_tokens=4)

    return specpath_demo
