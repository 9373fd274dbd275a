"""Which config class implements which method name.

Two doors lead in. A plugin's ``specpath_register_methods(register)`` hook may bind built-in
names (that is how ``eagle3`` gets its class) and custom names. The public
:func:`register_speculative_method` binds custom names only. Lookups load the plugin whose
entry-point name equals the method on first use, so resolving ``ngram`` never imports the
EAGLE plugin.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from specpath.errors import SpeculativeConfigError, UnknownMethodError, closest_match
from specpath.methods import (
    BUILTIN_METHODS,
    CANONICAL_METHODS,
    METHOD_DISTRIBUTIONS,
    UNIMPLEMENTED_METHODS,
)

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@attrs.frozen
class Registration:
    """One bound method name."""

    name: str
    config_class: type
    origin: str
    """Who bound it: ``plugin 'eagle3' (specpath-eagle3 0.1.0)`` or ``register_speculative_method``."""
    distribution: str | None = None


def qualname_of(cls: type) -> str:
    """``module:Qualname`` of a class (how errors and listings name config classes)."""
    return f"{cls.__module__}:{cls.__qualname__}"


class MethodRegistry:
    """Name -> :class:`Registration`; validates every binding, never loads anything itself."""

    def __init__(self) -> None:
        self._bound: dict[str, Registration] = {}
        self._lock = threading.RLock()

    def check(self, name: object, config_class: object, *, allow_builtin: bool) -> None:
        """Raise :class:`SpeculativeConfigError` if ``name -> config_class`` may not be bound."""
        from specpath.config.speculator import SpeculatorConfig

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

    def snapshot(self) -> dict[str, Registration]:
        with self._lock:
            return dict(self._bound)

    def restore(self, snapshot: dict[str, Registration]) -> None:
        with self._lock:
            self._bound = dict(snapshot)


_registry = MethodRegistry()


def get_registry() -> MethodRegistry:
    """The process-wide registry."""
    return _registry


def reset_registry() -> None:
    """Forget every binding (``specpath.plugins.reset`` calls it)."""
    global _registry
    _registry = MethodRegistry()


@contextmanager
def temporary_registrations() -> Iterator[MethodRegistry]:
    """Undo every registration made inside the block (for tests and conformance kits)."""
    registry = get_registry()
    saved = registry.snapshot()
    try:
        yield registry
    finally:
        registry.restore(saved)


def register_speculative_method(name: str, config_cls: type) -> None:
    """Register a custom (non-built-in) method; idempotent for the same class.

    A resolved config with ``method=name`` gets ``custom_method=name`` and
    ``method=config_cls.base_method``.
    """
    get_registry().bind(name, config_cls, origin="register_speculative_method")


def find_registration(name: str) -> Registration | None:
    """The registration of ``name`` (built-in or custom), loading the plugin that should
    provide it if needed: first the entry point of the same name, then every plugin."""
    from specpath import plugins

    registry = get_registry()
    plugins.sync_registrations()
    if (found := registry.get(name)) is not None:
        return found
    plugins.load(name)
    if (found := registry.get(name)) is not None:
        return found
    plugins.load_all()
    return registry.get(name)


def registered_speculative_methods() -> list[str]:
    """Sorted names of the custom methods (registered in-process or by any plugin)."""
    from specpath import plugins

    plugins.load_all()
    return [n for n in get_registry().names() if n not in BUILTIN_METHODS]


def get_custom_speculator_config_class(name: object) -> type | None:
    """The config class of a custom method, or None for built-in or unknown names."""
    if not isinstance(name, str) or name in BUILTIN_METHODS:
        return None
    found = find_registration(name)
    return None if found is None else found.config_class


def builtin_config_class(method: str) -> Registration:
    """The registration of a canonical built-in method, or a one-line error saying which
    distribution to install (or why the article's method has no implementation here)."""
    from specpath import plugins

    found = find_registration(method)
    if found is not None:
        return found
    if method in UNIMPLEMENTED_METHODS:
        raise SpeculativeConfigError(
            UNIMPLEMENTED_METHODS[method], field="speculative_config.method", value=method
        )
    dist = METHOD_DISTRIBUTIONS.get(method)
    broken = [b for b in plugins.broken_plugins() if b.name == method or b.distribution == dist]
    why = f"; its plugin is broken: {broken[0].error}" if broken else ""
    raise SpeculativeConfigError(
        f"method {method!r} is provided by the distribution {dist!r}, which is not installed "
        f"(pip install {dist}){why}",
        field="speculative_config.method",
        value=method,
    )


def unknown_method_error(name: object) -> UnknownMethodError:
    """The validator's error: lists built-in and registered names, suggests the closest one
    and names any broken plugin (which may be the one that should have provided it)."""
    from specpath import plugins

    registered = registered_speculative_methods()
    builtin = sorted(BUILTIN_METHODS)
    broken = plugins.broken_plugins()
    suffix = ""
    if broken:
        suffix = "; broken plugins: " + ", ".join(f"{b.name} ({b.error})" for b in broken)
    return UnknownMethodError(
        f"unknown speculative method; built-in methods: {builtin}; registered custom methods: "
        f"{registered}{suffix}",
        field="speculative_config.method",
        value=name,
        suggestion=closest_match(str(name), builtin + registered) if isinstance(name, str) else None,
    )
