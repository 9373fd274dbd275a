"""check_plugin_hooks: a misspelled hook is an error, a correct one passes."""

import types

import pytest

from specpath.hookspecs import hookimpl
from specpath.testing.hooks import HookCheckError, check_plugin_hooks


def plugin_module(**functions):
    module = types.ModuleType("fake_plugin")
    for name, fn in functions.items():
        setattr(module, name, hookimpl(fn))
    return module


def test_correct_hooks_are_listed():
    module = plugin_module(
        specpath_register_methods=lambda register: None,
        specpath_detect_method=lambda checkpoint: None,
    )
    assert check_plugin_hooks(module) == ["specpath_detect_method", "specpath_register_methods"]


def test_misspelled_hook_is_caught():
    module = plugin_module(specpath_register_method=lambda register: None)
    with pytest.raises(HookCheckError, match="specpath_register_method"):
        check_plugin_hooks(module)


def test_argument_not_in_the_spec_is_caught():
    module = plugin_module(specpath_register_methods=lambda register, registry: None)
    with pytest.raises(HookCheckError, match="registry"):
        check_plugin_hooks(module)


def test_module_without_hooks_is_caught():
    with pytest.raises(HookCheckError, match="implements no specpath hook"):
        check_plugin_hooks(types.ModuleType("empty_plugin"))
