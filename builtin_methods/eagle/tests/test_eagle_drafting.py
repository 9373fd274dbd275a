"""The EAGLE-1 speculator in the reference engine: drafts equal a from-scratch computation
(so the drafter's KV and its rollback are right), greedy output equals the baseline for
K 1..8 with prefix caching on and off, sampled output follows the target's distribution,
the head options (fp8 head, sharded argmax) keep the output, and extract_hidden_states
returns the target's states."""

import pytest
import torch

from specpath.engine.llm import LLM
from specpath.engine.request import SamplingParams
from specpath_drafting.numerics import sharded_argmax
from specpath_drafting.testing import (
    TINY_PROMPTS,
    baseline_tokens,
    check_every_proposal,
    greedy,
    make_engine,
    random_head,
    reference_drafts,
    resolve,
    tiny_llm,
    tiny_target,
)
from specpath_eagle.head import EagleHead

PROMPTS = TINY_PROMPTS
GREEDY = greedy()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("eagle")
    target = tiny_target(root / "target", num_layers=3)
    head = random_head(EagleHead, target, root / "head", seed=3)
    return root, target, head, baseline_tokens(root / "target")


def spec_for(setup, k, **extra):
    root, _, head, _ = setup
    return {"method": "eagle", "model": str(head), "num_speculative_tokens": k, **extra}


def llm(setup, spec, **options):
    return tiny_llm(setup[0] / "target", spec, **options)


@pytest.mark.parametrize("num_blocks", [None, 14])  # 14 blocks of 8: requests get preempted and recomputed
def test_drafts_equal_a_from_scratch_computation(setup, num_blocks):
    root, target, _, baseline = setup
    spec = resolve(spec_for(setup, 4), root / "target")
    engine = make_engine(target, spec, prefix_caching=True, max_num_batched_tokens=24, block_size=8,
                         num_blocks=num_blocks, max_model_len=80)
    speculator = engine.runner.speculator
    checked = check_every_proposal(speculator, lambda r, n: reference_drafts(
        speculator.head, target, r.token_ids, speculator.hidden_state_layers, n))
    requests, _ = engine.generate(PROMPTS + PROMPTS[:2], GREEDY)
    assert [r.output_token_ids for r in requests] == baseline + baseline[:2]
    assert len(checked) > 20
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


@pytest.mark.parametrize("options", [{"draft_lm_head_quantization": "fp8"}, {"use_local_argmax_reduction": True,
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


def test_sharded_argmax_equals_argmax_with_ties():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randint(0, 5, (200, 37), generator=gen).double()  # many ties
    for shards in (1, 2, 3, 4, 8, 37, 64):
        assert torch.equal(sharded_argmax(logits, shards), logits.argmax(-1))


def test_sampled_output_follows_the_target_distribution(tmp_path):
    """Random drafts at temperature 1: the (2nd, 3rd) output tokens, which pass through
    speculative verification, must follow the target's exact joint distribution."""
    vocab = 6
    target = tiny_target(tmp_path / "t", vocab_size=vocab, num_layers=2, hidden_size=16)
    with torch.no_grad():
        target.lm_head.weight.mul_(0.25)  # back to spread-out distributions
    target.save_pretrained(tmp_path / "t")
    head = random_head(EagleHead, target, tmp_path / "h", seed=5)
    prompt = [1, 2, 3]
    engine = LLM(str(tmp_path / "t"), {"method": "eagle", "model": str(head), "num_speculative_tokens": 3,
                                       "draft_sample_method": "random"},
                 num_threads=1, max_num_seqs=64, seed=11)
    n = 1200
    outputs = engine.generate([prompt] * n, SamplingParams(temperature=1.0, max_tokens=3, ignore_eos=True))
    assert engine.metrics.num_draft_tokens > 0
    counts = torch.zeros(vocab, vocab, dtype=torch.float64)
    for o in outputs:
        counts[o.token_ids[1], o.token_ids[2]] += 1
    target = target.double()
    with torch.no_grad():
        p1 = torch.softmax(target(torch.tensor(prompt), torch.arange(3)).logits[-1], -1)  # [t1]
        one = torch.tensor([prompt + [a] for a in range(vocab)])
        p2 = torch.softmax(target.forward_batch(one)[:, 3].double(), -1)  # [t1, t2]
        two = torch.tensor([prompt + [a, b] for a in range(vocab) for b in range(vocab)])
        p3 = torch.softmax(target.forward_batch(two)[:, 4].double(), -1).view(vocab, vocab, vocab)  # [t1, t2, t3]
    joint = torch.einsum("a,ab,abc->bc", p1.double(), p2, p3)  # P(t2, t3)
    expected = joint * n
    keep = expected >= 5
    chi2 = float((((counts - expected) ** 2) / expected)[keep].sum())
    dof = int(keep.sum()) - 1
    # 0.999 quantile of chi-square via the Wilson-Hilferty approximation
    critical = dof * (1 - 2 / (9 * dof) + 3.09 * (2 / (9 * dof)) ** 0.5) ** 3
    assert chi2 < critical, (chi2, critical, dof)


def test_extract_hidden_states_returns_the_target_states(setup):
    root, target, _, _ = setup
    spec = resolve({"method": "extract_hidden_states", "eagle_aux_hidden_state_layer_ids": [0, 2]}, root / "target")
    engine = make_engine(target, spec, max_num_batched_tokens=16)
    requests, metrics = engine.generate(PROMPTS[:2], SamplingParams(max_tokens=6, ignore_eos=True))
    assert metrics.num_draft_tokens == 0
    speculator = engine.runner.speculator
    for r in requests:
        got = speculator.pop_hidden_states(r.req_id)
        ids = (list(r.prompt_token_ids) + list(r.output_token_ids))[: got.shape[0]]
        want = target(torch.tensor(ids), torch.arange(len(ids)), hidden_layers=(0, 2)).hidden_states
        assert got.shape[0] >= len(r.prompt_token_ids)
        assert torch.allclose(got, want, atol=1e-9)
