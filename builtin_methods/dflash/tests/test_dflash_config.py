"""dflash configuration rules beyond the kit: the method-table values, max_num_draft_seqs, the
layout record, checkpoint detection and the taps the drafter reads."""

import json
import shutil

import pytest

from specpath.config.engine import EngineConfig, SchedulerConfig
from specpath.config.model import ModelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath_engine.testing.engine import tiny_checkpoint
from specpath_drafting.block.config import build_target_layer_ids
from specpath_drafting.block.testing import tiny_drafter

TARGET = tiny_checkpoint(0)


@pytest.fixture(scope="module")
def drafter(tmp_path_factory):
    return tiny_drafter("dflash", TARGET, tmp_path_factory.mktemp("dflash") / "d", num_draft_tokens=5)


def resolve(**fields):
    return SpeculativeConfig.from_dict(fields, target_model_config=ModelConfig(model=TARGET))


def test_k_defaults_to_what_the_drafter_was_trained_for(drafter):
    spec = resolve(method="dflash", model=drafter)
    assert spec.num_speculative_tokens == 5
    assert spec.speculator_config.num_lookahead_tokens == 6
    assert spec.eagle_aux_hidden_state_layer_ids == (1, 2)  # the taps (outputs of 0, 1) in vLLM's naming, hashed


@pytest.mark.parametrize("k", [1, 3, 7])
def test_max_num_draft_seqs_divides_the_token_budget_by_the_lookahead(drafter, k):
    spec = resolve(method="dflash", model=drafter, num_speculative_tokens=k)
    engine = EngineConfig(speculative_config=spec, scheduler_config=SchedulerConfig(max_num_batched_tokens=100))
    assert spec.speculator_config.max_num_draft_seqs(engine.scheduler_config.max_num_batched_tokens) == 100 // (k + 1)
    assert spec.speculator_config.max_num_draft_seqs(3) == 1  # never zero


def test_no_tail_block_drop_even_with_prefix_caching(drafter):
    from specpath.config.engine import CacheConfig

    spec = resolve(method="dflash", model=drafter)
    engine = EngineConfig(speculative_config=spec, cache_config=CacheConfig(enable_prefix_caching=True))
    assert not engine.use_eagle_block_drop and engine.num_hash_lookahead_tokens == 0


def test_the_checkpoint_is_detected_without_a_method(drafter, tmp_path):
    assert resolve(model=drafter).method == "dflash"
    plain = tmp_path / "my-dflash-drafter"
    shutil.copytree(drafter, plain)
    config = json.loads((plain / "config.json").read_text())
    for key in ("model_type", "architectures", "speculator_config_class"):
        config.pop(key)
    (plain / "config.json").write_text(json.dumps(config))
    assert resolve(model=str(plain)).method == "dflash"  # the path hint, tried last


def test_a_drafter_without_a_layout_record_gets_the_documented_layout(drafter, tmp_path):
    """Published drafters (z-lab, SpecForge) record no specpath layout: DFlash's own applies."""
    copy = tmp_path / "d"
    shutil.copytree(drafter, copy)
    config = json.loads((copy / "config.json").read_text())
    config.pop("anchor_sampling")
    (copy / "config.json").write_text(json.dumps(config))
    spec = resolve(method="dflash", model=str(copy))
    assert spec.speculator_config.anchor_sampling is False and spec.speculator_config.num_lookahead_tokens == 6
    config["sample_from_anchor"] = True  # the ecosystem's record of an anchor-first drafter
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpeculativeConfigError, match="anchor-first"):
        resolve(method="dflash", model=str(copy))


def test_an_anchor_first_drafter_is_refused_by_dflash(tmp_path):
    path = tiny_drafter("dflash", TARGET, tmp_path / "d", anchor_sampling=True)
    with pytest.raises(SpeculativeConfigError) as info:
        resolve(method="dflash", model=path)
    assert "anchor-first" in str(info.value) and "\n" not in str(info.value)


def test_a_drafter_for_another_target_is_refused(tmp_path):
    other = tiny_drafter("dflash", TARGET, tmp_path / "d", target_hidden_size=128)
    with pytest.raises(SpeculativeConfigError, match="hidden_size 128"):
        resolve(method="dflash", model=other)


def test_taps_are_spread_below_the_last_layer():
    assert build_target_layer_ids(6, 3) == (1, 2, 4)
    assert build_target_layer_ids(36, 5) == (1, 9, 17, 25, 33)
    assert all(max(build_target_layer_ids(n, 3)) < n - 1 for n in range(3, 40))
