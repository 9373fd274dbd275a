"""The field rules of a speculative config, one small object per rule (attrs-validator style).

Two kinds of start-up rule, both raising a one-line :class:`~specpath.errors.SpeculativeConfigError`:

* **field rules** check one value on its own. The schema attaches them to fields
  (``check=at_least(1)``), and they run wherever a value is structured: on the user's input and
  on every update a config-class hook returns, so each value is checked once, where it enters.
  The other config classes (``ParallelConfig``, ``ModelConfig``...) run the same rules as attrs
  validators (:func:`validator`), so every config error has one style and one type.
* **cross-field rules** check combinations once the config class is known: they live in
  :mod:`specpath.config.cross_rules`.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from specpath.errors import SpeculativeConfigError

FieldRule = Callable[[str, Any], None]
"""``rule(field_name, value)``: raise if the (non-None) value is invalid."""


class LossyVerificationWarning(UserWarning):
    """The chosen verification may change the output distribution."""


def _where(name: str) -> str:
    """The field's path: a bare name is a speculative-config field; a dotted one is kept."""
    return name if "." in name else f"speculative_config.{name}"


# -- field rules ------------------------------------------------------------------------


@attrs.frozen(repr=False)
class _AtLeast:
    bound: int
    problem: str

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value < self.bound:
            raise SpeculativeConfigError(self.problem, field=_where(name), value=value)

    def __repr__(self) -> str:
        return f"<at_least {self.bound}>"


def at_least(bound: int, problem: str | None = None) -> FieldRule:
    """A number ``>= bound``.

    Raises:
        SpeculativeConfigError: "must be >= bound" (or ``problem``).
    """
    return _AtLeast(bound, problem or f"must be >= {bound}")


def greater_than_zero() -> FieldRule:
    """A count that must be positive (K): "must be greater than 0"."""
    return _AtLeast(1, "must be greater than 0")


@attrs.frozen(repr=False)
class _AtMost:
    bound: int

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value > self.bound:
            raise SpeculativeConfigError(f"must be <= {self.bound}", field=_where(name), value=value)


def at_most(bound: int) -> FieldRule:
    """A number ``<= bound`` (a sanity cap: nothing sizes buffers from an absurd value).

    Raises:
        SpeculativeConfigError: "must be <= bound".
    """
    return _AtMost(bound)


@attrs.frozen(repr=False)
class _Finite:
    def __call__(self, name: str, value: Any) -> None:
        if value is not None and not math.isfinite(value):
            raise SpeculativeConfigError("must be finite", field=_where(name), value=value)


def finite() -> FieldRule:
    """A float that is neither inf nor nan.

    Raises:
        SpeculativeConfigError: "must be finite".
    """
    return _Finite()


@attrs.frozen(repr=False)
class _NotBlank:
    def __call__(self, name: str, value: Any) -> None:
        if value is not None and not value.strip():
            raise SpeculativeConfigError("must not be empty", field=_where(name), value=value)


def not_blank() -> FieldRule:
    """A string with something in it.

    Raises:
        SpeculativeConfigError: "must not be empty".
    """
    return _NotBlank()


@attrs.frozen(repr=False)
class _PlainText:
    max_length: int

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if not value or len(value) > self.max_length:
            raise SpeculativeConfigError(
                f"must be 1 to {self.max_length} characters", field=_where(name), value=value[:80]
            )
        if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in value) or value != value.strip():
            raise SpeculativeConfigError(
                "must be a plain name (no control characters, line breaks or surrounding spaces)",
                field=_where(name),
                value=value,
            )


def plain_text(max_length: int = 64) -> FieldRule:
    """A short name such as a backend or dtype: printable, no control or separator characters
    (so it cannot break a log line or an error message), at most ``max_length`` long.

    Raises:
        SpeculativeConfigError: naming the field.
    """
    return _PlainText(max_length)


@attrs.frozen(repr=False)
class _Refused:
    problem: str
    suggestion: str | None

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            raise SpeculativeConfigError(self.problem, field=_where(name), value=value, suggestion=self.suggestion)


def refused(problem: str, suggestion: str | None = None) -> FieldRule:
    """A field that exists only to point a misuse to the right one (``tensor_parallel_size``).

    Raises:
        SpeculativeConfigError: ``problem``, with ``suggestion``.
    """
    return _Refused(problem, suggestion)


@attrs.frozen(repr=False)
class _PositiveInteger:
    def __call__(self, name: str, value: Any) -> None:
        if value is not None and (type(value) is not int or value < 1):
            raise SpeculativeConfigError("must be an integer >= 1", field=_where(name), value=value)


def positive_integer() -> FieldRule:
    """An ``int`` (not a bool or a float) ``>= 1``, for classes built without the strict converter.

    Raises:
        SpeculativeConfigError: "must be an integer >= 1".
    """
    return _PositiveInteger()


@attrs.frozen(repr=False)
class _OneOf:
    choices: tuple[Any, ...]
    problem: str

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value not in self.choices:
            raise SpeculativeConfigError(self.problem, field=_where(name), value=value, allowed=self.choices)


def one_of(choices: Sequence[Any], problem: str = "is not one of the allowed values") -> FieldRule:
    """One of ``choices``.

    Raises:
        SpeculativeConfigError: ``problem``, listing the choices.
    """
    return _OneOf(tuple(choices), problem)


def check_field(name: str, value: Any, rules: Sequence[FieldRule]) -> None:
    """Run a field's rules in order."""
    for rule in rules:
        rule(name, value)


def validator(*field_rules: FieldRule, owner: str | Callable[[Any], str]) -> Callable[[Any, Any, Any], None]:
    """The field rules as an attrs validator of another config class; errors name
    ``<owner>.<field>`` (``owner`` may be a function of the instance, read after ``__init__``
    has set every field, e.g. a ModelConfig is ``model_config`` or, as a draft, ``speculative_config``)."""

    def run(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        prefix = owner(instance) if callable(owner) else owner
        check_field(f"{prefix}.{attribute.name}", value, field_rules)

    return run
