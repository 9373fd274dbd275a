"""The shipped-checkpoint contract: target fingerprints, one lookup with one existence check, the
default ``default_model`` and the default demo, and the declared-flag input checks."""

import json
from types import SimpleNamespace

import attrs
import pytest

from specpath.config.shipped import (
    EMBEDDED_TARGET,
    SMOLLM2_135M,
    ShippedCheckpoint,
    find_shipped,
    target_fingerprint,
)
from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError


def checkpoint(path, *, weights=True):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    if weights:
        (path / "model.safetensors").write_bytes(b"")
    return path


def target(**hf):
    config = {"model_type": "llama", "num_hidden_layers": 30, "hidden_size": 576, "vocab_size": 49152, **hf}
    return SimpleNamespace(model="/models/smollm2", hf_config=config, model_type=config["model_type"],
                           num_hidden_layers=config["num_hidden_layers"], hidden_size=config["hidden_size"],
                           vocab_size=config["vocab_size"])


def test_fingerprints():
    assert target_fingerprint(None) == EMBEDDED_TARGET
    assert target_fingerprint(SimpleNamespace(model_type="llama", num_hidden_layers=6, hidden_size=192, vocab_size=256)) == EMBEDDED_TARGET
    assert target_fingerprint(target()) == SMOLLM2_135M
    assert target_fingerprint(target(num_hidden_layers=12)) == "llama:12x576:49152"


def test_find_shipped_needs_both_files_and_matches_target_and_variant(tmp_path):
    a = checkpoint(tmp_path / "a")
    b = checkpoint(tmp_path / "b")
    half = checkpoint(tmp_path / "half", weights=False)
    rows = (ShippedCheckpoint(EMBEDDED_TARGET, a), ShippedCheckpoint(EMBEDDED_TARGET, b, variant="parallel"),
            ShippedCheckpoint(SMOLLM2_135M, half))
    assert find_shipped(rows, EMBEDDED_TARGET) == a
    assert find_shipped(rows, EMBEDDED_TARGET, "parallel") == b
    assert find_shipped(rows, SMOLLM2_135M) is None  # not installed: no weights
    assert find_shipped(rows, "llama:2x8:16") is None


def make_class(tmp_path, **flags):
    a = checkpoint(tmp_path / "embedded-head")
    s = checkpoint(tmp_path / "smollm2-head")

    @attrs.frozen(kw_only=True)
    class Shipping(SpeculatorConfig):
        base_method = "shipping"
        shipped_checkpoints = (ShippedCheckpoint(EMBEDDED_TARGET, a), ShippedCheckpoint(SMOLLM2_135M, s))

    for name, value in flags.items():
        setattr(Shipping, name, value)
    return Shipping, a, s


def spec(target_config=None, **fields):
    base = dict(parallel_drafting=False, eagle_aux_hidden_state_layer_ids=None, custom_method=None, method="m")
    return SimpleNamespace(target_model_config=target_config, **{**base, **fields})


def test_default_model_is_the_row_for_the_target(tmp_path):
    cls, embedded, smollm2 = make_class(tmp_path)
    assert cls.default_model(spec()) == str(embedded)
    assert cls.default_model(spec(SimpleNamespace(model_type="llama", num_hidden_layers=6, hidden_size=192, vocab_size=256))) == str(embedded)
    assert cls.default_model(spec(target())) == str(smollm2)
    assert cls.default_model(spec(target(hidden_size=64))) is None


def test_default_demo_without_a_hook(tmp_path):
    """A method no plugin answers for: its shipped drafter on the embedded model, else its defaults."""
    from specpath import demo

    cls, embedded, _ = make_class(tmp_path)
    assert demo.default_demo("shipping", cls, None) == demo.run(model=str(embedded))
    assert demo.default_demo("shipping", cls, target()).config == {}  # another target: the method's defaults

    @attrs.frozen(kw_only=True)
    class NoWeights(SpeculatorConfig):
        base_method = "noweights"

    assert demo.default_demo("noweights", NoWeights, None).config == {}

    @attrs.frozen(kw_only=True)
    class Missing(SpeculatorConfig):
        shipped_checkpoints = (ShippedCheckpoint(EMBEDDED_TARGET, tmp_path / "absent"),)

    assert "not installed" in demo.default_demo("missing", Missing, None).skip
    with pytest.raises(ValueError, match="either a config or a reason"):
        demo.Demo()


def test_declared_flags_are_checked_in_one_place():
    @attrs.frozen(kw_only=True)
    class Chain(SpeculatorConfig):
        supports_parallel_drafting = False

    with pytest.raises(SpeculativeConfigError, match="parallel_drafting"):
        Chain.check_declared_inputs(spec(parallel_drafting=True))
    with pytest.raises(SpeculativeConfigError, match="eagle_aux_hidden_state_layer_ids"):
        Chain.check_declared_inputs(spec(eagle_aux_hidden_state_layer_ids=(0, 1, 2)))
    SpeculatorConfig.check_declared_inputs(spec(parallel_drafting=True))  # undeclared: the class's own rules


def test_builtin_plugins_declare_their_shipped_checkpoints():
    """Every built-in that ships a drafter declares it in the table (no hand-written lookup)."""
    from specpath.registry import get_registry
    from specpath import plugins

    plugins.load_all()
    registry = get_registry()
    shipping = {name for name in registry.names() if registry.get(name).config_class.shipped_checkpoints}
    assert {"eagle", "eagle3", "mtp", "dflash", "dspark", "draft_model"} <= shipping
    for name in shipping:
        cls = registry.get(name).config_class
        # mtp / dspark: the target's own modules (DeepSeek-V4 carries DSpark stages) first
        assert "default_model" not in vars(cls) or name in {"mtp", "dspark"}, name
        from specpath.demo import demo_for

        json.dumps(dict(demo_for(name, cls).config))  # each ships its drafter for the embedded demo


@pytest.mark.parametrize("method", ["eagle", "eagle3", "draft_model"])
def test_a_shipped_drafter_runs_at_its_k_when_none_is_given(method):
    """``{"method": "eagle3"}`` on a target that ships a head resolves as MTP/DFlash/DSpark do."""
    from specpath import create_speculative_config
    from specpath.lookup import builtin_config_class

    spec = create_speculative_config({"method": method})
    cls = builtin_config_class(method).config_class
    assert spec.num_speculative_tokens == cls.shipped_drafter_k
    assert spec.model == cls.default_model(spec)
    assert create_speculative_config({"method": method, "num_speculative_tokens": 2}).num_speculative_tokens == 2


def test_a_checkpoint_of_ones_own_still_needs_k(tmp_path):
    import shutil

    from specpath import create_speculative_config
    from specpath.lookup import builtin_config_class

    from specpath.config.shipped import EMBEDDED_TARGET, find_shipped

    shipped = find_shipped(builtin_config_class("eagle3").config_class.shipped_checkpoints, EMBEDDED_TARGET)
    own = shutil.copytree(shipped, tmp_path / "my-eagle3-head")
    with pytest.raises(SpeculativeConfigError, match="num_speculative_tokens: must be provided"):
        create_speculative_config({"method": "eagle3", "model": str(own)})
