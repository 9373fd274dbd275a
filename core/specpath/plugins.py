"""Method plugins: indexed from entry-point metadata, loaded one at a time on first use.

Entry points live in the ``specpath.methods`` group; the entry-point name is the method name
and its value a light module of :data:`specpath.hookspecs.hookimpl` functions. Indexing reads
metadata only. Loading imports the module, registers it with the pluggy manager (pluggy checks
the hook names: ``check_pending``) and runs its ``specpath_register_methods`` hook. Each step
is isolated per entry point: any failure (an import error, ``sys.exit()`` at import, a raising
hook, a misspelled hook name, an invalid registration) marks that plugin broken, recorded with
its distribution, version and a one-line error, and never hides the others.

A built-in method name is bound only by the distribution that owns it: the one the method
table names (``specpath-ngram`` for ``ngram``) when it declares an entry point of that name,
else the first distribution, by name, that does. Its entry point is loaded before any other
of the same name, and another distribution's registration of an owned name is refused (that
plugin is recorded broken), so no plugin can replace or break a built-in.

Environment switches, read when the index is built (pluggy's ``set_blocked`` enforces them):

* ``SPECPATH_PLUGINS="a,b"`` - allow-list of entry-point names, applied before import
  (``""`` allows none);
* ``SPECPATH_DISABLE_PLUGIN_AUTOLOAD=1`` - load no entry point (in-process plugins still work);
* ``SPECPATH_STRICT_PLUGINS=1`` - raise :class:`specpath.errors.PluginError` instead of recording.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from importlib import metadata
from typing import Any

import attrs
import pluggy

from specpath import hookspecs
from specpath.config import declared
from specpath.errors import PluginError, SpeculativeConfigError, closest_match
from specpath.methods import BUILTIN_METHODS, CANONICAL_METHODS, METHOD_DISTRIBUTIONS
from specpath.registry import get_registry, qualname_of, reset_registry

GROUP = "specpath.methods"
"""The entry-point group of method plugins."""

_TRUE = {"1", "true", "yes", "on"}

BLOCKED_WHY = "blocked: SPECPATH_PLUGINS does not list it"
DISABLED_WHY = "disabled: SPECPATH_DISABLE_PLUGIN_AUTOLOAD is set"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def strict() -> bool:
    """Whether ``SPECPATH_STRICT_PLUGINS`` asks to raise instead of recording."""
    return _env_flag("SPECPATH_STRICT_PLUGINS")


@attrs.frozen
class BrokenPlugin:
    """A plugin that failed; shown by ``specpath plugins``/``methods`` and in unknown-method errors."""

    name: str
    distribution: str | None
    version: str | None
    error: str


@attrs.frozen
class Detection:
    """A ``specpath_detect_method`` answer and who gave it."""

    method: Any
    plugin: str
    """The plugin's record name (``declared.PLUGIN_NAME`` for the core's declared-class hook)."""
    hook: str
    """``module.function`` of the hook implementation that answered."""


@attrs.define
class PluginRecord:
    """One entry point (or in-process plugin) and what became of it."""

    name: str
    value: str
    distribution: str | None
    version: str | None
    status: str = "indexed"
    """``indexed`` (not loaded yet), ``loaded``, ``broken``, ``blocked`` (not in
    ``SPECPATH_PLUGINS``) or ``disabled`` (``SPECPATH_DISABLE_PLUGIN_AUTOLOAD``)."""
    error: str | None = None
    methods: list[str] = attrs.field(factory=list)
    entry_point: Any = attrs.field(default=None, repr=False, eq=False)
    plugin: Any = attrs.field(default=None, repr=False, eq=False)

    @property
    def plugin_name(self) -> str:
        """The name it has (or would have) on the pluggy manager."""
        return f"{self.distribution or '?'}:{self.name}"

    @property
    def why_not_loaded(self) -> str | None:
        """For a blocked or disabled entry point: why, in words."""
        return {"blocked": BLOCKED_WHY, "disabled": DISABLED_WHY}.get(self.status)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
            "methods": list(self.methods),
            "error": self.error,
        }


def _one_line_error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _origin(record: PluginRecord) -> str:
    return f"plugin {record.name!r} ({record.distribution or 'in-process'} {record.version or ''})".replace(" )", ")")


class _PluginHost:
    """The pluggy manager plus the entry-point index; one per process (see :func:`reset`)."""

    def __init__(self, search_path: list[str] | None) -> None:
        from specpath.config.converter import get_converter

        self.search_path = search_path
        self.lock = threading.RLock()
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.pm.register(declared, name=declared.PLUGIN_NAME)
        self.pm.hook.specpath_configure_converter.call_historic(kwargs={"converter": get_converter()})
        self.records: list[PluginRecord] | None = None
        self.owners: dict[str, str] = {}
        self.in_process: dict[int, PluginRecord] = {}
        self.processed: set[int] = {id(declared)}

    # -- index -------------------------------------------------------------------------

    def _entry_points(self) -> Iterable[metadata.EntryPoint]:
        if self.search_path is None:
            return metadata.entry_points(group=GROUP)
        seen, found = set(), []
        for dist in metadata.distributions(path=list(self.search_path)):
            for ep in dist.entry_points:
                if ep.group == GROUP and (ep.name, ep.value) not in seen:
                    seen.add((ep.name, ep.value))
                    found.append(ep)
        return found

    def index(self) -> list[PluginRecord]:
        with self.lock:
            if self.records is None:
                self.records = self._scan()
                self.owners = _owners(self.records)
            return self.records

    def _scan(self) -> list[PluginRecord]:
        disabled = _env_flag("SPECPATH_DISABLE_PLUGIN_AUTOLOAD")
        allow = os.environ.get("SPECPATH_PLUGINS")
        allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
        records = []
        for ep in self._entry_points():
            dist = getattr(ep, "dist", None)
            record = PluginRecord(
                name=ep.name,
                value=ep.value,
                distribution=dist.metadata["Name"] if dist is not None else None,
                version=dist.version if dist is not None else None,
                entry_point=ep,
            )
            if disabled or (allowed is not None and ep.name not in allowed):
                record.status = "disabled" if disabled else "blocked"
                self.pm.set_blocked(record.plugin_name)
            records.append(record)
        return sorted(records, key=lambda r: (r.name, r.distribution or ""))

    # -- loading ------------------------------------------------------------------------

    def load(self, name: str) -> bool:
        """Load the entry points named ``name``, the owner of a built-in name first."""
        loaded = False
        with self.lock:
            records = [r for r in self.index() if r.name == name]
            owner = self.owners.get(name)
            for record in sorted(records, key=lambda r: r.distribution != owner):
                if record.status == "indexed":
                    self._load(record)
                    loaded = loaded or record.status == "loaded"
        return loaded

    def load_all(self) -> None:
        with self.lock:
            for record in self.index():
                if record.status == "indexed":
                    self.load(record.name)
            self.sync()

    def _fail(self, record: PluginRecord, exc: BaseException, what: str = "") -> None:
        record.status = "broken"
        record.error = what + _one_line_error(exc)
        if strict():
            raise PluginError(f"{_origin(record)}: {record.error}") from exc

    def _load(self, record: PluginRecord) -> None:
        plugin, ours = None, False
        try:
            plugin = record.entry_point.load()
            if self.pm.is_registered(plugin):  # already loaded through another entry point
                self.processed.add(id(plugin))
                twin = self.record_for(plugin)
                record.methods = list(twin.methods) if twin is not None else []
            else:
                ours = True  # pluggy may register it and then raise from a historic hook
                self.pm.register(plugin, name=record.plugin_name)
                self._check_hook_names(plugin)
                record.methods = self._register_methods(plugin, record)
            record.plugin = plugin
            record.status = "loaded"
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit at import too: one plugin never stops the rest
            if ours and self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            self._fail(record, exc)

    def _check_hook_names(self, plugin: object) -> None:
        """pluggy's ``check_pending``: a misspelled hook would register nothing, silently."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError:
            known = [n for n in dir(hookspecs) if n.startswith("specpath_")]
            for caller in self.pm.get_hookcallers(plugin) or []:
                if not caller.has_spec():
                    hint = closest_match(caller.name, known)
                    raise PluginError(
                        f"unknown hook {caller.name!r}" + (f", did you mean {hint!r}?" if hint else "")
                    ) from None
            raise

    def _may_bind(self, record: PluginRecord, name: str) -> None:
        """A built-in name that a distribution owns is bound only by that distribution
        (in-process plugins are the user's own code and may bind any)."""
        owner = self.owners.get(name)
        if name in BUILTIN_METHODS and record.distribution is not None and owner not in (None, record.distribution):
            raise SpeculativeConfigError(
                f"may not bind the built-in method {name!r}: it belongs to the distribution {owner!r}"
            )

    def _register_methods(self, plugin: object, record: PluginRecord) -> list[str]:
        """Run the plugin's register hook, validate every registration, then bind all or none."""
        self.processed.add(id(plugin))
        pending: list[tuple[str, type]] = []

        def register(name: str, config_class: type) -> None:
            pending.append((name, config_class))

        for impl in self.pm.hook.specpath_register_methods.get_hookimpls():
            if impl.plugin is plugin:
                _call(impl, register=register)
        registry = get_registry()
        for name, cls in pending:
            registry.check(name, cls, allow_builtin=True)
            if registry.get(name) is None or registry.get(name).config_class is not cls:
                self._may_bind(record, name)
        names = [n for n, _ in pending]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if any(len({qualname_of(c) for m, c in pending if m == n}) > 1 for n in dupes):
            raise SpeculativeConfigError(f"registers {dupes} twice with different classes")
        for name, cls in pending:
            registry.bind(name, cls, origin=_origin(record), distribution=record.distribution, allow_builtin=True)
        return sorted(set(names))

    def sync(self) -> None:
        """Run the register hook of plugins registered in-process (``pm.register``)."""
        with self.lock:
            for impl in self.pm.hook.specpath_register_methods.get_hookimpls():
                plugin = impl.plugin
                if id(plugin) in self.processed:
                    continue
                record = self.in_process.setdefault(id(plugin), self._in_process_record(plugin))
                record.plugin = plugin
                try:
                    record.methods = self._register_methods(plugin, record)
                    record.status = "loaded"
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # noqa: BLE001
                    self._fail(record, exc)

    def _in_process_record(self, plugin: object) -> PluginRecord:
        name = self.pm.get_name(plugin) or ""
        if not name or name.isdigit():  # pluggy names anonymous plugins by id()
            name = getattr(plugin, "__name__", None) or type(plugin).__name__
        return PluginRecord(name=name, value="(in-process)", distribution=None, version=None)

    def all_records(self) -> list[PluginRecord]:
        return list(self.index()) + list(self.in_process.values())

    def record_for(self, plugin: object) -> PluginRecord | None:
        for record in self.all_records():
            if record.plugin is plugin:
                return record
        return None

    def _plugin_name(self, plugin: object) -> str:
        record = self.record_for(plugin)
        return record.name if record is not None else (self.pm.get_name(plugin) or "?")

    def detection_order(self) -> list[Any]:
        """The ``specpath_detect_method`` implementations in the order they are asked: tier by
        tier (``tryfirst``, plain = config evidence, ``trylast`` = path hints), and within a tier
        by :data:`DETECTION_ORDER`, never by which plugin happened to be imported first."""

        def key(impl: Any) -> tuple[int, int, str]:
            tier = 0 if impl.tryfirst else (2 if impl.trylast else 1)
            name = self._plugin_name(impl.plugin)
            rank = DETECTION_ORDER.index(name) if name in DETECTION_ORDER else len(DETECTION_ORDER)
            return tier, rank, f"{name}:{impl.function.__module__}.{impl.function.__name__}"

        return sorted(self.pm.hook.specpath_detect_method.get_hookimpls(), key=key)

    def detect(self, checkpoint: Any) -> Detection | None:
        """Every ``specpath_detect_method`` in :meth:`detection_order`, each called on its own so
        that a raising one is recorded and skipped; the first non-None answer wins."""
        self.load_all()
        for impl in self.detection_order():
            try:
                answer = _call(impl, checkpoint=checkpoint)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001
                record = self.record_for(impl.plugin) or self.in_process.setdefault(
                    id(impl.plugin), self._in_process_record(impl.plugin)
                )
                self._fail(record, exc, "specpath_detect_method raised ")
                continue
            if answer is not None:
                name = self._plugin_name(impl.plugin)
                return Detection(answer, name, f"{impl.function.__module__}.{impl.function.__name__}")
        return None


DETECTION_ORDER: tuple[str, ...] = CANONICAL_METHODS
"""Within a tier of ``specpath_detect_method`` answers, plugins (by entry-point name) are asked in
the built-in methods' table order (so ``eagle`` before ``eagle3``, as the article's path hints,
and both before ``dflash`` and ``dspark``); any other plugin after them, by name. A plain-Llama
checkpoint under ``x-eagle3-dflash`` is therefore ``eagle3`` whatever was imported first."""


def _owners(records: list[PluginRecord]) -> dict[str, str]:
    """Built-in name -> the distribution that owns it (see the module docstring)."""
    owners: dict[str, str] = {}
    for record in records:  # sorted by (name, distribution)
        if record.name in BUILTIN_METHODS and record.distribution is not None:
            canonical = METHOD_DISTRIBUTIONS.get(record.name)
            if record.distribution == canonical or record.name not in owners:
                owners[record.name] = record.distribution
    return owners


def _call(impl: Any, **kwargs: Any) -> Any:
    """Call one hookimpl with the (opt-in) arguments it declares."""
    return impl.function(**{name: kwargs[name] for name in impl.argnames})


_host: _PluginHost | None = None
_host_lock = threading.Lock()
_search_path: list[str] | None = None


def _get_host() -> _PluginHost:
    global _host
    with _host_lock:
        if _host is None:
            _host = _PluginHost(_search_path)
        return _host


def get_plugin_manager() -> pluggy.PluginManager:
    """The pluggy manager (project ``specpath``); ``register`` in-process plugins on it."""
    return _get_host().pm


def reset(search_path: Iterable[str] | None = None) -> None:
    """Forget every loaded plugin, registration and index entry, and re-scan entry points
    on next use. ``search_path`` limits the scan to distributions found on those paths
    (tests use it to see only their fake plugins); None scans ``sys.path``."""
    global _host, _search_path
    with _host_lock:
        _host = None
        _search_path = None if search_path is None else [str(p) for p in search_path]
    reset_registry()


def rescan() -> None:
    """Re-index entry points (e.g. after installing a distribution), keeping the scan scope."""
    reset(_search_path)


def sync_registrations() -> None:
    """Bind the methods of plugins registered in-process since the last call."""
    _get_host().sync()


def load(name: str) -> bool:
    """Load the entry point(s) named ``name`` if indexed and allowed; True if one loaded."""
    host = _get_host()
    host.sync()
    return host.load(name)


def load_all() -> None:
    """Load every allowed entry point (for listings, detection and conformance kits)."""
    _get_host().load_all()


def plugin_records() -> list[PluginRecord]:
    """Every entry point and in-process plugin with its status (nothing is loaded here)."""
    return _get_host().all_records()


def broken_plugins() -> list[BrokenPlugin]:
    """Plugins that failed, as (name, distribution, version, one-line error)."""
    return [
        BrokenPlugin(r.name, r.distribution, r.version, r.error or "")
        for r in _get_host().all_records()
        if r.status == "broken"
    ]


def detect_method(checkpoint: Any) -> Detection | None:
    """Ask every plugin's ``specpath_detect_method``; the first non-None answer and who gave it."""
    return _get_host().detect(checkpoint)
