"""specpath.config.resolution: the named steps, run once, each traced; checkpoint facts read once."""

from __future__ import annotations

import pytest

import core_fakes
from specpath.config import resolution
from specpath.config.speculative import SpeculativeConfig
from specpath.registry import register_speculative_method

pytestmark = pytest.mark.usefixtures("fake_builtins")


def test_the_steps_in_order():
    assert [name for name, _ in resolution.STEPS] == [
        "input", "method", "hub", "detect", "class", "agree", "variant", "default_model", "configure", "specialize", "options",
        "verify", "model_free", "result",
    ]


def test_every_step_runs_once(monkeypatch):
    calls = []
    steps = tuple((name, (lambda step, name=name: lambda r: (calls.append(name), step(r))[1])(step))
                  for name, step in resolution.STEPS)
    monkeypatch.setattr(resolution, "STEPS", steps)
    SpeculativeConfig(method="ngram", num_speculative_tokens=2)
    assert calls == [name for name, _ in steps]


def test_the_checkpoint_is_read_and_its_declaration_interpreted_once(monkeypatch, make_checkpoint):
    register_speculative_method("my_eagle3", core_fakes.MyEagle3)
    path = make_checkpoint("declares", speculator_config_class="my_eagle3")
    reads, interpretations = [], []
    read = resolution.read_draft_checkpoint
    interpret = resolution.Resolution._interpret_declaration
    monkeypatch.setattr(resolution, "read_draft_checkpoint", lambda *a: reads.append(a) or read(*a))
    monkeypatch.setattr(resolution.Resolution, "_interpret_declaration",
                        lambda self, c: interpretations.append(c) or interpret(self, c))
    spec = SpeculativeConfig(model=path, num_speculative_tokens=2)
    assert spec.custom_method == "my_eagle3" and len(reads) == 1 and len(interpretations) == 1
    reads.clear(), interpretations.clear()
    SpeculativeConfig(method="eagle3", model=path, num_speculative_tokens=2)  # checked after configure
    assert len(reads) == 1 and len(interpretations) == 1


def test_detection_is_traced_with_the_plugin_that_answered(make_checkpoint):
    spec = SpeculativeConfig(model=make_checkpoint("x", model_type="deepseek_mtp"), num_speculative_tokens=1)
    (detail,) = [d for step, d in spec.resolution_trace if step == "infer"]
    assert detail.startswith("plugin 'builtin-fakes' (core_fakes.specpath_detect_method) recognised 'mtp'")


def test_a_declared_class_is_asked_before_any_plugin(make_checkpoint):
    path = make_checkpoint("my-eagle3-head", model_type="deepseek_mtp", speculator_config_class="eagle")
    spec = SpeculativeConfig(model=path, num_speculative_tokens=2)
    assert spec.method == "eagle"
    assert ("infer", "checkpoint declares built-in method: 'eagle'") in spec.resolution_trace


def test_keyword_construction_and_from_dict_refuse_none_alike():
    from specpath.errors import SpeculativeConfigError

    for build in (lambda: SpeculativeConfig(method="ngram", num_speculative_tokens=2, disable_padded_drafter_batch=None),
                  lambda: SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 2,
                                                       "disable_padded_drafter_batch": None})):
        with pytest.raises(SpeculativeConfigError, match="disable_padded_drafter_batch: expected bool"):
            build()


@pytest.mark.parametrize(("declares", "given", "expected"), [
    ({"parallel_drafting": True}, None, True),  # trained for it: served so with no field given
    ({"parallel_drafting": True}, False, False),  # the user's field wins
    ({"pard_token": 5}, None, False),  # a mask token alone: able to, not made to
    ({}, True, True),
    ({}, None, False),
])
def test_parallel_drafting_left_unset_is_what_the_checkpoint_declares(make_checkpoint, declares, given, expected):
    path = make_checkpoint("eagle3-head", **declares)  # the fakes recognise the path hint
    spec = SpeculativeConfig(model=path, num_speculative_tokens=3,
                             **({} if given is None else {"parallel_drafting": given}))
    assert spec.method == "eagle3" and spec.parallel_drafting is expected
    assert spec.speculator_config.max_num_new_slots_for_drafting == (2 if expected else 0)
    assert any(step == "variant" for step, _ in spec.resolution_trace) is (expected and given is None)


def test_parallel_drafting_false_asks_nothing_of_a_method_without_it():
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=2, parallel_drafting=False)
    assert spec.parallel_drafting is False
    assert SpeculativeConfig(method="ngram", num_speculative_tokens=2).parallel_drafting is False
