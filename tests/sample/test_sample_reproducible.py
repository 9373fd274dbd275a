"""A seeded request emits the same tokens in every run and in every batch it shares."""

import pytest
import torch
from _sample_helpers import random_step

from specpath_engine.sample import PLACEHOLDER_TOKEN_ID, rejection_sample

pytestmark = pytest.mark.filterwarnings("ignore:rejection_sample.method=")

OPTIONS = {"standard": {}, "block": {}, "fly": {}, "synthetic": {"acceptance_length": 2.5}}


def batch_of(requests):
    """Concatenate per-request (drafts, logits, bonus, q, temperature, seed) into one call's inputs."""
    drafts = torch.cat([r[0] for r in requests])
    logits = torch.cat([r[1] for r in requests])
    bonus = torch.cat([r[2] for r in requests])
    q = torch.cat([r[3] for r in requests])
    temperature = torch.tensor([r[4] for r in requests])
    counts = [r[0].numel() for r in requests]
    generators = [torch.Generator().manual_seed(r[5]) if r[5] is not None else None for r in requests]
    return drafts, counts, logits, bonus, temperature, q, generators


def request(k, seed, temperature, gen_seed):
    drafts, logits, bonus, q = random_step([k], 30, seed, match=0.6)
    logits = logits * 0.4  # flat: plenty of rejections and corrected tokens
    return drafts, logits, bonus, q, temperature, gen_seed


def emitted(row):
    return [t for t in row.tolist() if t != PLACEHOLDER_TOKEN_ID]


@pytest.mark.parametrize("method", list(OPTIONS))
def test_seeded_request_is_batch_independent(method):
    target = request(6, 0, 1.0, 1234)
    others = [request(3, 1, 0.0, None), request(8, 2, 0.9, 7), request(0, 3, 1.0, None), request(5, 4, 1.2, None)]
    seen = []
    for batch in ([target], [others[0], target, others[1]], [others[2], others[3], others[1], target],
                  [target, others[3]]):
        drafts, counts, logits, bonus, temperature, q, generators = batch_of(batch)
        out = rejection_sample(drafts, counts, logits, bonus, temperature, draft_probs=q, generators=generators,
                               method=method, **OPTIONS[method])
        seen.append(emitted(out[next(i for i, r in enumerate(batch) if r is target)]))
    assert all(s == seen[0] for s in seen)


@pytest.mark.parametrize("method", list(OPTIONS))
def test_same_seeds_same_output_and_generators_advance(method):
    drafts, logits, bonus, q = random_step([5, 7, 2, 9], 40, 11, match=0.5)
    temperature = torch.tensor([1.0, 0.0, 0.7, 1.0])
    outs = [rejection_sample(drafts, [5, 7, 2, 9], logits * 0.4, bonus, temperature, draft_probs=q,
                             generators=[1, 2, 3, 4], method=method, **OPTIONS[method]) for _ in range(2)]
    assert torch.equal(outs[0], outs[1])
    gens = [torch.Generator().manual_seed(s) for s in (1, 2, 3, 4)]
    steps = [rejection_sample(drafts, [5, 7, 2, 9], logits * 0.4, bonus, temperature, draft_probs=q,
                              generators=gens, method=method, **OPTIONS[method]) for _ in range(4)]
    assert torch.equal(steps[0], outs[0])
    assert any(not torch.equal(steps[0], s) for s in steps[1:])  # a persistent generator moves on
