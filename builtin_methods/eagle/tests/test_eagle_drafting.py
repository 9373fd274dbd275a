"""The EAGLE-1 speculator in the reference engine: drafts equal a from-scratch computation
(so the drafter's KV and its rollback are right), greedy output equals the baseline for
K 1..8 with prefix caching on and off, sampled output follows the target's distribution,
the head options (fp8 head, sharded argmax) keep the output, and extract_hidden_states
returns the target's states."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.request import SamplingParams
from specpath_drafting.numerics import NVFP4_BLOCK, nvfp4_weight, sharded_argmax
from specpath_drafting.testing import TINY_PROMPTS as PROMPTS
from specpath_drafting.testing import DraftingSetup, drafting_setup, greedy, make_engine
from specpath_drafting.testing import chi_square_of_two_tokens, drafts_equal_a_from_scratch_computation
from specpath_drafting.testing import random_head, reference_drafts, resolve
from specpath_eagle.head import EagleHead

GREEDY = greedy()
setup = drafting_setup("eagle", lambda root, target: random_head(EagleHead, target, root / "head", seed=3), num_layers=3)
llm = DraftingSetup.llm


def spec_for(setup, k, **extra):
    return {"method": "eagle", "model": str(setup.drafter), "num_speculative_tokens": k, "draft_length_policy": "fixed",
            **extra}  # these tests check what K drafts are, so K every step


@pytest.mark.parametrize("num_blocks", [None, 14])  # 14 blocks of 8: requests get preempted and recomputed
def test_drafts_equal_a_from_scratch_computation(setup, num_blocks):
    _, requests = drafts_equal_a_from_scratch_computation(setup, spec_for(setup, 4), lambda s, r, n: reference_drafts(
        s.head, setup.target, r.token_ids, s.hidden_state_layers, n), num_blocks=num_blocks)
    if num_blocks is not None:
        assert sum(r.num_preemptions for r in requests) > 0


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_output_equals_the_baseline(setup, k, prefix_caching):
    baseline = setup[3]
    engine = llm(setup, spec_for(setup, k), enable_prefix_caching=prefix_caching)
    outputs = engine.generate(PROMPTS + PROMPTS[:2], GREEDY)  # repeats hit the prefix cache
    assert [o.token_ids for o in outputs] == baseline + baseline[:2]
    metrics = engine.metrics
    assert metrics.num_draft_tokens > 0
    if prefix_caching:
        assert metrics.num_cached_tokens > 0


@pytest.mark.parametrize("options", [{"draft_lm_head_quantization": "fp8"}, {"draft_lm_head_quantization": "nvfp4"},
                                     {"use_local_argmax_reduction": True,
                                                                             "draft_tensor_parallel_size": 1}])
def test_head_options_keep_the_output(setup, options):
    engine = llm(setup, spec_for(setup, 3, **options))
    assert [o.token_ids for o in engine.generate(PROMPTS, GREEDY)] == setup[3]


def test_fp8_head_rounds_the_shared_head(setup):
    root, target, _, _ = setup
    engine = make_engine(target, resolve(spec_for(setup, 2, draft_lm_head_quantization="fp8"), root / "target"))
    head = engine.runner.speculator.head
    weight = target.lm_head.weight
    assert head._quantized_head is not None and not torch.equal(head._quantized_head, weight)
    assert torch.allclose(head._quantized_head, weight, rtol=0.07, atol=1e-6)


def test_nvfp4_head_rounds_the_shared_head_through_e2m1_blocks(setup):
    root, target, _, _ = setup
    engine = make_engine(target, resolve(spec_for(setup, 2, draft_lm_head_quantization="nvfp4"), root / "target"))
    head = engine.runner.speculator.head
    weight = target.lm_head.weight
    assert torch.equal(head._quantized_head, nvfp4_weight(weight)) and not torch.equal(head._quantized_head, weight)


@given(st.integers(1, 5), st.integers(1, 40), st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None)
def test_nvfp4_weight_is_blockwise_e2m1(rows, cols, seed):
    w = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3
    q = nvfp4_weight(w)
    assert q.shape == w.shape and q.dtype == w.dtype
    assert torch.equal(nvfp4_weight(q), q) or torch.allclose(nvfp4_weight(q), q)  # idempotent on its own grid
    for r in range(rows):
        for start in range(0, cols, NVFP4_BLOCK):
            block, got = w[r, start:start + NVFP4_BLOCK], q[r, start:start + NVFP4_BLOCK]
            amax = block.abs().max()
            assert (got - block).abs().max() <= amax / 6 + 1e-9 + amax * 0.07  # within one e2m1 step (+ scale rounding)
            assert (got.abs() <= amax * 1.07 + 1e-9).all()
            nonzero = got[got != 0].abs()
            if len(nonzero):  # every element is scale x an e2m1 value: at most 8 magnitudes per block
                assert len(torch.unique(nonzero)) <= 7


def test_sharded_argmax_equals_argmax_with_ties():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randint(0, 5, (200, 37), generator=gen).double()  # many ties
    for shards in (1, 2, 3, 4, 8, 37, 64):
        assert torch.equal(sharded_argmax(logits, shards), logits.argmax(-1))


def test_sampled_output_follows_the_target_distribution(tmp_path):
    """Random drafts at temperature 1: the (2nd, 3rd) output tokens, which pass through
    speculative verification, must follow the target's exact joint distribution."""
    chi_square_of_two_tokens(tmp_path, {"method": "eagle"}, lambda path, target: random_head(
        EagleHead, target, tmp_path / "h", seed=5), num_layers=2)


def test_extract_hidden_states_returns_the_target_states(setup):
    root, target, _, _ = setup
    spec = resolve({"method": "extract_hidden_states", "eagle_aux_hidden_state_layer_ids": [1, 2]}, root / "target")
    engine = make_engine(target, spec, max_num_batched_tokens=16)
    requests, metrics = engine.generate(PROMPTS[:2], SamplingParams(max_tokens=6, ignore_eos=True))
    assert metrics.num_draft_tokens == 0
    speculator = engine.runner.speculator
    for r in requests:
        got = speculator.pop_hidden_states(r.req_id)
        ids = (list(r.prompt_token_ids) + list(r.output_token_ids))[: got.shape[0]]
        want = target(torch.tensor(ids), torch.arange(len(ids)), hidden_layers=(0, 1)).hidden_states  # entering layers 1, 2
        assert got.shape[0] >= len(r.prompt_token_ids)
        assert torch.allclose(got, want, atol=1e-9)


def test_bf16_drafting_with_the_packed_drafter_matches_the_unpacked_one(setup, monkeypatch):
    from specpath_drafting.testing import packed_drafting_matches_unpacked

    packed_drafting_matches_unpacked(setup, spec_for(setup, 4), monkeypatch)
