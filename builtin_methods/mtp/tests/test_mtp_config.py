"""Resolution of MTP configs: aliases, default model, K from n_predict, detection,
specialisation, options and hash, parallel configs."""

import json
import shutil
import subprocess
import sys
import warnings

import pytest

from specpath.config.model import ModelConfig, ParallelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath.methods import MTP_ALIASES, MethodAliasWarning
from specpath_mtp.config import MTP1, MTPSpeculatorConfig, MultiModuleMTPSpeculatorConfig


def resolve(fields, target=None, parallel=None):
    return SpeculativeConfig.from_dict(dict(fields), target_model_config=target, target_parallel_config=parallel)


@pytest.mark.parametrize("alias", sorted(MTP_ALIASES))
def test_every_alias_resolves_to_mtp_with_a_deprecation_warning(tiny, alias):
    _, paths = tiny
    with pytest.warns(MethodAliasWarning, match=f"'{alias}' is deprecated and replaced with 'mtp'"):
        spec = resolve({"method": alias, "model": str(paths[1]), "num_speculative_tokens": 2})
    assert spec.method == "mtp" and spec.custom_method is None
    assert type(spec.speculator_config) is MTPSpeculatorConfig


def test_mtp_itself_does_not_warn(tiny):
    _, paths = tiny
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve({"method": "mtp", "model": str(paths[1]), "num_speculative_tokens": 2})


@pytest.mark.parametrize("n", [1, 2, 3])
def test_k_defaults_to_the_module_count(tiny, n):
    _, paths = tiny
    spec = resolve({"method": "mtp", "model": str(paths[n])})
    assert spec.num_speculative_tokens == n
    assert spec.speculator_config.num_modules == n


def test_k_above_n_predict_must_be_a_multiple_of_it(tiny):
    _, paths = tiny
    for k in (1, 2, 3, 6, 9):
        assert resolve({"method": "mtp", "model": str(paths[3]), "num_speculative_tokens": k}).num_speculative_tokens == k
    for k in (4, 5, 7):
        with pytest.raises(SpeculativeConfigError) as info:
            resolve({"method": "mtp", "model": str(paths[3]), "num_speculative_tokens": k})
        message = str(info.value)
        assert "num_speculative_tokens" in message and "must be divisible by" in message and "n_predict=3" in message
        assert f"(got {k})" in message and "\n" not in message


def test_several_modules_specialise(tiny):
    _, paths = tiny
    single = resolve({"method": "mtp", "model": str(paths[1]), "num_speculative_tokens": 4}).speculator_config
    multi = resolve({"method": "mtp", "model": str(paths[2]), "num_speculative_tokens": 4}).speculator_config
    assert type(single) is MTPSpeculatorConfig and type(multi) is MultiModuleMTPSpeculatorConfig
    assert (single.num_prefill_lookahead_tokens, multi.num_prefill_lookahead_tokens) == (1, 4)
    assert (single.num_lookahead_tokens, multi.num_lookahead_tokens) == (4, 4)
    assert single.max_num_new_slots_for_drafting == multi.max_num_new_slots_for_drafting == 0
    assert single.supports_pcp and not multi.supports_pcp
    for config in (single, multi):
        assert config.spec.use_eagle_block_drop()
        assert config.uses_target_hidden_states and not config.draft_has_own_vocab


def test_prefill_context_parallelism_only_for_one_module(tiny):
    _, paths = tiny
    pcp = ParallelConfig(prefill_context_parallel_size=2)
    resolve({"method": "mtp", "model": str(paths[1]), "num_speculative_tokens": 2}, parallel=pcp)
    with pytest.raises(SpeculativeConfigError, match="prefill_context_parallel_size"):
        resolve({"method": "mtp", "model": str(paths[3]), "num_speculative_tokens": 3}, parallel=pcp)


def test_index_share_option_is_mtp_only_and_hashed(tiny):
    _, paths = tiny
    base = {"method": "mtp", "model": str(paths[1]), "num_speculative_tokens": 2}
    on = resolve({**base, "index_share_for_mtp_iteration": True})
    off = resolve({**base, "index_share_for_mtp_iteration": False})
    unset = resolve(base)
    assert on.index_share_for_mtp_iteration is True
    assert on.compute_hash() != off.compute_hash()
    assert off.compute_hash() == unset.compute_hash()  # None and False: the same graph
    assert ("index_share_for_mtp_iteration", True) in on.speculator_config.hash_factors()
    others = [{"method": "ngram", "num_speculative_tokens": 2},
              {"method": "draft_model", "model": str(paths["target"]), "num_speculative_tokens": 2}]
    for fields in others:
        with pytest.raises(SpeculativeConfigError) as info:
            resolve({**fields, "index_share_for_mtp_iteration": True})
        assert "index_share_for_mtp_iteration" in str(info.value) and "is not supported by method" in str(info.value)
    with pytest.raises(SpeculativeConfigError, match="dspark_draft_topk"):
        resolve({**base, "dspark_draft_topk": 4})


def test_checkpoints_are_detected_by_model_type(tiny, tmp_path):
    _, paths = tiny
    spec = resolve({"model": str(paths[3]), "num_speculative_tokens": 3})
    assert spec.method == "mtp" and type(spec.speculator_config) is MultiModuleMTPSpeculatorConfig
    assert any("plugin 'mtp' (specpath_mtp.hooks.specpath_detect_method)" in detail for _, detail in spec.resolution_trace)
    renamed = tmp_path / "deepseek"
    shutil.copytree(paths[1], renamed)
    config = json.loads((renamed / "config.json").read_text())
    (renamed / "config.json").write_text(json.dumps({**config, "model_type": "deepseek_mtp"}))
    assert resolve({"model": str(renamed), "num_speculative_tokens": 1}).method == "mtp"
    assert resolve({"model": str(paths["target"]), "num_speculative_tokens": 1}).method == "draft_model"


def test_default_model_is_the_target_weights_when_the_target_carries_modules(tiny, tmp_path):
    """DeepSeek style: the modules sit in the target checkpoint, which says only
    num_nextn_predict_layers; a loader that rewrote `model` keeps the original in model_weights."""
    _, paths = tiny
    weights = tmp_path / "weights"
    shutil.copytree(paths[2], weights)
    config = json.loads((weights / "config.json").read_text())
    del config["n_predict"]
    config["model_type"] = "llama"
    (weights / "config.json").write_text(json.dumps(config))
    cache = tmp_path / "cache"
    shutil.copytree(weights, cache)
    target = ModelConfig(model=str(cache), model_weights=str(weights))
    spec = resolve({"method": "mtp"}, target=target)
    assert spec.model == str(weights)
    assert spec.num_speculative_tokens == 2
    assert type(spec.speculator_config) is MultiModuleMTPSpeculatorConfig
    assert resolve({"method": "mtp"}, target=ModelConfig(model=str(weights))).model == str(weights)


def test_a_target_without_modules_is_a_one_line_error(tiny):
    _, paths = tiny
    with pytest.raises(SpeculativeConfigError) as info:
        resolve({"method": "mtp"}, target=ModelConfig(model=str(paths["target"])))
    message = str(info.value)
    assert "has no MTP modules" in message and "num_nextn_predict_layers" in message and "\n" not in message


@pytest.mark.skipif(not (MTP1 / "config.json").is_file(), reason="no shipped MTP modules in this checkout")
def test_the_embedded_target_defaults_to_the_shipped_modules():
    from specpath_engine.modeling.named_models import embedded_model_path as embedded_target_path

    for target in (None, ModelConfig(model=str(embedded_target_path()))):
        spec = resolve({"method": "mtp"}, target=target)
        assert spec.model == str(MTP1) and spec.num_speculative_tokens == 1


def test_the_smollm2_module_is_the_default_for_smollm2(tmp_path):
    import json

    from specpath_drafting.testing import smollm2_config_dir
    from specpath_drafting.vocab import checkpoint_train_vocab
    from specpath_mtp.config import MTP1_SMOLLM2

    target = ModelConfig(model=str(smollm2_config_dir(tmp_path / "smollm2")))
    spec = resolve({"method": "mtp", "num_speculative_tokens": 4}, target=target)
    assert spec.model == str(MTP1_SMOLLM2) and spec.num_speculative_tokens == 4
    assert json.loads((MTP1_SMOLLM2 / "config.json").read_text())["hidden_size"] == 576
    assert checkpoint_train_vocab(MTP1_SMOLLM2, 49152).numel() == 4096  # served over its training ids


def test_chain_only_options_are_refused(tiny):
    _, paths = tiny
    base = {"method": "mtp", "model": str(paths[1]), "num_speculative_tokens": 2}
    with pytest.raises(SpeculativeConfigError, match="parallel_drafting"):
        resolve({**base, "parallel_drafting": True})
    with pytest.raises(SpeculativeConfigError, match="eagle_aux_hidden_state_layer_ids"):
        resolve({**base, "eagle_aux_hidden_state_layer_ids": [1]})


def test_config_resolution_imports_no_torch(tiny):
    _, paths = tiny
    code = (
        "import sys; from specpath.config.speculative import SpeculativeConfig; "
        f"s = SpeculativeConfig.from_dict({{'method': 'mtp', 'model': {str(paths[3])!r}}}); "
        "assert type(s.speculator_config).__name__ == 'MultiModuleMTPSpeculatorConfig'; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
