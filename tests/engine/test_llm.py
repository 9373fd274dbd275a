"""The user API and the CLI, on a tiny checkpoint, with test methods registered as custom methods."""

import json

import attrs
import pytest

from engine_helpers import save_tiny_checkpoint
from lookup_methods import LookupConfig
from specpath_engine.llm import LLM, SamplingParams
from specpath.registry import get_registry, register_speculative_method


@attrs.frozen(kw_only=True)
class HiddenLookupConfig(LookupConfig):
    """Reads target hidden states and its draft KV depends on the next token (EAGLE-like flags)."""

    speculator_class = "engine_helpers:HiddenLookupSpeculator"
    uses_target_hidden_states = True
    draft_kv_depends_on_next_token = True

    @property
    def num_lookahead_tokens(self):
        return self.num_speculative_tokens


@attrs.frozen(kw_only=True)
class SlotsLookupConfig(LookupConfig):
    """Declares extra draft rows in the target batch (like P-EAGLE's K-1)."""

    @property
    def max_num_new_slots_for_drafting(self):
        return self.num_speculative_tokens - 1


@attrs.frozen(kw_only=True)
class LaneLookupConfig(SlotsLookupConfig):
    """The same, drafting in a separate workspace lane: no rows in the target batch."""

    uses_separate_workspace_lane = True


@attrs.frozen(kw_only=True)
class FreeLookupConfig(LookupConfig):
    """A lookup method (from the earliest match) declared model-free, to run beside another drafter."""

    speculator_class = "engine_helpers:EarliestLookupSpeculator"
    model_free = True


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(autouse=True)
def methods():
    registry = get_registry()
    saved = registry.snapshot()
    register_speculative_method("engine_test_lookup", LookupConfig)
    register_speculative_method("engine_test_hidden_lookup", HiddenLookupConfig)
    register_speculative_method("engine_test_slots_lookup", SlotsLookupConfig)
    register_speculative_method("engine_test_lane_lookup", LaneLookupConfig)
    register_speculative_method("engine_test_free_lookup", FreeLookupConfig)
    yield
    registry.restore(saved)


PROMPTS = ["def f(x):\n    return x + 1\n\ndef g(x):\n    return ", [100, 101, 102, 100, 101], "ab ab ab ab"]


def test_generate_text_and_token_prompts(checkpoint):
    llm = LLM(str(checkpoint))
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=12))
    assert [o.prompt for o in outs] == [PROMPTS[0], None, PROMPTS[2]]
    assert outs[1].prompt_token_ids == PROMPTS[1]
    for o in outs:
        assert len(o.token_ids) == 12 and o.finish_reason == "length"
        assert o.text == llm.tokenizer.decode(o.token_ids)
    assert llm.metrics.num_generated_tokens == 36 and llm.metrics.tokens_per_s > 0
    single = llm.generate(PROMPTS[0], SamplingParams(max_tokens=12))
    assert single[0].token_ids == outs[0].token_ids


@pytest.mark.parametrize("method", ["engine_test_lookup", "engine_test_hidden_lookup"])
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_speculative_config_keeps_greedy_output(checkpoint, method, prefix_caching):
    base = LLM(str(checkpoint)).generate(PROMPTS * 2, SamplingParams(max_tokens=40))
    llm = LLM(str(checkpoint), {"method": method, "num_speculative_tokens": 3},
              enable_prefix_caching=prefix_caching, block_size=4)
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=40))
    assert llm.metrics.num_draft_tokens > 0
    outs += llm.generate(PROMPTS, SamplingParams(max_tokens=40))  # a second call can hit the prefix cache
    assert [o.token_ids for o in outs] == [o.token_ids for o in base]
    engine = llm.engine
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
    spec = llm.speculator
    if method == "engine_test_hidden_lookup":
        assert engine.config.num_lookahead_tokens == 3 and engine.config.num_prefill_lookahead_tokens == 1
        assert engine.blocks.use_eagle_block_drop
        assert engine.blocks.num_hash_lookahead_tokens == (1 if prefix_caching else 0)
        assert spec.rows_seen == spec.positions_announced > 0
    if prefix_caching:
        assert llm.metrics.num_cached_tokens > 0


def test_a_model_free_drafter_beside_a_hidden_state_drafter_keeps_greedy_output(checkpoint):
    base = LLM(str(checkpoint)).generate(PROMPTS, SamplingParams(max_tokens=40))
    llm = LLM(str(checkpoint), {"method": "engine_test_hidden_lookup", "num_speculative_tokens": 3,
                                "model_free_drafter": {"method": "engine_test_free_lookup"},
                                "model_free_min_tokens": 1})
    hybrid = llm.speculator
    hybrid.engine_score = 1.0  # where the two chains part, the model-free one is verified until it misses
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=40))
    assert [o.token_ids for o in outs] == [o.token_ids for o in base]
    assert hybrid.num_model_free_drafts > 0 and llm.metrics.num_draft_tokens > 0
    # the drafter read every committed position's hidden states, whichever chain was verified
    assert hybrid.drafter.rows_seen == hybrid.drafter.positions_announced > 0
    assert llm.engine.config.num_lookahead_tokens == 3  # the drafter's contract is the engine's


def test_dynamic_k_table_is_read_from_the_config(checkpoint):
    llm = LLM(str(checkpoint), {"method": "engine_test_lookup", "num_speculative_tokens": 4,
                                "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 8, 1]]})
    llm.generate(PROMPTS, SamplingParams(max_tokens=20))
    assert llm.metrics.num_drafts > 0
    assert len(llm.metrics.drafted_by_position) <= 4
    assert llm.engine.scheduler.k_for_batch_size(3) == 1 and llm.engine.scheduler.k_for_batch_size(1) == 4


def test_stop_string_cuts_text(checkpoint):
    llm = LLM(str(checkpoint))
    full = llm.generate("abc", SamplingParams(max_tokens=20))[0]
    stop = full.text[5:7]
    cut = llm.generate("abc", SamplingParams(max_tokens=20, stop=[stop]))[0]
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.find(stop)]


def test_missing_model_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        LLM(str(tmp_path))


def test_cli_run_json(checkpoint, capsys):
    from specpath.cli import main

    rc = main(["run", "--model", str(checkpoint), "--prompt", "ab ab ab ab", "--max-tokens", "10", "--json",
               "--speculative-config", '{"method": "engine_test_lookup", "num_speculative_tokens": 2}'])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["token_ids"]) == 10 and isinstance(data["text"], str)
    assert set(data["metrics"]) == {"num_drafts", "num_draft_tokens", "num_accepted_tokens",
                                    "mean_acceptance_length", "acceptance_rate_by_position", "tokens_per_s",
                                    "num_backoff_steps", "step_costs"}
    costs = data["metrics"]["step_costs"]  # the adaptive policy's fitted costs, in plain steps
    assert costs["plain_step_ms"] > 0 and {"per_row", "per_drafting_request", "per_pass"} <= set(costs)
    base = LLM(str(checkpoint)).generate("ab ab ab ab", SamplingParams(max_tokens=10))[0]
    assert data["token_ids"] == base.token_ids


def test_cli_run_bad_config_is_one_line(checkpoint, capsys):
    from specpath.cli import main

    rc = main(["run", "--model", str(checkpoint), "--prompt", "x", "--speculative-config", '{"method": "ngrm"}'])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "ngram" in err


def test_demo_rows(checkpoint, capsys):
    from specpath.cli import main

    rc = main(["demo", "--model", str(checkpoint), "--max-tokens", "8", "--json",
               "--methods", "engine_test_lookup,engine_test_hidden_lookup"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["method"]: r for r in data["rows"]}
    assert set(rows) == {"baseline", "engine_test_lookup", "engine_test_hidden_lookup"}
    assert all(r["greedy_identical"] for r in rows.values())
    assert rows["baseline"]["speedup"] == 1.0


def test_demo_runs_each_drafter_with_a_model_free_method_beside_it(checkpoint, capsys):
    from specpath.cli import main

    rc = main(["demo", "--model", str(checkpoint), "--max-tokens", "8", "--json", "--model-free",
               "engine_test_free_lookup", "--methods", "engine_test_hidden_lookup,engine_test_free_lookup"])
    assert rc == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    # the model-free method itself gets no second row
    assert set(rows) == {"baseline", "engine_test_free_lookup", "engine_test_hidden_lookup",
                         "engine_test_hidden_lookup + engine_test_free_lookup"}
    assert rows["engine_test_hidden_lookup + engine_test_free_lookup"]["config"]["model_free_drafter"] == {
        "method": "engine_test_free_lookup"}
    assert all(r["greedy_identical"] for r in rows.values())


def test_demo_refuses_a_model_free_method_that_is_not_one(checkpoint, capsys):
    from specpath.cli import main

    rc = main(["demo", "--model", str(checkpoint), "--model-free", "engine_test_hidden_lookup"])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "--model-free: is not an installed model-free method" in err


@pytest.mark.parametrize("method, rows", [("engine_test_slots_lookup", 3), ("engine_test_lane_lookup", 0)])
def test_extra_draft_rows_follow_the_workspace_flag(checkpoint, method, rows):
    llm = LLM(str(checkpoint), {"method": method, "num_speculative_tokens": 4})
    assert llm.engine.config.num_extra_draft_slots == rows
    base = LLM(str(checkpoint)).generate(PROMPTS, SamplingParams(max_tokens=16))
    assert [o.token_ids for o in llm.generate(PROMPTS, SamplingParams(max_tokens=16))] == [o.token_ids for o in base]


def test_engines_share_a_target_only_in_the_same_weight_layout(checkpoint, monkeypatch):
    """Targets are shared between live engines of one file and dtype, but not across the native
    bf16 layouts (plain rows vs AMX tiles): each engine's layers keep the layout they were built in."""
    import torch

    from specpath_engine.llm import _load_target
    from specpath_engine.modeling import native

    kernels = native.kernels()
    if kernels is None:  # no native layouts to tell apart: one shared target
        assert _load_target(checkpoint, torch.bfloat16, "cpu") is _load_target(checkpoint, torch.bfloat16, "cpu")
        return
    first = _load_target(checkpoint, torch.bfloat16, "cpu")
    assert _load_target(checkpoint, torch.bfloat16, "cpu") is first
    monkeypatch.setattr(kernels, "tiles", not kernels.tiles)
    other = _load_target(checkpoint, torch.bfloat16, "cpu")
    assert other is not first
    layouts = {getattr(m, "tiled", None) for m in other.modules()} - {None}
    assert layouts == {kernels.tiles} or not layouts
