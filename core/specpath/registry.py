"""Which config class implements which method name: a table, and the rules of a binding.

Two doors lead in. A plugin's ``specpath_register_methods(register)`` hook may bind built-in
names (that is how ``eagle3`` gets its class) and custom names (:mod:`specpath.plugins`). The
public :func:`register_speculative_method` binds custom names only. The table loads nothing;
:mod:`specpath.lookup` finds a name, loading the plugin that provides it on first use.
"""

from __future__ import annotations

import re
import threading

import attrs

from specpath.config.shipped import ShippedCheckpoint
from specpath.config.speculator import CAPABILITY_FLAGS, SpeculatorConfig
from specpath.errors import SpeculativeConfigError
from specpath.methods import BUILTIN_METHODS, CANONICAL_METHODS, UNIMPLEMENTED_METHODS

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@attrs.frozen
class Registration:
    """One bound method name."""

    name: str
    config_class: type
    origin: str
    """Who bound it: ``plugin 'eagle3' (specpath-eagle3 0.1.0)`` or ``register_speculative_method``."""
    distribution: str | None = None


USER_ORIGIN = "register_speculative_method"
"""The origin of a binding made through the public :func:`register_speculative_method`."""


def qualname_of(cls: type) -> str:
    """``module:Qualname`` of a class (how errors and listings name config classes)."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_DECLARATIONS: dict[str, tuple[str, object]] = {
    **{flag: ("True or False (a capability flag)", lambda v: type(v) is bool) for flag in CAPABILITY_FLAGS},
    "supports_parallel_drafting": ("True, False or None", lambda v: v is None or type(v) is bool),
    "speculator_class": ("None or a 'module:Class' string", lambda v: v is None or (isinstance(v, str) and ":" in v)),
    "supported_options": ("a frozenset of option names",
                          lambda v: isinstance(v, (set, frozenset)) and all(isinstance(o, str) for o in v)),
    "shipped_checkpoints": ("a tuple of ShippedCheckpoint rows",
                            lambda v: isinstance(v, tuple) and all(isinstance(r, ShippedCheckpoint) for r in v)),
    "shipped_drafter_k": ("None or an integer >= 1", lambda v: v is None or (_is_int(v) and v >= 1)),
    "shipped_drafter_quantization": ("None or 'int8'", lambda v: v in (None, "int8")),
}
"""What a config class may declare for each class-level attribute consumers read: a wrong type
(``uses_target_hidden_states = "no"``, which is truthy) would mislead every consumer silently."""


def check_declarations(config_class: type) -> None:
    """Raise :class:`SpeculativeConfigError` naming the first class attribute of the wrong type."""
    for attribute, (expected, ok) in _DECLARATIONS.items():
        value = getattr(config_class, attribute, None)
        if not ok(value):
            raise SpeculativeConfigError(
                f"{qualname_of(config_class)}.{attribute} must be {expected}",
                field=attribute,
                value=value,
            )


class MethodRegistry:
    """Name -> :class:`Registration`; validates every binding, never loads anything itself."""

    def __init__(self) -> None:
        self._bound: dict[str, Registration] = {}
        self._lock = threading.RLock()

    def check(self, name: object, config_class: object, *, allow_builtin: bool) -> None:
        """Raise :class:`SpeculativeConfigError` if ``name -> config_class`` may not be bound."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise SpeculativeConfigError(
                "a method name must be lower-case letters, digits and '_' (starting with a letter)",
                field="method",
                value=name,
            )
        if not (isinstance(config_class, type) and issubclass(config_class, SpeculatorConfig)):
            raise SpeculativeConfigError(
                f"the config class of method {name!r} must be a subclass of specpath.SpeculatorConfig",
                field="method",
                value=config_class,
            )
        check_declarations(config_class)
        base = config_class.base_method
        if name in BUILTIN_METHODS:
            if not allow_builtin:
                raise SpeculativeConfigError(
                    f"{name!r} is a built-in speculative method; only a plugin's "
                    "specpath_register_methods hook may bind it",
                    field="method",
                    value=name,
                )
            if name not in CANONICAL_METHODS:
                raise SpeculativeConfigError(
                    f"{name!r} is an alias; bind the canonical name instead",
                    field="method",
                    value=name,
                    allowed=CANONICAL_METHODS,
                )
            if base != name:
                raise SpeculativeConfigError(
                    f"{qualname_of(config_class)}.base_method must be {name!r} to bind the built-in method",
                    field="base_method",
                    value=base,
                )
        elif base not in CANONICAL_METHODS:
            raise SpeculativeConfigError(
                f"{qualname_of(config_class)}.base_method must name the built-in method that custom "
                f"method {name!r} builds on",
                field="base_method",
                value=base,
                allowed=[m for m in CANONICAL_METHODS if m not in UNIMPLEMENTED_METHODS],
            )
        with self._lock:
            existing = self._bound.get(name)
        if existing is not None and existing.config_class is not config_class:
            raise SpeculativeConfigError(
                f"speculative method {name!r} is already registered to "
                f"{qualname_of(existing.config_class)} by {existing.origin}; refusing "
                f"{qualname_of(config_class)}",
                field="method",
                value=name,
            )

    def bind(
        self,
        name: str,
        config_class: type,
        *,
        origin: str,
        distribution: str | None = None,
        allow_builtin: bool = False,
    ) -> None:
        """Validate and bind; binding the same class again is a no-op."""
        with self._lock:
            self.check(name, config_class, allow_builtin=allow_builtin)
            if name not in self._bound:
                self._bound[name] = Registration(name, config_class, origin, distribution)

    def get(self, name: str) -> Registration | None:
        with self._lock:
            return self._bound.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._bound)

    def model_free_names(self) -> list[str]:
        """The bound methods whose config class declares ``model_free`` (what may draft beside a
        drafter, ``model_free_drafter``), sorted."""
        with self._lock:
            return sorted(n for n, r in self._bound.items() if r.config_class.model_free)

    def snapshot(self) -> dict[str, Registration]:
        with self._lock:
            return dict(self._bound)

    def restore(self, snapshot: dict[str, Registration]) -> None:
        """Back to ``snapshot``'s bindings, but keep what plugins bound since: the plugin manager
        records those plugins as loaded and never registers them again, so dropping their
        methods would make them look uninstalled for the rest of the process."""
        with self._lock:
            since = {n: r for n, r in self._bound.items() if n not in snapshot and r.origin != USER_ORIGIN}
            self._bound = {**snapshot, **since}


_registry = MethodRegistry()


def get_registry() -> MethodRegistry:
    """The process-wide registry."""
    return _registry


def reset_registry() -> None:
    """Forget every binding (``specpath.plugins.reset`` calls it)."""
    global _registry
    _registry = MethodRegistry()


def register_speculative_method(name: str, config_cls: type) -> None:
    """Register a custom (non-built-in) method; idempotent for the same class.

    A resolved config with ``method=name`` gets ``custom_method=name`` and
    ``method=config_cls.base_method``.
    """
    get_registry().bind(name, config_cls, origin=USER_ORIGIN)
