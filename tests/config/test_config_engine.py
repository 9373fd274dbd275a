"""EngineConfig forwarding properties and the runner-capability rules for dynamic K."""

from __future__ import annotations

import warnings

import pytest

from specpath.config.engine import (
    RUNNER_PRESETS,
    CompilationConfig,
    EngineConfig,
    EngineConfigWarning,
    RunnerCapabilities,
)
from specpath.config.model import CacheConfig, ModelConfig, ParallelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError

pytestmark = pytest.mark.usefixtures("fake_builtins")

TABLE = [[1, 4, 4], [5, 16, 2]]


@pytest.fixture
def target(make_checkpoint):
    return ModelConfig(model=make_checkpoint("target"))


def spec_for(method, make_checkpoint, target, **kw):
    data = {"method": method, "num_speculative_tokens": 4, **kw}
    if method not in ("ngram", "ngram_gpu", "extract_hidden_states"):
        data.setdefault("model", make_checkpoint(f"{method}-draft", model_type="mtp" if method == "mtp" else "llama"))
    return SpeculativeConfig.from_dict(data, target_model_config=target)


# DESIGN.md's method table at K = 4: (lookahead, prefill lookahead, extra slots, tail drop)
TABLE_ROWS = {
    "ngram": (0, 0, 0, False),
    "ngram_gpu": (0, 0, 0, False),
    "draft_model": (4, 0, 1, False),
    "eagle": (4, 1, 0, True),
    "eagle3": (4, 1, 0, True),
    "mtp": (4, 1, 0, True),
    "dflash": (5, 1, 0, False),
    "dspark": (5, 1, 0, False),
}


@pytest.mark.parametrize("method", sorted(TABLE_ROWS))
def test_forwarding_properties_read_the_resolved_speculator(method, make_checkpoint, target):
    engine = EngineConfig(model_config=target, speculative_config=spec_for(method, make_checkpoint, target))
    got = (engine.num_lookahead_tokens, engine.num_prefill_lookahead_tokens, engine.max_num_new_slots_for_drafting,
           engine.use_eagle_block_drop)
    assert got == TABLE_ROWS[method]


def test_parallel_drafting_and_anchor_sampling_change_the_numbers(make_checkpoint, target):
    pard = spec_for("draft_model", make_checkpoint, target, parallel_drafting=True)
    peagle = spec_for("eagle3", make_checkpoint, target, parallel_drafting=True)
    anchor = spec_for("dspark", make_checkpoint, target, dspark_anchor_sampling=True)
    assert pard.speculator_config.max_num_new_slots_for_drafting == 4
    assert peagle.speculator_config.max_num_new_slots_for_drafting == 3
    assert anchor.speculator_config.num_lookahead_tokens == 4


def test_no_speculation_forwards_zeros(target):
    engine = EngineConfig(model_config=target)
    assert (engine.num_lookahead_tokens, engine.num_prefill_lookahead_tokens, engine.num_hash_lookahead_tokens,
            engine.use_eagle_block_drop, engine.num_speculative_tokens_for_batch(3)) == (0, 0, 0, False, 0)


def test_block_drop_can_be_disabled(make_checkpoint, target):
    spec = spec_for("eagle", make_checkpoint, target, disable_eagle_block_drop=True)
    assert not EngineConfig(speculative_config=spec).use_eagle_block_drop


def test_hash_lookahead_only_with_prefix_caching_block_drop_and_no_connector(make_checkpoint, target):
    eagle = spec_for("eagle", make_checkpoint, target)
    caching = CacheConfig(enable_prefix_caching=True)
    assert EngineConfig(speculative_config=eagle, cache_config=caching).num_hash_lookahead_tokens == 1
    assert EngineConfig(speculative_config=eagle).num_hash_lookahead_tokens == 0
    assert EngineConfig(speculative_config=eagle, cache_config=CacheConfig(enable_prefix_caching=True, kv_connector="x")
                        ).num_hash_lookahead_tokens == 0
    off = spec_for("eagle", make_checkpoint, target, disable_lookahead_block_hashes=True)
    assert EngineConfig(speculative_config=off, cache_config=caching).num_hash_lookahead_tokens == 0
    dflash = spec_for("dflash", make_checkpoint, target)
    assert EngineConfig(speculative_config=dflash, cache_config=caching).num_hash_lookahead_tokens == 0


def test_k_for_a_batch_size(make_checkpoint, target):
    spec = spec_for("eagle", make_checkpoint, target, num_speculative_tokens_per_batch_size=TABLE)
    engine = EngineConfig(speculative_config=spec)
    assert [engine.num_speculative_tokens_for_batch(b) for b in (1, 4, 5, 16, 17)] == [4, 4, 2, 2, 4]


def test_presets():
    assert set(RUNNER_PRESETS) == {"v1", "v2"}
    assert RUNNER_PRESETS["v1"].dynamic_k_methods == {"ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash"}
    assert RUNNER_PRESETS["v2"].trims_drafts_centrally and RUNNER_PRESETS["v2"].full_graph_with_dynamic_k
    with pytest.raises(SpeculativeConfigError, match="unknown model runner"):
        EngineConfig(runner="v3")


def test_full_graph_downgrades_to_piecewise_with_dynamic_k_on_v1(make_checkpoint, target):
    spec = spec_for("eagle", make_checkpoint, target, num_speculative_tokens_per_batch_size=TABLE)
    full = CompilationConfig(cudagraph_mode="full")
    with pytest.warns(EngineConfigWarning, match="downgraded to 'piecewise'"):
        v1 = EngineConfig(speculative_config=spec, compilation_config=full, runner="v1")
    assert v1.compilation_config.cudagraph_mode == "piecewise" and v1.dynamic_k_table == ((1, 4, 4), (5, 16, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v2 = EngineConfig(speculative_config=spec, compilation_config=full, runner="v2")
        static = EngineConfig(speculative_config=spec_for("eagle", make_checkpoint, target), compilation_config=full,
                              runner="v1")
    assert v2.compilation_config.cudagraph_mode == "full" and static.compilation_config.cudagraph_mode == "full"


def test_v1_whitelist_and_capability(make_checkpoint, target):
    dspark = spec_for("dspark", make_checkpoint, target, num_speculative_tokens_per_batch_size=TABLE)
    with pytest.warns(EngineConfigWarning, match="not supported for method 'dspark' on the v1 runner"):
        v1 = EngineConfig(speculative_config=dspark, runner="v1")
    assert v1.dynamic_k_table is None and v1.num_speculative_tokens_for_batch(8) == 4
    assert EngineConfig(speculative_config=dspark, runner="v2").dynamic_k_table is not None
    # a speculator that declares it copes with a per-step K is allowed whatever its base method
    runner = RunnerCapabilities(name="custom", trims_drafts_centrally=False, full_graph_with_dynamic_k=False)
    ngram = spec_for("ngram", make_checkpoint, target, num_speculative_tokens_per_batch_size=TABLE)
    assert EngineConfig(speculative_config=ngram, runner=runner).dynamic_k_table is not None


def test_dynamic_k_is_off_under_data_parallel(make_checkpoint, target):
    spec = spec_for("eagle", make_checkpoint, target, num_speculative_tokens_per_batch_size=TABLE)
    with pytest.warns(EngineConfigWarning, match="data parallelism"):
        engine = EngineConfig(speculative_config=spec, parallel_config=ParallelConfig(data_parallel_size=2))
    assert engine.dynamic_k_table is None and engine.num_speculative_tokens_for_batch(8) == 4


def test_create_from_a_path_and_json(make_checkpoint):
    path = make_checkpoint("target")
    engine = EngineConfig.create(path, '{"method": "ngram", "num_speculative_tokens": 3}', runner="v1")
    assert engine.model_config.model == path and engine.num_speculative_tokens == 3
    assert engine.runner is RUNNER_PRESETS["v1"]
    assert EngineConfig.create(path).speculative_config is None
