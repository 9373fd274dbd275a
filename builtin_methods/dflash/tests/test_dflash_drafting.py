"""The DFlash speculator in the reference engine: drafts equal a from-scratch computation (so the
context KV, its rollback and preemption handling are right), greedy output equals the baseline
for K 2..8 with prefix caching on and off and with adaptive verification, and sampled output
follows the target's distribution."""

import pytest

from specpath_engine.testing.native import native_kernels_missing
from specpath_drafting.block.testing import chi_square_of_two_tokens, reference_block, tiny_drafter
from specpath_drafting.testing import TINY_PROMPTS as PROMPTS
from specpath_drafting.testing import DraftingSetup, drafting_setup, drafts_equal_a_from_scratch_computation, greedy

GREEDY = greedy()
setup = drafting_setup("dflash", lambda root, target: tiny_drafter(
    "dflash", root / "target", root / "drafter", seed=3, num_layers=2))
llm = DraftingSetup.llm


def spec_for(setup, k, **extra):
    return {"method": "dflash", "model": setup.drafter, "num_speculative_tokens": k, **extra}


@pytest.mark.parametrize("num_blocks", [None, 14])  # 14 blocks of 8: requests get preempted and recomputed
def test_drafts_equal_a_from_scratch_computation(setup, num_blocks):
    _, requests = drafts_equal_a_from_scratch_computation(setup, spec_for(setup, 4), lambda s, r, n: s.drafter.logits(
        reference_block(s.drafter, setup.target, r.token_ids, s.last_block_width)[:n]).argmax(-1).tolist(), num_blocks=num_blocks)
    if num_blocks is not None:
        assert sum(r.num_preemptions for r in requests) > 0


@pytest.mark.parametrize("k", range(2, 9))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_output_equals_the_baseline(setup, k, prefix_caching):
    engine = llm(setup, spec_for(setup, k), enable_prefix_caching=prefix_caching)
    outputs = engine.generate(PROMPTS + PROMPTS[:2], GREEDY)  # repeats hit the prefix cache
    assert [o.token_ids for o in outputs] == setup[3] + setup[3][:2]
    assert engine.metrics.num_draft_tokens > 0
    if prefix_caching:
        assert engine.metrics.num_cached_tokens > 0


@pytest.mark.parametrize("options", [{"enable_adaptive_verification": True},
                                     {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.6}])
def test_adaptive_verification_keeps_the_output(setup, options):
    engine = llm(setup, spec_for(setup, 6, **options))
    assert [o.token_ids for o in engine.generate(PROMPTS, GREEDY)] == setup[3]


def test_a_high_threshold_verifies_fewer_drafts(setup):
    counts = []
    for options in ({}, {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.9}):
        engine = llm(setup, spec_for(setup, 6, **options))
        engine.generate(PROMPTS, GREEDY)
        counts.append(engine.metrics.num_draft_tokens)
    assert counts[1] < counts[0]


def test_sampled_output_follows_the_target_distribution(tmp_path):
    chi_square_of_two_tokens(tmp_path, {"method": "dflash"})


def test_sampled_output_with_adaptive_verification_follows_the_target_distribution(tmp_path):
    chi_square_of_two_tokens(tmp_path, {"method": "dflash", "enable_adaptive_verification": True,
                                        "adaptive_verification_threshold": 0.4})


def test_a_recorded_training_vocabulary_restricts_the_drafts(setup, tmp_path):
    """A drafter trained with ``--train-vocab`` drafts its recorded ids only: each draft is the
    best of them under the full head (masked), and greedy output stays the baseline's."""
    from specpath_drafting.testing import check_every_proposal, make_engine, masked_head, resolve, with_train_vocab

    root, target, drafter_path, baseline = setup
    keep = list(range(1, 64, 3))
    path = with_train_vocab(drafter_path, tmp_path / "restricted", keep)
    engine = make_engine(target, resolve({"method": "dflash", "model": str(path), "num_speculative_tokens": 4, "draft_length_policy": "fixed"},
                                         root / "target"))
    speculator = engine.runner.speculator
    drafter = speculator.drafter
    full = masked_head(target.lm_head_logits, keep)
    checked = check_every_proposal(speculator, lambda r, n: full(drafter.norm(
        reference_block(drafter, target, r.token_ids, speculator.last_block_width)[:n])).argmax(-1).tolist())
    requests, _ = engine.generate(PROMPTS, GREEDY)
    assert [r.output_token_ids for r in requests] == baseline
    assert len(checked) > 10


def test_bf16_drafting_with_the_packed_drafter_matches_the_unpacked_one(setup, monkeypatch):
    from specpath_drafting.testing import packed_drafting_matches_unpacked

    packed_drafting_matches_unpacked(setup, spec_for(setup, 4), monkeypatch)


@pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))
def test_one_requests_block_on_the_native_kernels_equals_the_torch_pass(tmp_path):
    """bf16 on a CPU with the native kernels: one request's block pass runs on them (the block's
    keys written after its context, every query seeing the whole row) and gives the batched torch
    pass's outputs."""
    import torch

    from specpath_engine.testing.native import counting_native_attention
    from specpath_drafting.testing import greedy as greedy_params
    from specpath_drafting.testing import tiny_llm, drafting_target

    drafting_target(tmp_path / "target", hidden_size=128, num_layers=3)  # head_dim 32: what the kernels take
    drafter = tiny_drafter("dflash", tmp_path / "target", tmp_path / "drafter", seed=3, num_layers=2)
    llm = tiny_llm(tmp_path / "target", {"method": "dflash", "model": drafter, "num_speculative_tokens": 4},
                   dtype="bfloat16")
    llm.generate([list(PROMPTS[0])], greedy_params())  # fills row 0's context KV
    spec = llm.speculator
    assert all(layer.native_linears() is not None for layer in spec.drafter.layers)
    with torch.inference_mode():
        for anchor_pos in (1, 6, 12):
            spec.draft_block_native = lambda *args: None  # the batched torch pass (same linears)
            want = spec.draft_block([5], [anchor_pos], [0], 4)
            del spec.draft_block_native
            with counting_native_attention() as calls:
                got = spec.draft_block([5], [anchor_pos], [0], 4)
            assert calls == [len(spec.drafter.layers)]
            torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2)


@pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))
def test_several_requests_blocks_run_in_one_native_pass_each_as_its_own(tmp_path, monkeypatch):
    """bf16 on a CPU with the native kernels: the blocks of several requests (context rows of
    different lengths, some beyond others' ends) run in one batched native attention call per
    layer and give each request what its own native block pass gives, bit for bit, and the
    batched torch pass's outputs within bf16 rounding."""
    import torch

    from specpath_engine.modeling import native
    from specpath_drafting.testing import drafting_target, tiny_llm
    from specpath_drafting.testing import greedy as greedy_params

    drafting_target(tmp_path / "target", hidden_size=128, num_layers=3)
    drafter = tiny_drafter("dflash", tmp_path / "target", tmp_path / "drafter", seed=5, num_layers=2)
    llm = tiny_llm(tmp_path / "target", {"method": "dflash", "model": drafter, "num_speculative_tokens": 4},
                   dtype="bfloat16", max_num_seqs=4)
    llm.generate([list(p) for p in (PROMPTS * 2)[:4]], greedy_params())  # fills rows 0-3's context KV
    spec = llm.speculator
    kernels = type(native.kernels())
    batched, original = [0], kernels.attention_batch

    def counted(self, *args, **kwargs):
        batched[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(kernels, "attention_batch", counted)
    anchors, anchor_pos, rows = [5, 9, 2, 7], [3, 11, 6, 1], [0, 1, 2, 3]
    with torch.inference_mode():
        got = spec.draft_block(anchors, anchor_pos, rows, 4)
        assert batched == [len(spec.drafter.layers)]
        own = torch.cat([spec.draft_block([a], [p], [r], 4) for a, p, r in zip(anchors, anchor_pos, rows)])
        spec.draft_blocks_native = lambda *args: None  # the batched torch pass (same linears)
        want = spec.draft_block(anchors, anchor_pos, rows, 4)
        del spec.draft_blocks_native
    assert torch.equal(got, own)
    torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2)


@pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))
@pytest.mark.parametrize("max_num_seqs", [1, 4])
def test_the_one_call_native_step_gives_the_per_op_steps_drafts_and_kv(tmp_path, max_num_seqs):
    """bf16 on a CPU with the native kernels: each step's ingest and block pass are one native call
    (``block_draft.c``) whose drafts and context KV are the per-op path's, bit for bit, for one
    request and for four at once (rows of different lengths)."""
    from specpath_drafting.block.testing import native_step_matches_per_op

    assert native_step_matches_per_op(tmp_path, "dflash", max_num_seqs=max_num_seqs) > 4


@pytest.mark.parametrize("method", ["int8", "int4"])
def test_a_quantized_drafter_keeps_the_output(setup, method):
    from specpath_drafting.testing import quantized_drafting_keeps_the_output

    quantized_drafting_keeps_the_output(setup, spec_for(setup, 4), method)
