"""The speculative config's fields as users read them: ``specpath fields``, the configuration
reference page, the method pages' option lists (one spelling of every type)."""

from __future__ import annotations

from typing import Any, Literal

from specpath.config.speculative import DOC, GROUP, KIND, METHOD_SPECIFIC, REFUSED, SpeculativeConfig


FIELD_GROUPS: dict[str, str] = {
    "source": "draft source and parallelism",
    "budget": "budget and dynamic speculation",
    "overrides": "draft-side overrides",
    "verification": "rejection sampling and verification",
    "special": "special modes and method-specific options",
}
"""The five field groups of vLLM's speculative config, in order."""


def type_name(tp: Any) -> str:
    """One spelling for every annotation (``bool``, ``int | None``, ``Literal['a', 'b'] | None``,
    ``Mapping[str, Any]``): attrs resolves some to classes and some to typing objects."""
    import types
    import typing

    none = type(None)
    if isinstance(tp, str):
        return tp.replace("typing.", "")
    if tp is none:
        return "None"
    if tp is Any:
        return "Any"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join([type_name(a) for a in args if a is not none] + (["None"] if none in args else []))
    if origin is Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def field_reference() -> list[dict[str, Any]]:
    """Every field a user may set: group, name, type, default and documentation."""
    rows = []
    for f in SpeculativeConfig.user_fields():
        if f.metadata.get(KIND) == REFUSED:
            continue  # documented as not a valid option: listing it would invite it
        rows.append({
            "group": f.metadata[GROUP],
            "name": f.name,
            "type": type_name(f.type),
            "default": f.default,
            "doc": f.metadata[DOC],
            "method_specific": f.metadata[METHOD_SPECIFIC],
        })
    order = list(FIELD_GROUPS)
    return sorted(rows, key=lambda r: order.index(r["group"]))
