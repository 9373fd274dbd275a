"""dtype="auto" and KV memory sizes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpath_engine import dtype as dtype_module
from specpath_engine.dtype import parse_size, resolve_dtype


@pytest.mark.parametrize(
    "native, stored, expected",
    [
        (True, "float32", "float32"),  # a float32 checkpoint keeps its numbers
        (True, "bfloat16", "bfloat16"),
        (True, "float16", "bfloat16"),
        (True, None, "bfloat16"),  # quantised (GGUF)
        (False, "bfloat16", "float32"),  # no native bf16: emulation is slow
        (False, None, "float32"),
    ],
)
def test_auto_dtype(monkeypatch, native, stored, expected):
    monkeypatch.setattr(dtype_module, "cpu_has_native_bf16", lambda: native)
    assert resolve_dtype("auto", stored) == expected
    assert resolve_dtype("float16", stored) == "float16"  # an explicit choice is kept
    assert resolve_dtype("half", stored) == "float16" and resolve_dtype("float", stored) == "float32"


def test_bad_dtype():
    with pytest.raises(ValueError, match="not one of auto, float32, bfloat16, float16"):
        resolve_dtype("fp8", None)


def test_cpu_flag_detection_returns_a_bool():
    assert isinstance(dtype_module.cpu_has_native_bf16(), bool)


@given(n=st.integers(1, 10**6), unit=st.sampled_from(["", "k", "K", "m", "M", "g"]), binary=st.booleans())
def test_parse_size(n, unit, binary):
    suffix = unit + ("iB" if binary and unit else "B" if unit else "")
    base = 1024 if binary or not unit else 1000
    assert parse_size(f"{n}{suffix}") == n * base ** " kmg".index(unit.lower() or " ")


@pytest.mark.parametrize("bad", ["", "lots", "-5MB", "0", 0, -3, True, "1.5.2GB"])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError, match="size"):
        parse_size(bad)
