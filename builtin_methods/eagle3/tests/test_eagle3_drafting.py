"""The eagle3 speculator (chain and P-EAGLE) in the reference engine, its reduced-vocabulary
maps, and the training losses on tiny shapes."""

import pytest
import torch

from specpath.engine.llm import LLM
from specpath.engine.request import SamplingParams
from specpath_drafting.heads import load_head_weights, read_head_config
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
from specpath_eagle3.head import Eagle3Head

PROMPTS = TINY_PROMPTS
GREEDY = greedy()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("eagle3")
    target = tiny_target(root / "target", num_layers=4)
    head = random_head(Eagle3Head, target, root / "head", seed=4, parallel_drafting=True, draft_vocab_size=40)
    return root, target, head, baseline_tokens(root / "target")


def spec_for(setup, k, **extra):
    return {"method": "eagle3", "model": str(setup[2]), "num_speculative_tokens": k, **extra}


@pytest.mark.parametrize("parallel", [False, True])
def test_drafts_equal_a_from_scratch_computation(setup, parallel):
    root, target, _, baseline = setup
    spec = resolve(spec_for(setup, 4, parallel_drafting=parallel), root / "target")
    engine = make_engine(target, spec, prefix_caching=True, max_num_batched_tokens=24)
    speculator = engine.runner.speculator
    assert speculator.hidden_state_layers == (0, 1, 2)  # default taps of a 4-layer target
    checked = check_every_proposal(speculator, lambda r, n: reference_drafts(
        speculator.head, target, r.token_ids, speculator.hidden_state_layers, n, parallel=parallel))
    requests, _ = engine.generate(PROMPTS, GREEDY)
    assert [r.output_token_ids for r in requests] == baseline and len(checked) > 20
    assert set(sum((r.output_token_ids for r in requests), [])) and speculator.head.t2d.sum() == 40


@pytest.mark.parametrize(("k", "parallel"), [(k, False) for k in range(1, 9)] + [(2, True), (4, True), (8, True)])
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_output_equals_the_baseline(setup, k, parallel, prefix_caching):
    root, _, _, baseline = setup
    engine = tiny_llm(root / "target", spec_for(setup, k, parallel_drafting=parallel),
                      enable_prefix_caching=prefix_caching)
    outputs = engine.generate(PROMPTS + PROMPTS[:2], GREEDY)
    assert [o.token_ids for o in outputs] == baseline + baseline[:2]
    assert engine.metrics.num_draft_tokens > 0
    if prefix_caching:
        assert engine.metrics.num_cached_tokens > 0


def test_vocab_maps(setup):
    head_dir = setup[2]
    head = load_head_weights(Eagle3Head(read_head_config(head_dir)), head_dir)
    ids = head.draft_ids
    assert ids.shape == (40,) and bool((ids[1:] > ids[:-1]).all())
    assert torch.equal(head.to_target(torch.arange(40)), ids)
    assert int(head.t2d.sum()) == 40 and bool(head.t2d[ids].all())
    probs = torch.softmax(torch.randn(3, 40), -1)
    full = head.probs_to_target(probs)
    assert full.shape == (3, 64) and torch.allclose(full.sum(-1), torch.ones(3))
    assert torch.equal(full[:, ids], probs) and float(full[:, ~head.t2d].abs().sum()) == 0.0


@pytest.mark.parametrize("parallel", [False, True])
def test_sampled_output_follows_the_target_distribution(tmp_path, parallel):
    """Random drafts from a reduced vocabulary (q = 0 outside it) at temperature 1: the
    (2nd, 3rd) output tokens follow the target's exact joint distribution."""
    vocab = 6
    target = tiny_target(tmp_path / "t", vocab_size=vocab, num_layers=3, hidden_size=16)
    with torch.no_grad():
        target.lm_head.weight.mul_(0.25)
    target.save_pretrained(tmp_path / "t")
    head = random_head(Eagle3Head, target, tmp_path / "h", seed=6, parallel_drafting=True, draft_vocab_size=4)
    prompt = [1, 2, 3]
    engine = LLM(str(tmp_path / "t"), {"method": "eagle3", "model": str(head), "num_speculative_tokens": 3,
                                       "draft_sample_method": "random", "parallel_drafting": parallel},
                 num_threads=1, max_num_seqs=64, seed=13)
    n = 1200
    outputs = engine.generate([prompt] * n, SamplingParams(temperature=1.0, max_tokens=3, ignore_eos=True))
    assert engine.metrics.num_accepted_tokens > 0
    counts = torch.zeros(vocab, vocab, dtype=torch.float64)
    for o in outputs:
        counts[o.token_ids[1], o.token_ids[2]] += 1
    t = target.double()
    with torch.no_grad():
        p1 = torch.softmax(t(torch.tensor(prompt), torch.arange(3)).logits[-1].double(), -1)
        p2 = torch.softmax(t.forward_batch(torch.tensor([prompt + [a] for a in range(vocab)]))[:, 3].double(), -1)
        two = torch.tensor([prompt + [a, b] for a in range(vocab) for b in range(vocab)])
        p3 = torch.softmax(t.forward_batch(two)[:, 4].double(), -1).view(vocab, vocab, vocab)
    expected = torch.einsum("a,ab,abc->bc", p1, p2, p3) * n
    keep = expected >= 5
    chi2 = float((((counts - expected) ** 2) / expected)[keep].sum())
    dof = int(keep.sum()) - 1
    critical = dof * (1 - 2 / (9 * dof) + 3.09 * (2 / (9 * dof)) ** 0.5) ** 3  # 0.999 quantile
    assert chi2 < critical, (chi2, critical, dof)


def test_training_losses_run_and_learn(setup):
    """A few optimiser steps of the EAGLE-3 TTT + P-EAGLE loss lower it on a fixed batch (tiny
    shapes; the EAGLE-1 loss: ``specpath_eagle``'s test_eagle_training)."""
    import torch.nn.functional as F

    from specpath_drafting.heads import HeadConfig
    from specpath_eagle3.train_eagle3 import draft_vocabulary, eagle3_loss

    _, target, _, _ = setup
    t = target.float()
    cfg = t.config.to_hf_dict()
    emb, norm, head_w = t.model.embed_tokens.weight.detach(), t.model.norm.weight.detach(), t.lm_head.weight.detach()
    tokens = torch.randint(0, 64, (4, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        taps = t(tokens, torch.arange(24), hidden_layers=(0, 1, 2, 3)).hidden_states
    h3 = Eagle3Head(HeadConfig.for_target("eagle3", cfg, draft_vocab_size=48, parallel_drafting=True),
                    embed_tokens=lambda i: F.embedding(i, emb))
    h3.set_vocab_map(draft_vocabulary(tokens, 64, 48))
    runs = [(h3, eagle3_loss(h3, norm, head_w, 1e-5, ttt_steps=3, parallel_depths=3, parallel_weight=0.5), taps)]
    for head, loss_fn, x in runs:
        opt = torch.optim.Adam(head.parameters(), lr=3e-3)
        first = None
        for _ in range(15):
            loss, info = loss_fn(tokens, x)
            first = loss.item() if first is None else first
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert loss.item() < first, (type(head).__name__, first, loss.item())
    assert {"acc0", "acc2", "par1", "par2"} <= set(info)
