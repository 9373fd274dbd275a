"""One-line errors and the single humaniser of structuring errors."""

from __future__ import annotations

from typing import Literal

import attrs
import pytest

from specpath.config.converter import make_converter
from specpath.errors import SpeculativeConfigError, closest_match, humanize_structuring_error


def test_error_is_a_value_error_with_all_parts_on_one_line():
    err = SpeculativeConfigError(
        "invalid\nvalue", field="speculative_config.x", value="bad", allowed=["a", "b"], suggestion="a"
    )
    assert isinstance(err, ValueError)
    assert str(err) == "speculative_config.x: invalid value (got 'bad'; allowed: a, b; did you mean 'a'?)"
    assert "\n" not in str(err)
    assert (err.field, err.value, err.allowed, err.suggestion) == ("speculative_config.x", "bad", ["a", "b"], "a")


def test_closest_match():
    assert closest_match("prompt_lookup_mx", ["prompt_lookup_max", "prompt_lookup_min", "model"]) == "prompt_lookup_max"
    assert closest_match("zzzz", ["model", "method"]) is None


@attrs.frozen(kw_only=True)
class Small:
    count: int
    mode: Literal["a", "bb"] = "a"
    ids: list[int] = attrs.field(factory=list)
    rate: float = 0.0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"count": 1, "cuont": 2}, "root: unknown key 'cuont' (did you mean 'count'?)"),
        ({"count": "3"}, "root.count: expected int (got '3')"),
        ({"count": True}, "root.count: expected int (got True)"),
        ({"count": 1, "rate": "x"}, "root.rate: expected float (got 'x')"),
        ({"count": 1, "mode": "b"}, "root.mode: invalid value (got 'b'; allowed: 'a', 'bb'; did you mean 'bb'?)"),
        ({"count": 1, "ids": [1, "2"]}, "root.ids: expected int (got '2')"),
        ({"count": 1, "ids": "12"}, "root.ids: expected a list (got '12')"),
        ({}, "root.count: required key missing"),
    ],
)
def test_humaniser_turns_cattrs_errors_into_one_line(data, expected):
    converter = make_converter()
    with pytest.raises(Exception) as info:
        converter.structure(data, Small)
    err = humanize_structuring_error(info.value, root="root")
    assert isinstance(err, SpeculativeConfigError)
    assert str(err) == expected


def test_strict_converter_accepts_an_int_for_a_float_but_never_coerces():
    converter = make_converter()
    assert converter.structure({"count": 2, "rate": 1}, Small).rate == 1.0
    with pytest.raises(Exception):
        converter.structure({"count": 3.9}, Small)
