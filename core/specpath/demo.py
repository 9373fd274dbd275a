"""What ``specpath demo`` runs for a method: the ``specpath_demo`` hook's answer.

Packaging a demo is not part of what a method *is*, so it is not on ``SpeculatorConfig``: a
plugin answers the declared hook (:func:`specpath.hookspecs.specpath_demo`) for its own methods
with a :class:`Demo`, built with :func:`run`, :func:`shipped` or :func:`leave_out`. A method
whose plugin does not answer (a class registered in-process, a plugin without the hook) gets
:func:`default_demo`: the shipped checkpoint for the embedded model, the method's own defaults
(``default_model`` picks the shipped drafter) for another target.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from specpath.config.frozen import FrozenDict
from specpath.config.shipped import DEFAULT_VARIANT, EMBEDDED_TARGET, find_shipped

if TYPE_CHECKING:  # pragma: no cover
    from specpath.config.model import ModelConfig
    from specpath.config.speculator import SpeculatorConfig


@attrs.frozen(kw_only=True)
class Demo:
    """A method's demo: the config fields it runs with, or why it is left out."""

    config: Mapping[str, Any] | None = attrs.field(
        default=None, converter=lambda c: None if c is None else FrozenDict(c))
    """Fields over ``{"method": <name>, "num_speculative_tokens": <the demo's K>}`` (a K here
    wins over the demo's); None with ``skip``."""
    skip: str | None = None
    """Why the method is left out of the demo."""

    def __attrs_post_init__(self) -> None:
        if (self.config is None) == (self.skip is None):
            raise ValueError("a Demo has either a config or a reason to skip, not both or neither")


def run(**fields: Any) -> Demo:
    """Run the method with these fields (none: its defaults)."""
    return Demo(config=fields)


def leave_out(reason: str) -> Demo:
    """Leave the method out, saying why."""
    return Demo(skip=reason)


def shipped(config_class: type[SpeculatorConfig], variant: str = DEFAULT_VARIANT, **fields: Any) -> Demo:
    """The embedded model's demo of a method that ships a drafter: that drafter (``variant``)
    as ``model``, or left out when it is not installed."""
    path = find_shipped(config_class.shipped_checkpoints, EMBEDDED_TARGET, variant)
    if path is None:
        return leave_out(f"its shipped {variant} drafter for the embedded model is not installed")
    return run(model=str(path), **fields)


def shipped_or_defaults(config_class: type[SpeculatorConfig], target: ModelConfig | None,
                        variant: str = DEFAULT_VARIANT, **fields: Any) -> Demo:
    """The embedded model: the shipped drafter (if the class ships one) with ``fields``; another
    target: the method's defaults at the demo's K (its ``default_model`` picks the drafter)."""
    if target is not None:
        return run()
    return shipped(config_class, variant, **fields) if config_class.shipped_checkpoints else run(**fields)


def default_demo(method: str, config_class: type[SpeculatorConfig], target: ModelConfig | None) -> Demo:
    """The demo of a method whose plugin does not answer the hook (see the module docstring)."""
    return shipped_or_defaults(config_class, target)


def demo_for(method: str, config_class: type[SpeculatorConfig], target: ModelConfig | None = None) -> Demo:
    """The installed plugins' answer for ``method`` on ``target`` (None: the embedded model),
    else :func:`default_demo`."""
    from specpath.plugins import get_plugin_manager

    answer = get_plugin_manager().hook.specpath_demo(method=method, config_class=config_class, target=target)
    if answer is None:
        return default_demo(method, config_class, target)
    if not isinstance(answer, Demo):
        from specpath.errors import PluginError

        raise PluginError(f"specpath_demo for {method!r} returned {type(answer).__name__}, not a specpath.demo.Demo")
    return answer
