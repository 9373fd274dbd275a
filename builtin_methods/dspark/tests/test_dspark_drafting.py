"""The DSpark speculator in the reference engine: drafts equal a from-scratch computation of the
backbone and the Markov head, greedy output equals the baseline for K 2..8 (both layouts, top-k,
adaptive verification), the confidence head drives how many drafts are verified, and sampled
output follows the target's distribution, with adaptive verification too."""

import json
import shutil

import pytest
import torch

from specpath.config.model import ModelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath_engine.testing.native import native_kernels_missing
from specpath_drafting.block.testing import chi_square_of_two_tokens, reference_block, tiny_drafter
from specpath_dspark.testing import strong_heads
from specpath_drafting.testing import TINY_PROMPTS as PROMPTS
from specpath_drafting.testing import DraftingSetup, drafting_setup, drafts_equal_a_from_scratch_computation, greedy


def _drafters(root, target):
    """One drafter of each layout, keyed by ``anchor_first``."""
    return {
        True: tiny_drafter("dspark", root / "target", root / "anchor-first", seed=3, num_layers=2, markov_rank=8,
                           build=strong_heads),
        False: tiny_drafter("dspark", root / "target", root / "fill-in", seed=4, markov_rank=8,
                            anchor_sampling=False, build=strong_heads),
    }


GREEDY = greedy()


def greedy_params(max_tokens):
    from specpath_engine.request import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
setup = drafting_setup("dspark", _drafters)
llm = DraftingSetup.llm


def spec_for(setup, k, anchor_first=True, **extra):
    return {"method": "dspark", "model": setup.drafter[anchor_first], "num_speculative_tokens": k, **extra}


def markov_drafts(drafter, hidden, anchor, topk=None):
    """Greedy drafts by DSpark's definition, one position at a time."""
    base = drafter.logits(hidden)
    prev, out = anchor, []
    for j in range(base.shape[0]):
        logits = base[j] + drafter.markov_bias(torch.tensor(prev))
        if topk:
            keep = base[j].topk(topk).indices
            masked = torch.full_like(logits, float("-inf"))
            masked[keep] = logits[keep]
            logits = masked
        prev = int(logits.argmax())
        out.append(prev)
    return out


@pytest.mark.parametrize("anchor_first,topk", [(True, None), (False, None), (True, 3)])
def test_drafts_equal_a_from_scratch_computation(setup, anchor_first, topk):
    drafts_equal_a_from_scratch_computation(
        setup, spec_for(setup, 4, anchor_first, dspark_draft_topk=topk), lambda s, r, n: markov_drafts(
            s.drafter, reference_block(s.drafter, setup.target, r.token_ids, s.last_block_width)[:n], r.token_ids[-1], topk),
        num_blocks=14)


@pytest.mark.parametrize("k", range(2, 9))
def test_greedy_output_equals_the_baseline(setup, k):
    engine = llm(setup, spec_for(setup, k), enable_prefix_caching=True)
    outputs = engine.generate(PROMPTS + PROMPTS[:2], GREEDY)
    assert [o.token_ids for o in outputs] == setup[3] + setup[3][:2]
    assert engine.metrics.num_draft_tokens > 0 and engine.metrics.num_cached_tokens > 0


@pytest.mark.parametrize("options", [
    {"anchor_first": False, "dspark_anchor_sampling": False},
    {"dspark_draft_topk": 2},
    {"enable_adaptive_verification": True},
    {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5},
])
def test_options_keep_the_output(setup, options):
    options = dict(options)
    anchor_first = options.pop("anchor_first", True)
    engine = llm(setup, spec_for(setup, 5, anchor_first, **options))
    assert [o.token_ids for o in engine.generate(PROMPTS, GREEDY)] == setup[3]


def test_confidences_decide_how_many_drafts_are_verified(setup):
    """With the confidence head's bias pushed down, the threshold verifies nothing; pushed up,
    everything (the drafts themselves are unchanged)."""
    root = setup[0]
    counts = {}
    for name, bias in (("low", -30.0), ("high", 30.0)):
        path = root / f"confidence-{name}"
        shutil.copytree(setup[2][True], path, dirs_exist_ok=True)
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(path / "model.safetensors"))
        tensors["confidence_hidden.bias"] = torch.full_like(tensors["confidence_hidden.bias"], bias)
        save_file(tensors, str(path / "model.safetensors"))
        engine = llm(setup, {"method": "dspark", "model": str(path), "num_speculative_tokens": 4,
                             "enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5})
        assert [o.token_ids for o in engine.generate(PROMPTS, GREEDY)] == setup[3]
        counts[name] = engine.metrics.num_draft_tokens
    assert counts["low"] == 0 and counts["high"] > 0


def test_a_checkpoint_without_a_markov_head_is_refused(setup, tmp_path):
    root = setup[0]
    path = tmp_path / "no-markov"
    shutil.copytree(setup[2][True], path)
    config = json.loads((path / "config.json").read_text())
    config.pop("markov_rank")
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpeculativeConfigError, match="Markov head"):
        SpeculativeConfig.from_dict({"method": "dspark", "model": str(path)},
                                    target_model_config=ModelConfig(model=str(root / "target")))


def test_layout_mismatch_is_one_line_at_start_up(setup):
    root = setup[0]
    for anchor_first in (True, False):
        with pytest.raises(SpeculativeConfigError) as info:
            SpeculativeConfig.from_dict({"method": "dspark", "model": setup[2][anchor_first],
                                         "dspark_anchor_sampling": not anchor_first},
                                        target_model_config=ModelConfig(model=str(root / "target")))
        message = str(info.value)
        assert "layout" in message and "silently ruins acceptance" in message and "\n" not in message


@pytest.mark.parametrize("options", [{}, {"enable_adaptive_verification": True},
                                     {"enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5},
                                     {"dspark_draft_topk": 3}, {"xpress_topc": 2}])
def test_sampled_output_follows_the_target_distribution(tmp_path, options):
    chi_square_of_two_tokens(tmp_path, {"method": "dspark", **options}, build=strong_heads, markov_rank=4)


def test_a_recorded_training_vocabulary_restricts_the_drafts(setup, tmp_path):
    """A drafter trained with ``--train-vocab`` drafts its recorded ids only (the Markov head's
    bias cannot lift an id outside them), and greedy output stays the baseline's."""
    from specpath_drafting.testing import check_every_proposal, make_engine, masked_head, resolve, with_train_vocab

    root, target, drafters, baseline = setup
    keep = list(range(0, 64, 2))
    path = with_train_vocab(drafters[True], tmp_path / "restricted", keep)
    engine = make_engine(target, resolve({"method": "dspark", "model": str(path), "num_speculative_tokens": 4, "draft_length_policy": "fixed"},
                                         root / "target"))
    speculator = engine.runner.speculator
    drafter = speculator.drafter
    full = masked_head(target.lm_head_logits, keep)

    def want(r, n):
        hidden = reference_block(drafter, target, r.token_ids, speculator.last_block_width)[:n]
        base, prev, out = full(drafter.norm(hidden)), r.token_ids[-1], []
        for j in range(n):
            prev = int((base[j] + drafter.markov_bias(torch.tensor(prev))).argmax())
            out.append(prev)
        return out

    checked = check_every_proposal(speculator, want)
    requests, _ = engine.generate(PROMPTS, GREEDY)
    assert [r.output_token_ids for r in requests] == baseline
    assert len(checked) > 10


def test_the_walk_over_the_kept_ids_drafts_what_the_whole_vocabulary_walk_drafts(setup, tmp_path):
    """With a recorded training vocabulary the Markov walks run over the kept ids alone; greedy,
    seeded sampled and unseeded sampled requests get the drafts (and confidences) the walks over
    the whole vocabulary give them, proposal by proposal."""
    from specpath_drafting.testing import make_engine, resolve, with_train_vocab
    from specpath_engine.request import SamplingParams

    root, target, drafters, _ = setup
    path = with_train_vocab(drafters[True], tmp_path / "restricted", list(range(0, 64, 2)))
    spec = resolve({"method": "dspark", "model": str(path), "num_speculative_tokens": 4,
                    "draft_length_policy": "fixed"}, root / "target")
    params = [SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True),
              SamplingParams(temperature=0.8, seed=5, max_tokens=24, ignore_eos=True),
              SamplingParams(temperature=0.8, max_tokens=24, ignore_eos=True)]
    runs = []
    for whole in (False, True):
        speculator = (engine := make_engine(target, spec)).runner.speculator
        if whole:
            speculator.drafter.kept_logits = lambda hidden: None  # the whole-vocabulary walk
        proposals, propose = [], speculator.propose

        def recording(batch, propose=propose, proposals=proposals):
            out = propose(batch)
            proposals.append((out.token_ids.tolist(), out.confidences.tolist()))
            return out

        speculator.propose = recording
        torch.manual_seed(0)
        engine.generate(PROMPTS[:3], params)
        runs.append(proposals)
    assert len(runs[0]) > 10 and runs[0] == runs[1]


def test_a_smaller_budget_runs_a_block_as_wide_as_it(setup):
    """A step whose requests may keep at most b < K drafts runs a block b wide (one draft a
    request at batch 8: 8 rows, not 32): each request's drafts are those of a from-scratch block of
    b positions, greedy (the same batch proposed again: the ingest and the block are idempotent)."""
    import attrs

    from specpath_drafting.testing import make_engine, resolve

    root, target, drafters, _ = setup
    engine = make_engine(target, resolve(spec_for(setup, 4, draft_length_policy="fixed"), root / "target"))
    speculator = engine.runner.speculator
    drafter = speculator.drafter
    propose, checked = speculator.propose, []

    def checking(batch):
        whole = propose(batch)
        for b in range(1, 4):
            fewer = attrs.evolve(batch, requests=tuple(attrs.evolve(r, max_draft_tokens=min(b, r.max_draft_tokens))
                                                        for r in batch.requests))
            small = propose(fewer)
            assert speculator.last_block_width == max(r.max_draft_tokens for r in fewer.requests)
            start = 0
            for r, n, m in zip(batch.requests, whole.num_draft_tokens, small.num_draft_tokens):
                assert m == min(b, n)
                if m:
                    want = markov_drafts(drafter, reference_block(drafter, target, r.token_ids,
                                                                  speculator.last_block_width)[:m], r.token_ids[-1])
                    assert small.token_ids[start:start + m].tolist() == want
                start += m
                checked.append(m)
        return whole

    speculator.propose = checking
    engine.generate(PROMPTS[:3], [greedy_params(16)] * 3)
    assert sum(checked) > 30


def test_bf16_drafting_with_the_packed_drafter_matches_the_unpacked_one(setup, monkeypatch):
    from specpath_drafting.testing import packed_drafting_matches_unpacked

    packed_drafting_matches_unpacked(setup, spec_for(setup, 4), monkeypatch)


@pytest.mark.parametrize("method", ["int8", "int4"])
def test_a_quantized_drafter_keeps_the_output(setup, method):
    from specpath_drafting.testing import quantized_drafting_keeps_the_output

    quantized_drafting_keeps_the_output(setup, spec_for(setup, 4), method)


@pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))
@pytest.mark.parametrize("anchor_sampling", [True, False])
def test_the_one_call_native_step_gives_the_per_op_steps_drafts_and_kv(tmp_path, anchor_sampling):
    """bf16 on a CPU with the native kernels: DSpark's steps take the block drafters' one-call
    ingest and block pass (both layouts: [anchor, K-1 masks] and [anchor, K masks]) and draft
    what the per-op path drafts, with its context KV, bit for bit, four requests at once."""
    from specpath_drafting.block.testing import native_step_matches_per_op

    assert native_step_matches_per_op(tmp_path, "dspark", max_num_seqs=4, build=strong_heads, markov_rank=8,
                                      anchor_sampling=anchor_sampling) > 4
