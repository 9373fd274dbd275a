"""Build the speculator a resolved config names, importing its module only now."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from specpath.errors import SpeculativeConfigError

if TYPE_CHECKING:  # pragma: no cover
    from specpath.config.speculative import SpeculativeConfig
    from specpath.speculator import BaseSpeculator, SpeculatorContext


def import_object(qualname: str) -> object:
    """The object ``"module:Name"`` (``Name`` may be dotted), ``"module.Name"``, or a whole
    ``"module"`` names: specpath's one importer of import paths. Import errors propagate."""
    module, sep, name = qualname.partition(":")
    if not sep:
        try:
            return importlib.import_module(qualname)
        except ModuleNotFoundError as exc:
            if exc.name != qualname or "." not in qualname:
                raise
        module, _, name = qualname.rpartition(".")
    obj: object = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_qualname(qualname: str, field: str = "speculator_class") -> object:
    """:func:`import_object` for a configuration value: a one-line error if that fails."""
    if not isinstance(qualname, str) or not qualname:
        raise SpeculativeConfigError("must be 'module:Class'", field=field, value=qualname)
    try:
        return import_object(qualname)
    except Exception as exc:  # noqa: BLE001 - report any import failure in one line
        raise SpeculativeConfigError(f"cannot import it: {type(exc).__name__}: {exc}", field=field, value=qualname) from None


def create_speculator(spec_config: SpeculativeConfig, context: SpeculatorContext) -> BaseSpeculator:
    """Instantiate ``spec_config.speculator_config.speculator_class(spec_config, context)``; with
    a ``model_free_drafter``, that method's speculator beside it (:mod:`specpath.hybrid`). A drafter
    with weights fed lazily is wrapped in its catch-up window (:mod:`specpath.catch_up`)."""
    from specpath.catch_up import CatchUpWindow, catch_up_window

    speculator = _instantiate(spec_config, context)
    window = catch_up_window(spec_config)
    if window:
        speculator = CatchUpWindow(speculator, window)
    if spec_config.model_free_config is None:
        return speculator
    from specpath.hybrid import HybridSpeculator

    model_free = _instantiate(spec_config.model_free_config, context)
    return HybridSpeculator(speculator, model_free, spec_config.model_free_min_tokens)


def _instantiate(spec_config: SpeculativeConfig, context: SpeculatorContext) -> BaseSpeculator:
    from specpath.speculator import BaseSpeculator

    config_cls = type(spec_config.speculator_config)
    path = config_cls.speculator_class
    field = f"{config_cls.qualname()}.speculator_class"
    if path is None:
        raise SpeculativeConfigError(
            f"method {spec_config.custom_method or spec_config.method!r} declares no speculator", field=field
        )
    cls = resolve_qualname(path, field=field)
    if not (isinstance(cls, type) and issubclass(cls, BaseSpeculator)):
        raise SpeculativeConfigError("is not a specpath.speculator.BaseSpeculator subclass", field=field, value=path)
    return cls(spec_config, context)
