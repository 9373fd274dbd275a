"""Sampled requests: seeded reproducibility, the target distribution is kept, stop conditions."""

import pytest
import torch

from engine_helpers import VOCAB, HashSpeculator, make_engine, random_prompts
from specpath_engine.request import SamplingParams


@pytest.mark.parametrize("speculate", [False, True])
def test_seeded_request_is_reproducible_in_any_batch(model, speculate):
    prompts = random_prompts(4, seed=21, lo=3, hi=20)
    params = SamplingParams(temperature=1.0, top_p=0.9, top_k=20, max_tokens=15, seed=1234)
    others = SamplingParams(temperature=0.7, max_tokens=9)

    def run(batch, plist):
        engine = make_engine(model, speculator=HashSpeculator() if speculate else None, k=3)
        requests, _ = engine.generate(batch, plist)
        return requests[0].output_token_ids

    alone = run(prompts[:1], [params])
    assert run(prompts, [params, others, SamplingParams(max_tokens=4), others]) == alone
    assert run(prompts[:1], [params]) == alone
    assert run(prompts[:1], [SamplingParams(temperature=1.0, max_tokens=15, seed=99)]) != alone


def test_top_k_one_is_greedy(model):
    prompts = random_prompts(3, seed=4)
    engine = make_engine(model)
    greedy, _ = engine.generate(prompts, SamplingParams(max_tokens=10))
    sampled, _ = make_engine(model, speculator=HashSpeculator(), k=2).generate(
        prompts, SamplingParams(temperature=1.3, top_k=1, max_tokens=10)
    )
    assert [r.output_token_ids for r in sampled] == [r.output_token_ids for r in greedy]


@torch.inference_mode()
def test_verified_token_follows_the_target_distribution(model):
    """The second token is always decided by verifying a (bad) draft; its marginal must match the
    target's exact marginal. A verifier that accepted drafts blindly would emit only the draft."""
    prompt = [5, 9, 14]
    n = 4000
    engine = make_engine(model, speculator=HashSpeculator(fixed=0), k=1, max_num_seqs=256,
                         max_num_batched_tokens=1024)
    requests, metrics = engine.generate([prompt] * n, [SamplingParams(temperature=1.0, max_tokens=3, seed=i) for i in range(n)])
    assert metrics.num_draft_tokens == n
    second = torch.bincount(torch.tensor([r.output_token_ids[1] for r in requests]), minlength=VOCAB).double() / n
    ids = torch.tensor(prompt)
    p1 = torch.softmax(model(ids, torch.arange(3)).logits[-1], -1)
    exact = torch.zeros(VOCAB, dtype=torch.float64)
    for t1 in range(VOCAB):
        seq = torch.tensor(prompt + [t1])
        exact += p1[t1] * torch.softmax(model(seq, torch.arange(4)).logits[-1], -1)
    total_variation = 0.5 * (second - exact).abs().sum().item()
    assert total_variation < 0.06
    assert second[0].item() < exact[0].item() + 0.05


def test_stop_token_ids_and_eos_end_generation(model):
    prompts = random_prompts(2, seed=8)
    engine = make_engine(model)
    full, _ = engine.generate(prompts, SamplingParams(max_tokens=12))
    target = full[0].output_token_ids[5]
    cut = full[0].output_token_ids.index(target)
    stopped, _ = make_engine(model).generate(prompts[:1], SamplingParams(max_tokens=12, stop_token_ids=[target]))
    assert stopped[0].output_token_ids == full[0].output_token_ids[:cut]
    assert stopped[0].finish_reason == "stop"
    assert full[0].finish_reason == "length"
