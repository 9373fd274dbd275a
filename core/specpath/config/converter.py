"""The one strict cattrs converter that structures every configuration input.

Strict means: unknown keys are errors (``forbid_extra_keys``), and scalars are never coerced
(``"3"`` is not 3, ``True`` is not 1, ``3.9`` is not 3; an int is accepted where a float is
expected). ``Literal`` values outside their set raise :class:`specpath.errors.ChoiceError`,
which the humaniser turns into "allowed: ...; did you mean ...?". Plugins add hooks for their
own types through the historic ``specpath_configure_converter`` hook.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

import cattrs

from specpath.errors import ChoiceError, TypeMismatchError


def _strict_scalar(expected: type) -> Any:
    def hook(value: Any, _type: Any) -> Any:
        if type(value) is not expected:
            raise TypeMismatchError(value, expected.__name__)
        return value

    return hook


def _float_hook(value: Any, _type: Any) -> float:
    if type(value) not in (int, float):
        raise TypeMismatchError(value, "float")
    return float(value)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _literal_hook(value: Any, tp: Any) -> Any:
    allowed = get_args(tp)
    # `True == 1` in Python: compare type as well, so True is not accepted for Literal[1].
    if not any(value == a and type(value) is type(a) for a in allowed):
        raise ChoiceError(value, allowed)
    return value


def _is_plain_tuple(tp: Any) -> bool:
    return get_origin(tp) is tuple and ... not in get_args(tp)


def _tuple_hook_factory(converter: cattrs.Converter) -> Any:
    def hook(value: Any, tp: Any) -> tuple:
        args = get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise TypeMismatchError(value, f"a list of {len(args)} items")
        if len(value) != len(args):
            raise TypeMismatchError(value, f"a list of exactly {len(args)} items")
        return tuple(converter.structure(v, a) for v, a in zip(value, args))

    return hook


def _list_guard(converter: cattrs.Converter) -> Any:
    """Lists must be lists/tuples: a string or a dict is not silently iterated."""
    def predicate(tp: Any) -> bool:
        return get_origin(tp) in (list, tuple) and not _is_plain_tuple(tp)

    def hook(value: Any, tp: Any) -> Any:
        if not isinstance(value, (list, tuple)):
            raise TypeMismatchError(value, "a list")
        (item,) = get_args(tp)[:1] or (Any,)
        items = [converter.structure(v, item) for v in value]
        return tuple(items) if get_origin(tp) is tuple else items

    return predicate, hook


def _is_mapping_type(tp: Any) -> bool:
    return tp in (dict, Mapping) or get_origin(tp) in (dict, Mapping)


def _dict_hook(value: Any, tp: Any) -> dict:
    if not isinstance(value, Mapping):
        raise TypeMismatchError(value, "a mapping")
    args = get_args(tp)
    if args and args[0] is str and not all(isinstance(k, str) for k in value):
        raise TypeMismatchError(value, "a mapping with string keys")
    return dict(value)


def _is_runtime_config(tp: Any) -> bool:
    from specpath.config import model

    return isinstance(tp, type) and tp in (
        model.ParallelConfig,
        model.CacheConfig,
        model.SchedulerConfig,
        model.LoadConfig,
        model.KernelConfig,
        model.AttentionConfig,
    )


def _runtime_config_hook_factory(converter: cattrs.Converter) -> Any:
    """Small runtime configs: accept an instance as is, or structure a mapping strictly."""
    from cattrs.gen import make_dict_structure_fn

    @functools.cache
    def from_dict(cl: type) -> Any:
        return make_dict_structure_fn(cl, converter, _cattrs_forbid_extra_keys=True)

    def hook(value: Any, cl: type) -> Any:
        if isinstance(value, cl):
            return value
        if not isinstance(value, Mapping):
            raise TypeMismatchError(value, f"a mapping of {cl.__name__} fields")
        return from_dict(cl)(dict(value), cl)

    return hook


def make_converter() -> cattrs.Converter:
    """A fresh strict converter (tests use this; code uses :func:`get_converter`)."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    for scalar in (int, str, bool):
        converter.register_structure_hook(scalar, _strict_scalar(scalar))
    converter.register_structure_hook(float, _float_hook)
    converter.register_structure_hook_func(_is_literal, _literal_hook)
    converter.register_structure_hook_func(_is_plain_tuple, _tuple_hook_factory(converter))
    predicate, hook = _list_guard(converter)
    converter.register_structure_hook_func(predicate, hook)
    converter.register_structure_hook_func(_is_mapping_type, _dict_hook)
    converter.register_structure_hook_func(_is_runtime_config, _runtime_config_hook_factory(converter))
    converter.register_structure_hook(Any, lambda v, _: v)
    return converter


@functools.cache
def get_converter() -> cattrs.Converter:
    """The process-wide strict converter shared by the core and every plugin."""
    return make_converter()
