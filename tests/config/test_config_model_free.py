"""``model_free_drafter``: a model-free method resolved beside the drafter, checked at start-up."""

from __future__ import annotations

import attrs
import pytest

import core_fakes
from specpath.config.speculative import SpeculativeConfig
from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError
from specpath.registry import register_speculative_method

pytestmark = pytest.mark.usefixtures("fake_builtins")


@pytest.fixture
def head(make_checkpoint):
    return make_checkpoint("eagle3-head")


@pytest.fixture
def resolve(head):
    """``resolve(**fields)``: an EAGLE-3 config (toy head, K=4) with ``fields``."""
    return lambda **kw: SpeculativeConfig.from_dict({"method": "eagle3", "model": head, "num_speculative_tokens": 4,
                                                     **kw})


@pytest.fixture
def error(resolve):
    """``error(**fields)``: the one-line error that config raises."""

    def raised(**kw) -> str:
        with pytest.raises(SpeculativeConfigError) as info:
            resolve(**kw)
        text = str(info.value)
        assert "\n" not in text and "Traceback" not in text
        return text

    return raised


def test_the_nested_method_is_resolved_with_this_configs_k_and_a_default_minimum(resolve):
    spec = resolve(model_free_drafter={"method": "ngram", "prompt_lookup_min": 2})
    inner = spec.model_free_config
    assert isinstance(inner, SpeculativeConfig)
    assert (inner.method, inner.num_speculative_tokens, inner.prompt_lookup_min, inner.prompt_lookup_max) == (
        "ngram", 4, 2, 5)
    assert spec.model_free_min_tokens == 2
    assert type(inner.speculator_config).model_free
    traced = [detail for step, detail in spec.resolution_trace if step == "model_free"]
    assert traced[-1] == ("both draft each step; 'ngram''s (K=4, at least 2 long) is verified instead of 'eagle3''s "
                          "where it extends it or where the two part and the request's record favours it "
                          "(specpath.hybrid)")
    assert any(detail.startswith("result: method='ngram'") for detail in traced)


def test_a_smaller_k_and_minimum_are_kept(resolve):
    spec = resolve(model_free_drafter={"method": "ngram", "num_speculative_tokens": 2}, model_free_min_tokens=1)
    assert (spec.model_free_config.num_speculative_tokens, spec.model_free_min_tokens) == (2, 1)


def test_without_it_nothing_is_resolved(resolve):
    spec = resolve()
    assert spec.model_free_config is None and spec.model_free_min_tokens is None


@pytest.fixture
def shipped_with_companion(head, monkeypatch):
    """The toy head as a shipped EAGLE-3 checkpoint whose row names n-gram as its companion."""
    from specpath.config.shipped import ShippedCheckpoint
    from specpath.lookup import builtin_config_class

    cls = builtin_config_class("eagle3").config_class
    monkeypatch.setattr(cls, "shipped_checkpoints", (ShippedCheckpoint("toy", head, model_free="ngram"),))
    return cls


def test_a_shipped_drafter_gets_its_rows_companion_unless_the_config_names_one(resolve, shipped_with_companion):
    spec = resolve()
    assert spec.model_free_config.method == "ngram" and spec.model_free_min_tokens == 2
    assert spec.model_free_drafter is None  # the input is unchanged: a default, re-derived on every resolution
    assert spec.speculator_config.describe()["shipped_drafter_model_free"] == "ngram"
    traced = [detail for step, detail in spec.resolution_trace if step == "model_free"]
    assert traced[0] == "'ngram' beside the shipped drafter (its default; model_free_drafter: {} turns it off)"
    named = resolve(model_free_drafter={"method": "ngram", "prompt_lookup_min": 3})
    assert named.model_free_config.prompt_lookup_min == 3
    assert named.speculator_config.describe()["shipped_drafter_model_free"] is None
    alone = resolve(model_free_drafter={})
    assert alone.model_free_config is None and alone.speculator_config.describe()["shipped_drafter_model_free"] is None
    assert ("model_free", "model_free_drafter: {}: the drafter drafts alone") in alone.resolution_trace


def test_a_default_companion_that_does_not_fit_the_config_leaves_the_drafter_alone(head, monkeypatch):
    from specpath.config.shipped import ShippedCheckpoint
    from specpath.lookup import builtin_config_class

    cls = builtin_config_class("dflash").config_class
    monkeypatch.setattr(cls, "shipped_checkpoints", (ShippedCheckpoint("toy", head, model_free="ngram"),))
    config = {"method": "dflash", "model": head, "num_speculative_tokens": 4, "enable_adaptive_verification": True}
    spec = SpeculativeConfig.from_dict(config)  # a drafter that estimates acceptance: no model-free side
    assert spec.model_free_config is None and spec.enable_adaptive_verification
    traced = [detail for step, detail in spec.resolution_trace if step == "model_free"]
    assert traced[-1].startswith("the shipped drafter's companion 'ngram' does not apply: ")
    assert traced[-1].endswith("; the drafter drafts alone") and "enable_adaptive_verification" in traced[-1]
    with pytest.raises(SpeculativeConfigError, match="enable_adaptive_verification"):  # asked for: an error
        SpeculativeConfig.from_dict({**config, "model_free_drafter": {"method": "ngram"}})


def test_a_companion_that_is_not_installed_leaves_the_drafter_alone(resolve, head, monkeypatch):
    from specpath.config.shipped import ShippedCheckpoint
    from specpath.lookup import builtin_config_class

    cls = builtin_config_class("eagle3").config_class
    monkeypatch.setattr(cls, "shipped_checkpoints", (ShippedCheckpoint("toy", head, model_free="no_such_method"),))
    spec = resolve()
    assert spec.model_free_config is None
    assert ("model_free", "the shipped drafter's model-free companion 'no_such_method' is not installed: the drafter "
                          "drafts alone") in spec.resolution_trace


def test_a_checkpoint_that_names_its_companion_gets_it_unless_the_config_names_one(make_checkpoint):
    """``specpath_model_free`` in the draft checkpoint's config.json (what ``specpath train`` writes
    where the companion raised the held-out τ): the default companion, as a shipped row's."""
    head = make_checkpoint("eagle3-trained", specpath_model_free="ngram")
    config = {"method": "eagle3", "model": head, "num_speculative_tokens": 4}
    spec = SpeculativeConfig.from_dict(config)
    assert spec.model_free_config.method == "ngram" and spec.model_free_drafter is None
    traced = [detail for step, detail in spec.resolution_trace if step == "model_free"]
    assert traced[0] == ("'ngram' beside the drafter (its checkpoint's specpath_model_free, measured when it was "
                         "trained; model_free_drafter: {} turns it off)")
    assert SpeculativeConfig.from_dict({**config, "model_free_drafter": {}}).model_free_config is None
    named = SpeculativeConfig.from_dict({**config, "model_free_drafter": {"method": "ngram", "prompt_lookup_min": 3}})
    assert named.model_free_config.prompt_lookup_min == 3


@pytest.mark.parametrize("value, note", [
    ("no_such_method", "the checkpoint's model-free companion 'no_such_method' is not installed: the drafter drafts alone"),
    (7, "the checkpoint's specpath_model_free 7 is not a method name: ignored"),
    ("", "the checkpoint's specpath_model_free '' is not a method name: ignored"),
])
def test_a_checkpoints_companion_that_cannot_run_leaves_the_drafter_alone(make_checkpoint, value, note):
    head = make_checkpoint("eagle3-trained", specpath_model_free=value)
    spec = SpeculativeConfig.from_dict({"method": "eagle3", "model": head, "num_speculative_tokens": 4})
    assert spec.model_free_config is None and ("model_free", note) in spec.resolution_trace


def test_a_checkpoints_companion_that_is_no_model_free_method_leaves_the_drafter_alone(make_checkpoint):
    head = make_checkpoint("eagle3-trained", specpath_model_free="eagle3")
    spec = SpeculativeConfig.from_dict({"method": "eagle3", "model": head, "num_speculative_tokens": 4})
    assert spec.model_free_config is None
    traced = [detail for step, detail in spec.resolution_trace if step == "model_free"]
    assert traced[-1].startswith("the checkpoint's companion 'eagle3' does not apply: ")


def test_replace_and_to_dict_keep_it(resolve):
    spec = resolve(model_free_drafter={"method": "ngram"}, model_free_min_tokens=3)
    assert spec.to_dict()["model_free_drafter"] == {"method": "ngram"}
    again = spec.replace(num_speculative_tokens=5)
    assert (again.model_free_config.num_speculative_tokens, again.model_free_min_tokens) == (5, 3)
    assert SpeculativeConfig.from_dict({k: v for k, v in spec.to_dict().items() if k != "custom_method"}) == spec


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"model_free_drafter": {"method": "draft_model"}},
         "speculative_config.model_free_drafter.model: required for method 'draft_model'"),
        ({"model_free_drafter": {"method": "ngram", "num_speculative_tokens": 5}},
         "speculative_config.model_free_drafter.num_speculative_tokens: must be <= the speculative config's "
         "num_speculative_tokens (4) (got 5)"),
        ({"model_free_drafter": {"method": "ngram", "prompt_lookup_min": 0}},
         "speculative_config.model_free_drafter.prompt_lookup_min: must be >= 1 (got 0)"),
        ({"model_free_drafter": {"method": "ngram", "model": "x"}},
         "speculative_config.model_free_drafter: takes only 'method', 'num_speculative_tokens' and the method's "
         "own options; set 'model' on the speculative config itself (got 'model')"),
        ({"model_free_drafter": {"method": "ngram", "model_free_drafter": {"method": "ngram"}}},
         "set 'model_free_drafter' on the speculative config itself"),
        ({"model_free_drafter": {"method": "ngarm"}},
         "speculative_config.model_free_drafter.method: unknown speculative method"),
        ({"model_free_drafter": "ngram"}, "speculative_config.model_free_drafter: expected a mapping"),
        ({"model_free_min_tokens": 2}, "speculative_config.model_free_min_tokens: is only valid with model_free_drafter"),
        ({"model_free_drafter": {"method": "ngram"}, "model_free_min_tokens": 0},
         "speculative_config.model_free_min_tokens: must be >= 1 (got 0)"),
    ],
)
def test_bad_input_is_one_line_naming_the_nested_field(error, given, expected):
    assert expected in error(**given)


def test_a_drafter_that_drafts_nothing_or_estimates_acceptance_is_refused(head):
    with pytest.raises(SpeculativeConfigError, match="proposes no drafts"):
        SpeculativeConfig(method="extract_hidden_states", num_speculative_tokens=1,
                          model_free_drafter={"method": "ngram", "num_speculative_tokens": 1})
    with pytest.raises(SpeculativeConfigError, match="enable_adaptive_verification"):
        SpeculativeConfig(method="dflash", model=head, num_speculative_tokens=4, enable_adaptive_verification=True,
                          model_free_drafter={"method": "ngram"})


def test_a_class_that_declares_model_free_but_needs_more_is_refused(error):
    @attrs.frozen(kw_only=True)
    class Greedy(SpeculatorConfig):
        base_method = "ngram"
        speculator_class = "core_fakes:FakeSpeculator"
        model_free = True
        uses_target_hidden_states = True

    register_speculative_method("greedy_free", Greedy)
    assert "declares model_free but needs more than token ids" in error(model_free_drafter={"method": "greedy_free"})


def test_a_method_that_does_not_declare_model_free_is_refused(error):
    @attrs.frozen(kw_only=True)
    class Lookahead(core_fakes.MyNgram):
        model_free = False

    register_speculative_method("my_lookahead", Lookahead)
    assert ("speculative_config.model_free_drafter: method 'my_lookahead' is not model-free (Lookahead does not "
            "declare model_free)") in error(model_free_drafter={"method": "my_lookahead"})


def test_a_registered_model_free_method_may_be_the_nested_one(resolve):
    @attrs.frozen(kw_only=True)
    class Lookup(core_fakes.MyNgram):
        model_free = True

    register_speculative_method("my_lookup", Lookup)
    spec = resolve(model_free_drafter={"method": "my_lookup"})
    assert spec.model_free_config.custom_method == "my_lookup"
