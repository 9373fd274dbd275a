"""create_speculator: the speculator class is resolved lazily from its qualified name."""

from __future__ import annotations

import attrs
import pytest

import core_fakes
from specpath import SpeculativeConfig, create_speculator, register_speculative_method
from specpath.errors import SpeculativeConfigError
from specpath.factory import resolve_qualname
from specpath.speculator import SpeculatorContext

pytestmark = pytest.mark.usefixtures("fake_builtins")

CONTEXT = SpeculatorContext(vocab_size=256, max_model_len=512, max_num_seqs=4)


def test_create_speculator_instantiates_the_named_class():
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    speculator = create_speculator(spec, CONTEXT)
    assert isinstance(speculator, core_fakes.FakeSpeculator)
    assert speculator.spec is spec and speculator.context is CONTEXT


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (None, "declares no speculator"),
        ("core_fakes:NoSuchClass", "cannot import it: AttributeError"),
        ("no_such_module_abc:X", "cannot import it: ModuleNotFoundError"),
        ("core_fakes:FakeNgram", "is not a specpath.speculator.BaseSpeculator subclass"),
    ],
)
def test_errors_name_the_class_and_path(path, message):
    @attrs.frozen(kw_only=True)
    class Odd(core_fakes.MyNgram):
        speculator_class = path

    register_speculative_method("odd", Odd)
    spec = SpeculativeConfig(method="odd", num_speculative_tokens=2)
    with pytest.raises(SpeculativeConfigError, match=message) as info:
        create_speculator(spec, CONTEXT)
    assert "Odd.speculator_class" in str(info.value)


def test_resolve_qualname_accepts_dots_and_colons():
    assert resolve_qualname("core_fakes:FakeNgram") is core_fakes.FakeNgram
    assert resolve_qualname("core_fakes.FakeNgram") is core_fakes.FakeNgram
    with pytest.raises(SpeculativeConfigError, match="must be 'module:Class'"):
        resolve_qualname("")
