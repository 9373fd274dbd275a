"""The conformance suite, run against a fake plugin installed through real entry-point metadata.

Each test builds a tiny plugin module plus a ``.dist-info`` on a temporary ``sys.path`` entry,
then calls the suite's tests directly: a correct plugin passes them all, and each kind of
mistake (wrong declared property, misspelled hook, lax option check) fails the right one.
"""

import textwrap

import pytest

from specpath import plugins
from specpath_engine.testing import SpeculatorConformance

PLUGIN = '''
import attrs
HEAVY_IMPORT
from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError
from specpath.hookspecs import hookimpl
from specpath.speculator import BaseSpeculator, DraftProposal


@attrs.frozen(kw_only=True)
class KitprobeConfig(SpeculatorConfig):
    base_method = "ngram"
    speculator_class = "kitprobe_plugin:KitprobeSpeculator"
    supported_options = frozenset({"speculator_options"})

    @classmethod
    def verify(cls, spec):
        if CHECK_OPTIONS and set(spec.speculator_options or {}) - {"depth"}:
            raise SpeculativeConfigError("unknown option", field="speculative_config.speculator_options")


class KitprobeSpeculator(BaseSpeculator):
    def propose(self, batch):
        import torch

        counts = [r.max_draft_tokens for r in batch.requests]
        ids = [r.token_ids[-1] for r, n in zip(batch.requests, counts) for _ in range(n)]
        return DraftProposal(token_ids=torch.tensor(ids, dtype=torch.int32), num_draft_tokens=counts)


@hookimpl
def HOOK_NAME(register):
    register("kitprobe", KitprobeConfig)
'''


def install_plugin(path, monkeypatch, hook_name="specpath_register_methods", check_options=True, heavy=False):
    source = (PLUGIN.replace("HOOK_NAME", hook_name).replace("CHECK_OPTIONS", str(check_options))
              .replace("HEAVY_IMPORT", "import torch" if heavy else ""))
    (path / "kitprobe_plugin.py").write_text(textwrap.dedent(source))
    info = path / "kitprobe-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kitprobe\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[specpath.methods]\nkitprobe = kitprobe_plugin\n")
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.delitem(__import__("sys").modules, "kitprobe_plugin", raising=False)
    plugins.reset()
    import kitprobe_plugin

    return kitprobe_plugin


@pytest.fixture(autouse=True)
def fresh_plugin_state():
    plugins.reset()
    yield
    plugins.reset()


def suite(module, **attributes):
    """A conformance class for the fake plugin (not collected: its name does not start with Test)."""
    namespace = {
        "method": "kitprobe",
        "config_class": module.KitprobeConfig,
        "distribution": "kitprobe",
        "k_values": (1, 3),
        "expected": {"num_lookahead_tokens": lambda k: 0, "max_num_new_slots_for_drafting": lambda k: 0},
        "valid_options": [{"speculator_options": {"depth": 2}}],
        "invalid_options": [({"speculator_options": {"width": 2}}, "speculator_options")],
        "hash_sensitive_options": [({"speculator_options": {"depth": 2}}, {"speculator_options": {"depth": 3}})],
        "reference_engine": "the kit's self-test checks the engine test separately",
        **attributes,
    }
    return type("KitprobeSuite", (SpeculatorConformance,), namespace)


def run(cls, name):
    getattr(cls(), name)()


def suite_test_names():
    return [n for n in dir(SpeculatorConformance) if n.startswith("test_")]


def test_a_correct_plugin_passes_every_test(tmp_path, monkeypatch):
    cls = suite(install_plugin(tmp_path, monkeypatch))
    outcomes = {}
    for name in suite_test_names():
        try:
            run(cls, name)
            outcomes[name] = "passed"
        except pytest.skip.Exception as exc:
            outcomes[name] = f"skipped: {exc}"
    skipped = {n: o for n, o in outcomes.items() if o != "passed"}
    assert list(skipped) == ["test_greedy_output_is_identical_in_the_reference_engine"], skipped
    assert "cannot run in specpath_engine" in skipped["test_greedy_output_is_identical_in_the_reference_engine"]


def test_a_wrong_declared_property_fails(tmp_path, monkeypatch):
    cls = suite(install_plugin(tmp_path, monkeypatch), expected={"num_lookahead_tokens": lambda k: k})
    with pytest.raises(AssertionError, match="num_lookahead_tokens is 0, declared 1"):
        run(cls, "test_declared_properties_for_several_k")


def test_a_misspelled_hook_fails(tmp_path, monkeypatch):
    cls = suite(install_plugin(tmp_path, monkeypatch, hook_name="specpath_register_method"))
    with pytest.raises(AssertionError, match="unknown hook 'specpath_register_method'"):
        run(cls, "test_entry_point_module_hooks_are_spelled_right")
    with pytest.raises(AssertionError, match="broken"):
        run(cls, "test_method_resolves_to_config_class_through_the_plugin_index")


@pytest.mark.slow  # the check's fresh process really imports torch (~5 s here)
def test_a_plugin_module_that_imports_torch_fails(tmp_path, monkeypatch):
    cls = suite(install_plugin(tmp_path, monkeypatch, heavy=True))
    with pytest.raises(AssertionError, match=r"imported \['torch'\]; import them lazily"):
        run(cls, "test_resolution_imports_nothing_heavy")


def test_options_that_are_not_checked_fail(tmp_path, monkeypatch):
    cls = suite(install_plugin(tmp_path, monkeypatch, check_options=False))
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        run(cls, "test_invalid_options_fail_with_one_line")


def test_a_method_without_speculator_skips_proposal_tests(tmp_path, monkeypatch):
    module = install_plugin(tmp_path, monkeypatch)
    monkeypatch.setattr(module.KitprobeConfig, "speculator_class", None)
    cls = suite(module)
    with pytest.raises(pytest.skip.Exception, match="declares no speculator_class"):
        run(cls, "test_proposals_follow_the_contract")


def test_known_failures_become_strict_xfails_on_the_subclass_only(tmp_path, monkeypatch):
    cls = suite(install_plugin(tmp_path, monkeypatch), known_failures={"test_declared_flags": "bug #12"})
    (mark,) = [m for m in cls.test_declared_flags.pytestmark if m.name == "xfail"]
    assert mark.kwargs == {"reason": "declared known failure: bug #12", "strict": True}
    assert not any(m.name == "xfail" for m in getattr(SpeculatorConformance.test_declared_flags, "pytestmark", []))


@pytest.mark.parametrize(("failures", "problem"), [({"test_nope": "x"}, "not a test"), ({"test_declared_flags": " "}, "needs a reason")])
def test_bad_known_failures_are_refused_when_the_class_is_made(failures, problem):
    with pytest.raises(TypeError, match=problem):
        type("Bad", (SpeculatorConformance,), {"known_failures": failures})


def test_every_method_specific_option_of_the_core_gets_an_example(monkeypatch):
    from specpath.config.speculative import METHOD_SPECIFIC_OPTIONS
    from specpath_engine.testing import conformance

    assert set(conformance.method_specific_option_examples()) == set(METHOD_SPECIFIC_OPTIONS)
    monkeypatch.setattr(conformance, "METHOD_SPECIFIC_OPTION_EXAMPLES", {})  # options the kit does not know yet
    guessed = conformance.method_specific_option_examples()
    assert guessed["draft_lm_head_quantization"] == "fp8"  # first value of its Literal
    assert guessed["dspark_anchor_sampling"] is True and guessed["dspark_draft_topk"] == 4
    assert isinstance(guessed["speculator_options"], dict) and guessed["speculator_options"]


def test_known_failures_in_a_real_pytest_run(tmp_path, monkeypatch):
    """A declared failure that fails is reported xfailed; one that passes fails the run."""
    import os
    import subprocess
    import sys

    install_plugin(tmp_path, monkeypatch, check_options=False)  # so the invalid-options test fails
    (tmp_path / "test_probe_suite.py").write_text(textwrap.dedent('''
        from kitprobe_plugin import KitprobeConfig
        from specpath_engine.testing import SpeculatorConformance

        class TestProbe(SpeculatorConformance):
            method = "kitprobe"
            config_class = KitprobeConfig
            invalid_options = [({"speculator_options": {"width": 2}}, "speculator_options")]
            reference_engine = "not part of this check"
            known_failures = {
                "test_invalid_options_fail_with_one_line": "options are not checked yet",
                "test_declared_flags": "declared by mistake: this one passes",
            }
    '''))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rxXs", "-k", "options or flags",
         str(tmp_path / "test_probe_suite.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert "XFAIL" in out and "options are not checked yet" in out
    assert "[XPASS(strict)] declared known failure: declared by mistake: this one passes" in out, out[-3000:]


def test_only_subclasses_that_name_a_method_are_collected():
    family = type("FamilyConformance", (SpeculatorConformance,), {"k_values": (1, 2)})
    concrete = type("TestMember", (family,), {"method": "m", "config_class": object})
    again = type("TestMemberVariant", (concrete,), {"k_values": (3,)})
    opted_out = type("TestOptedOut", (concrete,), {"__test__": False})
    assert (family.__test__, concrete.__test__, again.__test__, opted_out.__test__) == (False, True, True, False)
