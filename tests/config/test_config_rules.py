"""specpath.config.rules: each field rule and cross-field rule on its own."""

from __future__ import annotations

import math
import types

import pytest

from specpath.config import cross_rules, rules
from specpath.errors import SpeculativeConfigError


def _message(rule, *args) -> str:
    with pytest.raises(SpeculativeConfigError) as info:
        rule(*args)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_at_least_and_greater_than_zero():
    rules.at_least(1)("max_model_len", 1)
    rules.at_least(1)("max_model_len", None)  # unset is not checked
    assert _message(rules.at_least(1), "max_model_len", 0) == "speculative_config.max_model_len: must be >= 1 (got 0)"
    assert "must be greater than 0" in _message(rules.greater_than_zero(), "num_speculative_tokens", -2)


def test_at_most():
    rules.at_most(8)("k", 8)
    assert "must be <= 8" in _message(rules.at_most(8), "k", 9)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_finite(value):
    assert "must be finite" in _message(rules.finite(), "synthetic_acceptance_length", value)
    rules.finite()("synthetic_acceptance_length", 2.5)


def test_not_blank_and_refused():
    assert "must not be empty" in _message(rules.not_blank(), "model", "  ")
    text = _message(rules.refused("is not valid here", suggestion="other"), "tensor_parallel_size", 2)
    assert text.startswith("speculative_config.tensor_parallel_size: is not valid here") and "'other'" in text
    rules.refused("x")("tensor_parallel_size", None)


@pytest.mark.parametrize("value", ["fp8\n", "a\x00b", " auto", "x" * 65, ""])
def test_plain_text_refuses_control_characters_and_long_values(value):
    _message(rules.plain_text(64), "kv_cache_dtype", value)


def test_plain_text_accepts_names():
    for value in ("auto", "fp8_e4m3", "FLASH_ATTN", "bitsandbytes-4bit", "torch.float16"):
        rules.plain_text()("kv_cache_dtype", value)


def _ctx(config_class=object, **fields):
    spec = types.SimpleNamespace(**fields)
    trace = []

    class Ctx:
        pass

    ctx = Ctx()
    ctx.spec, ctx.config_class, ctx.trace = spec, config_class, trace
    ctx.set = lambda **u: [setattr(spec, k, v) for k, v in u.items()]
    ctx.note = lambda step, detail: trace.append((step, detail))
    return ctx


def test_the_dynamic_k_table_rule():
    rule = cross_rules._DynamicKTable()
    rule(_ctx(num_speculative_tokens=4, num_speculative_tokens_per_batch_size=((1, 4, 2), (5, 8, 4))))
    assert "ranges overlap" in _message(
        rule, _ctx(num_speculative_tokens=4, num_speculative_tokens_per_batch_size=((1, 4, 2), (4, 8, 4)))
    )
    assert "K must be in 1..num_speculative_tokens (4)" in _message(
        rule, _ctx(num_speculative_tokens=4, num_speculative_tokens_per_batch_size=((1, 4, 5),))
    )


def test_the_fly_rule_fills_its_default_window_and_warns():
    cls = types.SimpleNamespace(proposes_draft_tokens=True, __name__="C")
    ctx = _ctx(cls, rejection_sample_method="fly", num_speculative_tokens=9, fly_window_size=None,
               fly_entropy_threshold=None)
    with pytest.warns(rules.LossyVerificationWarning):
        cross_rules._FlyWindow()(ctx)
    assert ctx.spec.fly_window_size == 6 and [step for step, _ in ctx.trace] == ["fly", "lossy"]


def test_supported_options_are_asked_of_the_class():
    cls = type("C", (), {"supported_options": frozenset({"xpress_topc"})})
    spec = types.SimpleNamespace(custom_method=None, method="dspark")
    supports = lambda c, o: o in c.supported_options  # noqa: E731
    cross_rules.check_supported_options(spec, cls, {"xpress_topc": 4}, supports)
    text = _message(cross_rules.check_supported_options, spec, cls, {"enable_adaptive_verification": True}, supports)
    assert text == ("speculative_config.enable_adaptive_verification: is not supported by method 'dspark' (C) "
                    "(got True; allowed: xpress_topc)")


def test_every_cross_field_rule_is_a_small_documented_object():
    assert len(cross_rules.CROSS_FIELD_RULES) == len({type(r) for r in cross_rules.CROSS_FIELD_RULES})
    assert all(callable(r) and type(r).__doc__ for r in cross_rules.CROSS_FIELD_RULES)
