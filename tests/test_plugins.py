"""Entry-point plugins: lazy loading, isolation of broken plugins, env switches, hooks.

Fake distributions are real ``.dist-info`` folders on a temporary ``sys.path`` entry, so these
tests go through ``importlib.metadata`` exactly as installed plugins do.
"""

from __future__ import annotations

import sys

import pytest

import specpath
from specpath import plugins
from specpath.errors import PluginError, SpeculativeConfigError
from specpath.hookspecs import hookimpl
from specpath.lookup import builtin_config_class, get_custom_speculator_config_class

HEALTHY = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_register_methods(register):
    from core_fakes import FakeNgram, FakeNgramGPU
    register("ngram", FakeNgram)
    register("ngram_gpu", FakeNgramGPU)
"""

CUSTOM = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_register_methods(register):
    from core_fakes import MyNgram
    register("my_ngram", MyNgram)
"""

BROKEN_IMPORT = """
import a_module_that_is_not_installed
"""

RAISING_HOOK = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_register_methods(register):
    raise RuntimeError("boom in register")
"""

INVALID_REGISTRATION = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_register_methods(register):
    from core_fakes import FakeEagle3, FakeNgram
    register("eagle3", FakeEagle3)        # valid ...
    register("eagle", FakeNgram)          # ... but this one is not: nothing is bound
"""

RAISING_CONVERTER = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_configure_converter(converter):
    raise TypeError("bad converter hook")

@hookimpl
def specpath_register_methods(register):
    from core_fakes import FakeEagle3
    register("eagle3", FakeEagle3)
"""

MISSPELLED_HOOK = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_register_method(register):
    pass
"""

DETECTING = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_register_methods(register):
    from core_fakes import MyNgram
    register("my_detected", MyNgram)

@hookimpl
def specpath_detect_method(checkpoint):
    return "my_detected" if checkpoint.config.get("model_type") == "my_draft" else None
"""

RAISING_DETECT = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_detect_method(checkpoint):
    raise ValueError("detector exploded")
"""

CONVERTER = """
from specpath.hookspecs import hookimpl
seen = []

@hookimpl
def specpath_configure_converter(converter):
    seen.append(converter)
"""


def test_index_reads_metadata_without_importing(fake_site):
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks", "ngram_gpu": "fake_ngram_hooks"},
                  {"fake_ngram_hooks": HEALTHY}, version="2.5")
    fake_site.rescan()
    records = plugins.plugin_records()
    assert [(r.name, r.distribution, r.version, r.status) for r in records] == [
        ("ngram", "specpath-fake-ngram", "2.5", "indexed"),
        ("ngram_gpu", "specpath-fake-ngram", "2.5", "indexed"),
    ]
    assert "fake_ngram_hooks" not in sys.modules


def test_a_method_loads_only_its_own_plugin(fake_site):
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    fake_site.add("specpath-fake-custom", {"my_ngram": "fake_custom_hooks"}, {"fake_custom_hooks": CUSTOM})
    fake_site.rescan()
    spec = specpath.SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    assert type(spec.speculator_config).__name__ == "FakeNgram"
    assert "fake_ngram_hooks" in sys.modules and "fake_custom_hooks" not in sys.modules
    registration = builtin_config_class("ngram")
    assert registration.distribution == "specpath-fake-ngram"
    assert "specpath-fake-ngram" in registration.origin


def test_a_custom_method_from_an_entry_point(fake_site):
    fake_site.add("specpath-fake-custom", {"my_ngram": "fake_custom_hooks"}, {"fake_custom_hooks": CUSTOM})
    fake_site.rescan()
    spec = specpath.SpeculativeConfig(method="my_ngram", num_speculative_tokens=2)
    assert (spec.method, spec.custom_method) == ("ngram", "my_ngram")
    assert specpath.registered_speculative_methods() == ["my_ngram"]


def test_two_entry_points_may_share_one_module(fake_site):
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks", "ngram_gpu": "fake_ngram_hooks"},
                  {"fake_ngram_hooks": HEALTHY})
    fake_site.rescan()
    plugins.load_all()
    records = plugins.plugin_records()
    assert [r.status for r in records] == ["loaded", "loaded"]
    assert all(r.methods == ["ngram", "ngram_gpu"] for r in records)


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (BROKEN_IMPORT, "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'"),
        (RAISING_HOOK, "RuntimeError: boom in register"),
        (INVALID_REGISTRATION, "base_method must be 'eagle'"),
        (MISSPELLED_HOOK, "unknown hook 'specpath_register_method', did you mean 'specpath_register_methods'?"),
        (RAISING_CONVERTER, "TypeError: bad converter hook"),
    ],
    ids=["import-error", "raising-hook", "invalid-registration", "misspelled-hook", "raising-converter-hook"],
)
def test_a_broken_plugin_is_recorded_and_never_hides_a_healthy_one(fake_site, source, error):
    # "a_broken" sorts first, so it is loaded before the healthy plugin.
    fake_site.add("specpath-broken", {"a_broken": "fake_broken_hooks"}, {"fake_broken_hooks": source}, version="0.3")
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    fake_site.rescan()
    plugins.load_all()
    (broken,) = plugins.broken_plugins()
    assert (broken.name, broken.distribution, broken.version) == ("a_broken", "specpath-broken", "0.3")
    assert error in broken.error and "\n" not in broken.error
    assert builtin_config_class("ngram").config_class.__name__ == "FakeNgram"
    # a broken plugin binds nothing at all, not even its valid part, and leaves pluggy
    with pytest.raises(SpeculativeConfigError):
        builtin_config_class("eagle3")
    assert sys.modules.get("fake_broken_hooks") not in plugins.get_plugin_manager().get_plugins()
    # the unknown-method error names the broken plugin
    with pytest.raises(SpeculativeConfigError, match="broken plugins: a_broken"):
        specpath.SpeculativeConfig(method="a_brokn", num_speculative_tokens=2)


def test_a_missing_built_in_names_its_broken_plugin(fake_site):
    fake_site.add("specpath-eagle3", {"eagle3": "fake_broken_hooks"}, {"fake_broken_hooks": BROKEN_IMPORT})
    fake_site.rescan()
    with pytest.raises(SpeculativeConfigError, match="pip install ./builtin_methods/eagle3.*plugin is broken: ModuleNotFound"):
        specpath.SpeculativeConfig(method="eagle3", model="x", num_speculative_tokens=2)


def test_strict_mode_raises(fake_site, monkeypatch):
    fake_site.add("specpath-broken", {"a_broken": "fake_broken_hooks"}, {"fake_broken_hooks": RAISING_HOOK})
    monkeypatch.setenv("SPECPATH_STRICT_PLUGINS", "1")
    fake_site.rescan()
    with pytest.raises(PluginError, match="plugin 'a_broken' \\(specpath-broken 1.0\\): RuntimeError: boom"):
        plugins.load_all()


def test_allow_list_is_applied_before_import(fake_site, monkeypatch):
    fake_site.add("specpath-broken", {"a_broken": "fake_broken_hooks"}, {"fake_broken_hooks": BROKEN_IMPORT})
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    monkeypatch.setenv("SPECPATH_PLUGINS", "ngram")
    fake_site.rescan()
    plugins.load_all()
    status = {r.name: r.status for r in plugins.plugin_records()}
    assert status == {"a_broken": "blocked", "ngram": "loaded"}
    assert plugins.broken_plugins() == [] and "fake_broken_hooks" not in sys.modules


def test_empty_allow_list_and_disabled_autoload_load_nothing(fake_site, monkeypatch):
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    for var, value, status in (("SPECPATH_PLUGINS", "", "blocked"), ("SPECPATH_DISABLE_PLUGIN_AUTOLOAD", "1", "disabled")):
        monkeypatch.setenv(var, value)
        fake_site.rescan()
        plugins.load_all()
        assert [r.status for r in plugins.plugin_records()] == [status]
        with pytest.raises(SpeculativeConfigError, match="pip install ./builtin_methods/ngram"):
            specpath.SpeculativeConfig(method="ngram", num_speculative_tokens=2)
        monkeypatch.delenv(var)


def test_disabled_autoload_keeps_in_process_plugins(fresh_plugins, monkeypatch):
    import core_fakes

    monkeypatch.setenv("SPECPATH_DISABLE_PLUGIN_AUTOLOAD", "1")
    plugins.rescan()
    plugins.get_plugin_manager().register(core_fakes.BuiltinFakesPlugin())
    spec = specpath.SpeculativeConfig(method="ngram", num_speculative_tokens=2)
    assert type(spec.speculator_config) is core_fakes.FakeNgram
    (record,) = plugins.plugin_records()
    assert (record.name, record.distribution, record.status) == ("BuiltinFakesPlugin", None, "loaded")


def test_a_raising_in_process_register_hook_is_recorded(fresh_plugins):
    class Boom:
        @hookimpl
        def specpath_register_methods(self, register):
            raise KeyError("nope")

    plugins.get_plugin_manager().register(Boom())
    plugins.sync_registrations()
    (broken,) = plugins.broken_plugins()
    assert broken.name == "Boom" and broken.distribution is None and "KeyError" in broken.error


def test_detect_hook_first_result_wins_and_a_raising_detector_is_skipped(fake_site, make_checkpoint):
    fake_site.add("specpath-detect", {"my_detected": "fake_detect_hooks"}, {"fake_detect_hooks": DETECTING})
    # asked first: plugins outside the built-in table are asked by name (DETECTION_ORDER)
    fake_site.add("specpath-aa", {"aa_raising": "fake_raising_detect"}, {"fake_raising_detect": RAISING_DETECT})
    fake_site.rescan()
    path = make_checkpoint("draft", model_type="my_draft")
    spec = specpath.SpeculativeConfig(model=path, num_speculative_tokens=2)
    assert (spec.method, spec.custom_method) == ("ngram", "my_detected")
    (broken,) = plugins.broken_plugins()
    assert broken.name == "aa_raising" and "specpath_detect_method raised ValueError: detector exploded" in broken.error


def test_converter_hook_is_historic(fake_site):
    fake_site.add("specpath-conv", {"conv": "fake_converter_hooks"}, {"fake_converter_hooks": CONVERTER})
    fake_site.rescan()
    plugins.get_plugin_manager()  # the converter exists before the plugin loads
    plugins.load_all()
    from specpath.config.converter import get_converter

    assert sys.modules["fake_converter_hooks"].seen == [get_converter()]


def test_a_built_in_name_bound_by_two_plugins_breaks_the_second(fake_site):
    other = HEALTHY.replace("FakeNgram, FakeNgramGPU", "MyNgram as FakeNgram, FakeNgramGPU")
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    fake_site.add("specpath-other-ngram", {"ngram": "fake_other_hooks"}, {"fake_other_hooks": other})
    fake_site.rescan()
    plugins.load_all()
    (broken,) = plugins.broken_plugins()
    assert broken.distribution == "specpath-other-ngram"
    assert "already registered" in broken.error and "FakeNgram" in broken.error


def test_rescan_sees_a_newly_installed_distribution(fake_site):
    fake_site.rescan()
    assert plugins.plugin_records() == []
    fake_site.add("specpath-fake-custom", {"my_ngram": "fake_custom_hooks"}, {"fake_custom_hooks": CUSTOM})
    plugins.rescan()
    assert get_custom_speculator_config_class("my_ngram").__name__ == "MyNgram"


# -- a built-in name belongs to one distribution -------------------------------------------

IMPOSTOR = HEALTHY.replace("FakeNgram, FakeNgramGPU", "MyNgram as FakeNgram, FakeNgramGPU")

HIJACKING = """
from specpath.hookspecs import hookimpl

@hookimpl
def specpath_register_methods(register):
    from core_fakes import MyNgram
    register("ngram", MyNgram)
"""

EXITING = """
import sys
sys.exit(3)
"""


def _real_and_impostor(fake_site, impostor_dist="aaa-impostor", entry_points=None, source=IMPOSTOR):
    fake_site.add("specpath-ngram", {"ngram": "fake_ngram_hooks", "ngram_gpu": "fake_ngram_hooks"},
                  {"fake_ngram_hooks": HEALTHY})
    fake_site.add(impostor_dist, entry_points or {"ngram": "fake_impostor_hooks"}, {"fake_impostor_hooks": source})
    fake_site.rescan()


@pytest.mark.parametrize("load_everything_first", [False, True])
def test_an_entry_point_named_like_a_built_in_in_another_distribution_cannot_take_it(fake_site, load_everything_first):
    _real_and_impostor(fake_site)  # "aaa-impostor" sorts before "specpath-ngram"
    if load_everything_first:
        plugins.load_all()
    assert type(specpath.SpeculativeConfig(method="ngram", num_speculative_tokens=2).speculator_config).__name__ == "FakeNgram"
    assert type(specpath.SpeculativeConfig(method="ngram_gpu", num_speculative_tokens=2).speculator_config).__name__ == "FakeNgramGPU"
    assert builtin_config_class("ngram").distribution == "specpath-ngram"
    plugins.load_all()
    (broken,) = plugins.broken_plugins()
    assert broken.distribution == "aaa-impostor" and "\n" not in broken.error


def test_a_plugin_registering_a_built_in_it_does_not_own_is_refused(fake_site):
    _real_and_impostor(fake_site, "specpath-hijack", {"hijack": "fake_impostor_hooks"}, HIJACKING)
    plugins.load_all()  # "hijack" sorts before "ngram": the hijacker is loaded first
    (broken,) = plugins.broken_plugins()
    assert broken.distribution == "specpath-hijack"
    assert "may not bind the built-in method 'ngram': it belongs to the distribution 'specpath-ngram'" in broken.error
    assert builtin_config_class("ngram").config_class.__name__ == "FakeNgram"
    assert builtin_config_class("ngram_gpu").distribution == "specpath-ngram"


def test_an_unowned_built_in_name_may_still_come_from_a_plugin(fake_site):
    # no distribution declares an entry point named ngram_gpu: the ngram plugin may bind it
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    fake_site.rescan()
    assert builtin_config_class("ngram_gpu").distribution == "specpath-fake-ngram"


def test_sys_exit_at_import_is_recorded_like_any_failure(fake_site, capsys):
    from specpath import cli

    fake_site.add("specpath-exiting", {"a_exiting": "fake_exiting_hooks"}, {"fake_exiting_hooks": EXITING})
    fake_site.add("specpath-fake-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    fake_site.rescan()
    plugins.load_all()
    (broken,) = plugins.broken_plugins()
    assert (broken.name, broken.error) == ("a_exiting", "SystemExit: 3")
    assert builtin_config_class("ngram").config_class.__name__ == "FakeNgram"
    for command in ("methods", "plugins"):
        assert cli.main([command]) == 0
        out = capsys.readouterr().out
        assert "a_exiting" in out and "SystemExit: 3" in out


def test_specpath_methods_shows_every_broken_plugin(fake_site, capsys):
    import json

    from specpath import cli

    _real_and_impostor(fake_site)
    fake_site.add("specpath-broken", {"a_broken": "fake_broken_hooks"}, {"fake_broken_hooks": BROKEN_IMPORT})
    fake_site.rescan()
    assert cli.main(["methods", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["ngram"]["installed"] and "(aaa-impostor) is broken" in rows["ngram"]["note"]
    assert not rows["a_broken"]["installed"] and rows["a_broken"]["distribution"] == "specpath-broken"
    assert "ModuleNotFoundError" in rows["a_broken"]["note"]


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [("SPECPATH_PLUGINS", "", "blocked: SPECPATH_PLUGINS does not list it"),
     ("SPECPATH_DISABLE_PLUGIN_AUTOLOAD", "1", "disabled: SPECPATH_DISABLE_PLUGIN_AUTOLOAD is set")],
)
def test_a_blocked_or_disabled_plugin_is_named_as_such(fake_site, monkeypatch, variable, value, why):
    fake_site.add("specpath-ngram", {"ngram": "fake_ngram_hooks"}, {"fake_ngram_hooks": HEALTHY})
    fake_site.add("specpath-fake-custom", {"my_ngram": "fake_custom_hooks"}, {"fake_custom_hooks": CUSTOM})
    monkeypatch.setenv(variable, value)
    fake_site.rescan()
    with pytest.raises(SpeculativeConfigError) as info:
        specpath.SpeculativeConfig(method="ngram", num_speculative_tokens=2)
    assert f"'specpath-ngram', which is installed but {why}" in str(info.value)
    assert "not installed" not in str(info.value)
    with pytest.raises(SpeculativeConfigError) as info:
        specpath.SpeculativeConfig(method="my_ngram", num_speculative_tokens=2)
    assert f"provided by plugin 'my_ngram' (specpath-fake-custom), which is {why}" in str(info.value)
    assert "fake_ngram_hooks" not in sys.modules and "fake_custom_hooks" not in sys.modules


WRONG_FLAG_TYPES = """
import attrs
from specpath.hookspecs import hookimpl
from core_fakes import MyNgram

@attrs.frozen(kw_only=True)
class Sloppy(MyNgram):
    prefer_dense_token_history = "yes"   # a string, truthy whatever it says

@hookimpl
def specpath_register_methods(register):
    register("sloppy_ngram", Sloppy)
"""


@pytest.mark.parametrize(
    ("attribute", "value", "expected"),
    [
        ("uses_target_hidden_states", "no", "True or False (a capability flag)"),
        ("model_free", 1, "True or False (a capability flag)"),
        ("supports_parallel_drafting", "maybe", "True, False or None"),
        ("supported_options", ["prompt_lookup_max"], "a frozenset of option names"),
        ("speculator_class", 42, "None or a 'module:Class' string"),
        ("shipped_drafter_k", 0, "None or an integer >= 1"),
        ("shipped_checkpoints", ("/some/dir",), "a tuple of ShippedCheckpoint rows"),
    ],
)
def test_declarations_of_the_wrong_type_are_refused_at_registration(fresh_plugins, attribute, value, expected):
    import attrs
    import core_fakes

    cls = attrs.frozen(kw_only=True)(type("Sloppy", (core_fakes.MyNgram,), {attribute: value}))
    with pytest.raises(SpeculativeConfigError) as err:
        specpath.register_speculative_method("sloppy", cls)
    assert f"Sloppy.{attribute} must be {expected}" in str(err.value) and "\n" not in str(err.value)
    from specpath.registry import get_registry

    assert get_registry().get("sloppy") is None


def test_a_plugin_with_wrong_flag_types_is_broken_and_named_everywhere(fake_site, capsys):
    from specpath import cli

    fake_site.add("specpath-sloppy", {"sloppy_ngram": "fake_sloppy_hooks"}, {"fake_sloppy_hooks": WRONG_FLAG_TYPES})
    fake_site.rescan()
    plugins.load_all()
    (broken,) = plugins.broken_plugins()
    assert broken.distribution == "specpath-sloppy"
    assert "Sloppy.prefer_dense_token_history must be True or False" in broken.error
    code = cli.main(["methods"])
    out = capsys.readouterr().out
    assert code == 0 and "plugin specpath-sloppy is broken: " in out and "prefer_dense_token_history" in out
    assert cli.main(["validate", "--speculative-config", '{"method": "sloppy_ngram", "num_speculative_tokens": 2}']) == 1
    err = capsys.readouterr().err
    assert err.startswith("specpath: error: speculative_config.method: speculative method 'sloppy_ngram' is provided "
                          "by plugin 'sloppy_ngram' (specpath-sloppy), which is broken: ")
    assert "prefer_dense_token_history" in err


PLAIN_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1}


@pytest.mark.parametrize(
    ("directory", "expected"),
    [("x-eagle3-dflash", "eagle3"), ("x-dflash-eagle3", "eagle3"), ("my-eagle-eagle3", "eagle"),
     ("x-dspark-dflash", "dflash"), ("dflash-or-dspark", "dflash")],
)
@pytest.mark.parametrize("first", ["dflash", "dspark", "eagle3", "eagle", None])
def test_path_hints_are_asked_in_one_documented_order_whatever_was_imported_first(directory, expected, first):
    """The real built-in plugins; only the order in which they are imported changes."""
    from specpath.config.checkpoint import DraftCheckpoint

    try:
        plugins.reset()
        if first is not None:
            assert plugins.load(first)
        found = plugins.detect_method(DraftCheckpoint(path=f"/models/{directory}", config=PLAIN_LLAMA))
        assert found is not None and found.method == expected, (directory, first, found)
        host = plugins._get_host()
        order = [host._plugin_name(impl.plugin) for impl in host.detection_order() if impl.trylast]  # the path hints
        assert order.index("eagle") < order.index("eagle3") < order.index("dflash") < order.index("dspark")
    finally:
        plugins.reset()


def test_config_evidence_still_beats_any_path_hint():
    from specpath.config.checkpoint import DraftCheckpoint

    try:
        plugins.reset()
        plugins.load("dflash")
        head = {**PLAIN_LLAMA, "architectures": ["Eagle3LlamaForCausalLM"]}
        assert plugins.detect_method(DraftCheckpoint(path="/models/x-dflash", config=head)).method == "eagle3"
    finally:
        plugins.reset()


class _Demos:
    """An in-process plugin answering ``specpath_demo`` for ``ngram`` only."""

    @hookimpl
    def specpath_demo(self, method, target):
        from specpath import demo

        if method != "ngram":
            return None
        return demo.run(num_speculative_tokens=2) if target is None else demo.leave_out("embedded model only")


def test_the_demo_hook_answers_for_its_own_methods_and_the_core_for_the_rest(fresh_plugins):
    import core_fakes
    from specpath import demo

    plugins.get_plugin_manager().register(_Demos())
    assert demo.demo_for("ngram", core_fakes.FakeNgram) == demo.run(num_speculative_tokens=2)
    assert demo.demo_for("ngram", core_fakes.FakeNgram, target=object()).skip == "embedded model only"
    assert demo.demo_for("ngram_gpu", core_fakes.FakeNgramGPU) == demo.default_demo("ngram_gpu", core_fakes.FakeNgramGPU, None)


def test_a_demo_hook_returning_something_else_is_a_plugin_error(fresh_plugins):
    import core_fakes
    from specpath import demo

    class Wrong:
        @hookimpl
        def specpath_demo(self, method):
            return {"num_speculative_tokens": 2}  # the old demo_config dict, not a Demo

    plugins.get_plugin_manager().register(Wrong())
    with pytest.raises(PluginError, match="returned dict, not a specpath.demo.Demo"):
        demo.demo_for("ngram", core_fakes.FakeNgram)


def test_a_misspelled_demo_hook_is_caught():
    from specpath.testing.hooks import HookCheckError, check_plugin_hooks

    class Typo:
        @hookimpl
        def specpath_demos(self, method):
            return None

    with pytest.raises(HookCheckError, match="specpath_demos"):
        check_plugin_hooks(Typo(), name="typo")


def test_every_builtin_plugin_declares_its_demo():
    """Each built-in entry-point module implements the declared hook (no classmethods to probe)."""
    from importlib import metadata

    from specpath.testing.hooks import check_plugin_hooks

    modules = {ep.value for ep in metadata.entry_points(group="specpath.methods")
               if ep.dist is not None and ep.dist.metadata["Name"].startswith("specpath-")}
    assert len(modules) >= 9
    for value in modules:
        module = __import__(value, fromlist=["_"])
        assert "specpath_demo" in check_plugin_hooks(module, name=value), value
