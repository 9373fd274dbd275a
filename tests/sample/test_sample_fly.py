"""FLy: deferred-window acceptance, checked against a direct transcription of the rule."""

import warnings

import pytest
import torch
from _sample_helpers import layout, random_step

from specpath_engine.sample import num_accepted, reference, rejection_sample

pytestmark = pytest.mark.filterwarnings("ignore:rejection_sample.method='fly'")


def top_entropy(probs, k=3):
    top = probs.topk(min(k, probs.shape[-1])).values
    return -(torch.where(top > 0, top * top.clamp_min(1e-38).log(), torch.zeros_like(top))).sum(-1)


def naive_fly(drafts, counts, probs, q, uniforms, greedy, window, threshold=0.3):
    """Per request, left to right, as FLy states it."""
    kept, start = [], 0
    for r, k in enumerate(counts):
        seg = range(start, start + k)
        w = window[r]

        def native(t):
            x = int(drafts[t])
            if greedy[r]:
                return x == int(probs[t].argmax())
            qx = 1.0 if q is None else float(q[t, x])
            return float(uniforms[t]) * qx < float(probs[t, x])

        n = 0
        for j, t in enumerate(seg):
            x = int(drafts[t])
            if native(t):
                n += 1
                continue
            qx = 1.0 if q is None else float(q[t, x])
            if (float(top_entropy(probs[t])) >= threshold and w >= 1 and j + w <= k - 1
                    and float(probs[t, x]) > 0 and (greedy[r] or qx > 0)
                    and all(native(t + s) for s in range(1, w + 1))):
                n += 1
                continue
            break
        kept.append(n)
        start += k
    return kept


@pytest.mark.parametrize("seed", range(12))
def test_reference_matches_the_rule(seed):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, 9, (6,), generator=g).tolist()
    drafts, logits, _, q = random_step(counts, 5, seed, match=0.6, draft_probs=seed % 2 == 0)
    probs = torch.softmax(logits * 0.3, -1)  # flat enough that many positions pass the gate
    uniforms = torch.rand(sum(counts), generator=g)
    greedy = (torch.rand(6, generator=g) < 0.5).tolist()
    window = [int(w) for w in torch.randint(0, 4, (6,), generator=g)]
    got = reference.accept_fly(drafts, layout(counts), probs.argmax(-1), probs, q, uniforms,
                               torch.tensor(greedy), top_entropy(probs) >= 0.3, torch.tensor(window))
    assert got.tolist() == naive_fly(drafts, counts, probs, q, uniforms, greedy, window)


def test_greedy_default_window_is_min_6_k_minus_1():
    # K = 3 -> window 2: a mismatch at position 0 followed by two matches is kept; the same
    # mismatch at position 1 cannot be checked by a full window and is rejected.
    logits = torch.zeros(3, 4)
    logits[:, 0] = 0.2  # argmax 0, high entropy everywhere
    out = rejection_sample(torch.tensor([1, 0, 0], dtype=torch.int32), [3], logits, torch.tensor([3], dtype=torch.int32),
                           torch.zeros(1), method="fly")
    assert out.tolist() == [[1, 0, 0, 3]]
    out = rejection_sample(torch.tensor([0, 1, 0], dtype=torch.int32), [3], logits, torch.tensor([3], dtype=torch.int32),
                           torch.zeros(1), method="fly")
    assert out.tolist() == [[0, 0, -1, -1]]
    sharp = logits.clone()
    sharp[:, 0] = 20.0  # low entropy: no deferral
    out = rejection_sample(torch.tensor([1, 0, 0], dtype=torch.int32), [3], sharp, torch.tensor([3], dtype=torch.int32),
                           torch.zeros(1), method="fly")
    assert out.tolist() == [[0, -1, -1, -1]]


@pytest.mark.parametrize("seed", range(3))
def test_never_keeps_fewer_than_standard(seed):
    counts = [7] * 400
    drafts, logits, bonus, q = random_step(counts, 6, seed, match=0.5)
    logits = logits * 0.3
    temperature = torch.tensor([0.0, 1.0] * 200)
    seeds = list(range(400))
    std = num_accepted(rejection_sample(drafts, counts, logits, bonus, temperature, draft_probs=q, generators=seeds))
    fly = num_accepted(rejection_sample(drafts, counts, logits, bonus, temperature, draft_probs=q, generators=seeds,
                                        method="fly"))
    assert bool((fly >= std).all()) and bool((fly > std).any())


def test_options_are_checked_and_lossy_warning_once():
    from specpath_engine.sample import rejection

    drafts, logits, bonus, _ = random_step([3], 5, 0)
    with pytest.raises(ValueError, match="window"):
        rejection_sample(drafts, [3], logits, bonus, torch.zeros(1), method="fly", window=0)
    with pytest.raises(ValueError, match="entropy_threshold"):
        rejection_sample(drafts, [3], logits, bonus, torch.zeros(1), method="fly", entropy_threshold=-1)
    rejection._warned_lossy.discard("fly")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            rejection_sample(drafts, [3], logits, bonus, torch.zeros(1), method="fly")
    assert sum("lossy" in str(w.message) for w in caught) == 1
