"""Errors the configuration layer raises, always one line and always actionable.

A :class:`SpeculativeConfigError` names the field (``speculative_config.prompt_lookup_max``),
the bad value, the allowed values and, for a misspelled key or method, the closest match.
:func:`humanize_structuring_error` is the single place where cattrs/attrs structuring errors
become one of these, so no caller ever shows a raw ``ClassValidationError`` or ``KeyError``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

_MISSING: Any = object()


def closest_match(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word`` (difflib), or None if nothing is reasonably close."""
    found = difflib.get_close_matches(str(word), sorted(set(candidates)), n=1, cutoff=0.6)
    return found[0] if found else None


def _short(value: Any, limit: int = 80) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of {value.bit_length()} bits>"  # repr() itself fails past 4,300 digits
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class SpeculativeConfigError(ValueError):
    """An invalid speculative-decoding configuration, rejected at start-up.

    ``str(err)`` is one line: ``<field path>: <problem> (got <value>; allowed: ...; did you
    mean ...?)``. The parts are also kept as attributes for programs that inspect them.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        value: Any = _MISSING,
        allowed: Iterable[Any] | None = None,
        suggestion: str | None = None,
    ) -> None:
        self.field = field
        self.value = None if value is _MISSING else value
        self.allowed = None if allowed is None else list(allowed)
        self.suggestion = suggestion
        self.problem = _one_line(message)
        details = []
        if value is not _MISSING:
            details.append(f"got {_short(value)}")
        if self.allowed is not None:
            shown = ", ".join(str(a) for a in self.allowed[:40])
            more = f", ... ({len(self.allowed)} in all)" if len(self.allowed) > 40 else ""
            details.append(f"allowed: {shown}{more}")
        if suggestion is not None:
            details.append(f"did you mean {suggestion!r}?")
        text = f"{field}: {self.problem}" if field else self.problem
        if details:
            text += " (" + "; ".join(details) + ")"
        super().__init__(_one_line(text))


class InputError(ValueError):
    """Bad input a user gave (an engine argument, a prompt, a conversation, a checkpoint's chat
    template), refused in one line that says what to change. Packages subclass it for their own
    kinds of input; the CLI prints its message as is, without a traceback or a type name."""

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


class UnknownMethodError(SpeculativeConfigError):
    """A method name that is neither built in nor registered (nor provided by a plugin)."""


class PluginError(RuntimeError):
    """A plugin failed to load or register while ``SPECPATH_STRICT_PLUGINS`` is set."""


class ChoiceError(ValueError):
    """Raised by the strict converter for a value outside a ``Literal``; kept structured."""

    def __init__(self, value: Any, allowed: Iterable[Any]) -> None:
        self.value = value
        self.allowed = list(allowed)
        super().__init__(f"{value!r} is not one of {self.allowed}")


class TypeMismatchError(TypeError):
    """Raised by the strict converter when a value has the wrong type (no coercion)."""

    def __init__(self, value: Any, expected: str) -> None:
        self.value = value
        self.expected = expected
        super().__init__(f"expected {expected}, got {type(value).__name__} {value!r}")


def _leaves(exc: BaseException, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], BaseException]]:
    """Walk a cattrs exception group, yielding (path, leaf exception) pairs."""
    from cattrs.errors import AttributeValidationNote, IterableValidationNote

    children = getattr(exc, "exceptions", None)
    if children is None:
        yield path, exc
        return
    for child in children:
        sub = path
        for note in getattr(child, "__notes__", ()):
            if isinstance(note, AttributeValidationNote):
                sub = path + (f".{note.name}",)
            elif isinstance(note, IterableValidationNote):
                sub = path + (f"[{note.index!r}]",)
        yield from _leaves(child, sub)


def humanize_structuring_error(
    exc: BaseException, root: str = "speculative_config", field_names: Iterable[str] | None = None
) -> SpeculativeConfigError:
    """Turn any error raised while structuring input into one :class:`SpeculativeConfigError`.

    ``field_names`` (the valid keys of the structured class) feed the "did you mean" of an
    unknown key; without it the class named by cattrs is used.
    """
    from cattrs.errors import ForbiddenExtraKeysError

    if isinstance(exc, SpeculativeConfigError):
        return exc
    leaves = list(_leaves(exc, ()))
    path, leaf = leaves[0]
    field = root + "".join(path)
    more = f" (and {len(leaves) - 1} more problem(s))" if len(leaves) > 1 else ""
    if isinstance(leaf, SpeculativeConfigError):
        return leaf
    if isinstance(leaf, ForbiddenExtraKeysError):
        import attrs

        names = list(field_names) if field_names is not None else [a.name for a in attrs.fields(leaf.cl)]
        key = sorted(leaf.extra_fields)[0]
        suggestion = closest_match(key, names)
        others = sorted(leaf.extra_fields)[1:]
        extra = f" (also unknown: {', '.join(others)})" if others else ""
        return SpeculativeConfigError(
            f"unknown key {key!r}{extra}{more}",
            field=field,
            allowed=None if suggestion else sorted(names),
            suggestion=suggestion,
        )
    if isinstance(leaf, ChoiceError):
        return SpeculativeConfigError(
            f"invalid value{more}",
            field=field,
            value=leaf.value,
            allowed=[repr(a) for a in leaf.allowed],
            suggestion=closest_match(leaf.value, [str(a) for a in leaf.allowed])
            if isinstance(leaf.value, str)
            else None,
        )
    if isinstance(leaf, TypeMismatchError):
        return SpeculativeConfigError(f"expected {leaf.expected}{more}", field=field, value=leaf.value)
    if isinstance(leaf, KeyError):
        return SpeculativeConfigError(f"required key missing{more}", field=field)
    message = str(leaf) or type(leaf).__name__
    if isinstance(leaf, TypeError) and "iterable" in message:
        message = "expected a list"
    return SpeculativeConfigError(f"{message}{more}", field=field)
