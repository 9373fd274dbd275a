"""register_speculative_method, lookups and the errors of the method validator."""

from __future__ import annotations

import attrs
import pytest

import specpath
from core_fakes import FakeEagle3, FakeNgram, MyEagle3, MyNgram
from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError, UnknownMethodError
from specpath.lookup import (
    builtin_config_class,
    get_custom_speculator_config_class,
    registered_speculative_methods,
    unknown_method_error,
)
from specpath.registry import get_registry, register_speculative_method

pytestmark = pytest.mark.usefixtures("fresh_plugins")


def test_register_and_look_up_a_custom_method():
    register_speculative_method("my_eagle3", MyEagle3)
    assert get_custom_speculator_config_class("my_eagle3") is MyEagle3
    assert registered_speculative_methods() == ["my_eagle3"]
    assert specpath.registered_speculative_methods() == ["my_eagle3"]


def test_the_same_class_twice_is_a_no_op():
    register_speculative_method("my_ngram", MyNgram)
    register_speculative_method("my_ngram", MyNgram)
    assert registered_speculative_methods() == ["my_ngram"]


def test_a_different_class_for_a_registered_name_names_both():
    register_speculative_method("mine", MyNgram)
    with pytest.raises(SpeculativeConfigError) as info:
        register_speculative_method("mine", MyEagle3)
    assert "core_fakes:MyNgram" in str(info.value) and "core_fakes:MyEagle3" in str(info.value)
    assert get_custom_speculator_config_class("mine") is MyNgram


@pytest.mark.parametrize("name", ["eagle3", "ngram", "deepseek_mtp", "suffix", "custom_class"])
def test_built_in_names_are_refused(name):
    with pytest.raises(SpeculativeConfigError, match="built-in speculative method"):
        register_speculative_method(name, FakeEagle3)


def test_the_class_must_be_a_speculator_config_with_a_built_in_base():
    with pytest.raises(SpeculativeConfigError, match="subclass of specpath.SpeculatorConfig"):
        register_speculative_method("x", dict)

    @attrs.frozen(kw_only=True)
    class NoBase(SpeculatorConfig):
        pass

    @attrs.frozen(kw_only=True)
    class BadBase(SpeculatorConfig):
        base_method = "eagel3"

    with pytest.raises(SpeculativeConfigError, match="base_method must name the built-in"):
        register_speculative_method("x", NoBase)
    with pytest.raises(SpeculativeConfigError, match="got 'eagel3'"):
        register_speculative_method("x", BadBase)


@pytest.mark.parametrize("name", ["", "Upper", "with-dash", "1abc", 3])
def test_method_names_are_checked(name):
    with pytest.raises(SpeculativeConfigError, match="method name"):
        register_speculative_method(name, MyNgram)


def test_lookups_of_built_in_or_unknown_names_return_none():
    assert get_custom_speculator_config_class("eagle3") is None
    assert get_custom_speculator_config_class("nothing_here") is None
    assert get_custom_speculator_config_class(None) is None


def test_a_plugin_may_bind_a_built_in_name_but_must_match_base_method():
    registry = get_registry()
    registry.bind("ngram", FakeNgram, origin="test", allow_builtin=True)
    assert builtin_config_class("ngram").config_class is FakeNgram
    with pytest.raises(SpeculativeConfigError, match="base_method must be 'eagle'"):
        registry.check("eagle", FakeNgram, allow_builtin=True)
    with pytest.raises(SpeculativeConfigError, match="alias"):
        registry.check("deepseek_mtp", FakeNgram, allow_builtin=True)


@pytest.mark.parametrize(
    ("method", "dist"),
    [("eagle3", "specpath-eagle3"), ("mtp", "specpath-mtp"), ("extract_hidden_states", "specpath-eagle"),
     ("draft_model", "specpath-draft-model"), ("dspark", "specpath-dspark"), ("suffix", "specpath-suffix"),
     ("custom_class", "specpath-custom-class")],
)
def test_a_missing_built_in_plugin_names_its_distribution(method, dist):
    with pytest.raises(SpeculativeConfigError, match=f"pip install ./builtin_methods/.* {dist} with the wheels"):
        builtin_config_class(method)


def test_unknown_method_error_lists_names_and_suggests():
    register_speculative_method("my_ngram", MyNgram)
    err = unknown_method_error("my_ngarm")
    assert isinstance(err, UnknownMethodError)
    assert err.suggestion == "my_ngram"
    text = str(err)
    assert text.index("did you mean 'my_ngram'?") < text.index("methods:")  # the suggestion first
    assert "eagle3," in text and "registered custom methods: my_ngram" in text
    assert "deepseek_mtp" not in text  # the methods, not the 26 MTP aliases
    assert unknown_method_error("eagel3").suggestion == "eagle3"


def test_restore_forgets_user_registrations_but_keeps_what_plugins_bound_since(fake_builtins):
    """A test's snapshot/restore must not make a plugin loaded meanwhile look uninstalled."""
    from specpath.registry import get_registry, register_speculative_method

    registry = get_registry()
    saved = registry.snapshot()
    register_speculative_method("restore_user_method", fake_builtins.FakeNgram)
    registry.bind("restore_plugin_method", fake_builtins.FakeNgram, origin="plugin 'x' (x 1.0)")
    registry.restore(saved)
    after = registry.snapshot()
    assert "restore_user_method" not in after and "restore_plugin_method" in after
    assert {n: r for n, r in after.items() if n != "restore_plugin_method"} == saved


def test_model_free_names_are_the_methods_whose_class_says_so(fake_builtins):
    """What may draft beside a drafter is read from the capability flag, never from a list."""
    from specpath.registry import get_registry, register_speculative_method

    registry = get_registry()
    register_speculative_method("free_user_method", fake_builtins.FakeNgram)
    register_speculative_method("drafting_user_method", fake_builtins.FakeEagle3)
    names = registry.model_free_names()
    assert "free_user_method" in names and "drafting_user_method" not in names
    assert names == sorted(n for n in registry.names() if registry.get(n).config_class.model_free)
