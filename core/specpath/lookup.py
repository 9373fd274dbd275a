"""Find the config class of a method name, loading the plugin that provides it on first use.

Resolving ``ngram`` loads only the entry point named ``ngram``; a name no entry point is
named after (a custom method registered by some plugin) loads every plugin. The errors say
what to do: which distribution to ``pip install``, which plugin is broken, or that the plugin
is installed but blocked by ``SPECPATH_PLUGINS`` or disabled.
"""

from __future__ import annotations

from specpath import plugins
from specpath.errors import SpeculativeConfigError, UnknownMethodError, _short, closest_match
from specpath.methods import (BUILTIN_METHODS, CANONICAL_METHODS, METHOD_DISTRIBUTIONS, MTP_ALIASES, UNIMPLEMENTED_METHODS,
                              install_hint)
from specpath.registry import Registration, get_registry


def find_registration(name: str) -> Registration | None:
    """The registration of ``name`` (built-in or custom), loading the plugin that should
    provide it if needed: first the entry point of the same name, then every plugin."""
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
    plugins.load_all()
    return [n for n in get_registry().names() if n not in BUILTIN_METHODS]


def get_custom_speculator_config_class(name: object) -> type | None:
    """The config class of a custom method, or None for built-in or unknown names."""
    if not isinstance(name, str) or name in BUILTIN_METHODS:
        return None
    found = find_registration(name)
    return None if found is None else found.config_class


def _not_loaded(name: str) -> list[plugins.PluginRecord]:
    return [r for r in plugins.plugin_records() if r.name == name and r.why_not_loaded]


def builtin_config_class(method: str) -> Registration:
    """The registration of a canonical built-in method, or a one-line error saying which
    distribution to install, which plugin is broken or blocked (or why the method has no
    implementation here)."""
    found = find_registration(method)
    if found is not None:
        return found
    if method in UNIMPLEMENTED_METHODS:
        raise SpeculativeConfigError(UNIMPLEMENTED_METHODS[method], field="speculative_config.method", value=method)
    dist = METHOD_DISTRIBUTIONS.get(method)
    field = "speculative_config.method"
    for record in _not_loaded(method):
        if record.distribution == dist:
            raise SpeculativeConfigError(
                f"method {method!r} is provided by the distribution {dist!r}, which is installed but "
                f"{record.why_not_loaded}",
                field=field,
                value=method,
            )
        raise SpeculativeConfigError(
            f"method {method!r} is provided by the distribution {dist!r} ({install_hint(dist)}); the installed "
            f"plugin {record.name!r} ({record.distribution}) is {record.why_not_loaded}",
            field=field,
            value=method,
        )
    broken = [b for b in plugins.broken_plugins() if b.name == method or b.distribution == dist]
    why = f"; its plugin is broken: {broken[0].error}" if broken else ""
    raise SpeculativeConfigError(
        f"method {method!r} is provided by the distribution {dist!r}, which is not installed "
        f"({install_hint(dist)}){why}",
        field=field,
        value=method,
    )


def unknown_method_error(name: object) -> UnknownMethodError:
    """The validator's error: the closest name first, then the methods (canonical built-in
    names, not the MTP aliases, and registered ones) and any broken plugin; or that the plugin
    named like the method is blocked, disabled or broken."""
    field = "speculative_config.method"
    if isinstance(name, str):
        for record in _not_loaded(name):
            return UnknownMethodError(
                f"speculative method {name!r} is provided by plugin {record.name!r} "
                f"({record.distribution or 'in-process'}), which is {record.why_not_loaded}",
                field=field,
                value=name,
            )
        for b in plugins.broken_plugins():
            if b.name == name:  # the plugin named like the method was refused: say so, not "unknown"
                return UnknownMethodError(
                    f"speculative method {name!r} is provided by plugin {b.name!r} ({b.distribution or 'in-process'}), "
                    f"which is broken: {b.error}",
                    field=field,
                    value=name,
                )
    registered = registered_speculative_methods()
    builtin = [m for m in CANONICAL_METHODS if m not in UNIMPLEMENTED_METHODS]
    # the suggestion may be an alias (a misspelt deepseek_mtp), but the list shows methods only
    suggestion = closest_match(name, sorted(BUILTIN_METHODS) + registered) if isinstance(name, str) else None
    broken = plugins.broken_plugins()
    text = f"unknown speculative method {_short(name)}"
    if suggestion is not None:
        text += f" (did you mean {suggestion!r}?)"
    text += f"; methods: {', '.join(builtin)}"
    if registered:
        text += f"; registered custom methods: {', '.join(registered)}"
    text += f" ({len(MTP_ALIASES)} MTP model-type aliases of 'mtp' are also accepted; see specpath methods)"
    if broken:
        text += "; broken plugins: " + ", ".join(f"{b.name} ({b.error})" for b in broken)
    err = UnknownMethodError(text, field=field)
    err.value, err.suggestion = name, suggestion  # kept for programs; the line puts the suggestion first
    return err
