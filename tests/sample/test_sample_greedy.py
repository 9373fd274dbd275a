"""Greedy rows: keep drafts while they equal the target argmax, then emit the argmax (or the bonus);
``greedy_ids`` is that argmax."""

import pytest
import torch
from _sample_helpers import random_step
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.sample import PLACEHOLDER_TOKEN_ID, rejection_sample
from specpath_engine.sample.greedy import greedy_ids


def naive_greedy(drafts, counts, logits, bonus):
    rows, start = [], 0
    for r, k in enumerate(counts):
        row = []
        for j in range(k):
            best = int(logits[start + j].argmax())
            row.append(best)
            if int(drafts[start + j]) != best:
                break
        else:
            row.append(int(bonus[r]))
        rows.append(row)
        start += k
    return rows


def emitted(out):
    return [[t for t in row if t != PLACEHOLDER_TOKEN_ID] for row in out.tolist()]


def _cases():
    cases = []
    for seed in range(40):
        g = torch.Generator().manual_seed(seed)
        batch = int(torch.randint(1, 9, (1,), generator=g))
        counts = torch.randint(0, 17, (batch,), generator=g).tolist()
        if seed % 5 == 0:
            counts[0] = 0
        vocab = [2, 3, 7, 100, 1000][seed % 5]
        cases.append((seed, counts, vocab))
    cases += [(100, [0, 16, 3], 50_000), (101, [1, 0, 0], 50_000), (102, [0, 0], 9), (103, [16] * 4, 2)]
    return cases


@pytest.mark.parametrize("method", ["standard", "block"])
@pytest.mark.parametrize(("seed", "counts", "vocab"), _cases())
def test_greedy_rows_follow_argmax(seed, counts, vocab, method):
    drafts, logits, bonus, q = random_step(counts, vocab, seed, match=0.85)
    # The torch path takes its all-greedy shortcut; the Triton kernels (interpreted) the general one.
    backend = "triton" if seed % 4 == 1 and vocab <= 1000 else "torch"
    out = rejection_sample(drafts, counts, logits, bonus, torch.zeros(len(counts)), draft_probs=q, method=method,
                           backend=backend)
    assert out.dtype == torch.int32 and out.shape == (len(counts), max(counts) + 1)
    assert emitted(out) == naive_greedy(drafts, counts, logits, bonus)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_rows_unaffected_by_random_rows(seed):
    counts = [5, 3, 0, 8, 2, 6]
    drafts, logits, bonus, q = random_step(counts, 50, seed, match=0.8)
    temperature = torch.tensor([0.0, 1.0, 0.0, 0.8, 0.0, 1.3])
    out = rejection_sample(drafts, counts, logits, bonus, temperature, draft_probs=q, generators=list(range(6)))
    expected = naive_greedy(drafts, counts, logits, bonus)
    rows = emitted(out)
    for r in (0, 2, 4):
        assert rows[r] == expected[r]
    for r in (1, 3, 5):  # random rows: a prefix of drafts, then one more token
        assert 1 <= len(rows[r]) <= counts[r] + 1


def test_all_accepted_emits_bonus_and_zero_drafts_emit_only_bonus():
    counts = [3, 0]
    logits = torch.full((3, 5), -5.0)
    logits[torch.arange(3), torch.tensor([1, 2, 3])] = 5.0
    out = rejection_sample(torch.tensor([1, 2, 3], dtype=torch.int32), counts, logits,
                           torch.tensor([4, 0], dtype=torch.int32), torch.zeros(2))
    assert out.tolist() == [[1, 2, 3, 4], [0, -1, -1, -1]]


def test_empty_batch_and_no_drafts():
    out = rejection_sample(torch.zeros(0, dtype=torch.int32), [], torch.zeros(0, 4), torch.zeros(0, dtype=torch.int32), torch.zeros(0))
    assert out.shape == (0, 1)
    out = rejection_sample(torch.zeros(0, dtype=torch.int32), [0, 0], torch.zeros(0, 4), torch.tensor([2, 3], dtype=torch.int32), torch.ones(2))
    assert out.tolist() == [[2], [3]]


@pytest.mark.parametrize("greedy_only", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_column_wise_path_equals_full_pass(seed, greedy_only, monkeypatch):
    """Large batches on the torch path walk positions column by column; same tokens as the full pass."""
    from specpath_engine.sample import rejection

    g = torch.Generator().manual_seed(seed)
    counts = [5] * 12 if seed % 3 == 0 else torch.randint(0, 9, (12,), generator=g).tolist()
    drafts, logits, bonus, q = random_step(counts, 64, seed, match=0.7, draft_probs=seed % 2 == 0)
    logits = logits * 0.5
    temperature = torch.where(torch.rand(12, generator=g) < 0.3, 0.0, 0.9)
    if greedy_only:
        temperature = torch.zeros(12)
    options = dict(draft_probs=q, top_k=[0, 5] * 6, top_p=[1.0, 1.0, 0.8] * 4)
    outs = []
    for threshold in (0, 1 << 62):
        monkeypatch.setattr(rejection, "COLUMN_WISE_MIN_ELEMENTS", threshold)
        outs.append(rejection_sample(drafts, counts, logits, bonus, temperature, generators=list(range(12)), **options))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize(("seed", "counts", "vocab"), _cases())
def test_host_verification_of_greedy_chains_is_rejection_samples(seed, counts, vocab):
    """``accept_greedy_chains`` (the engine's batch-1 shortcut) emits what ``rejection_sample``
    does for greedy requests, from the argmax of each request's K + 1 rows."""
    from specpath_engine.sample.greedy import accept_greedy_chains

    drafts, logits, bonus, _ = random_step(counts, vocab, seed, match=0.85)
    out = rejection_sample(drafts, counts, logits, bonus, torch.zeros(len(counts)), method="standard")
    # the engine's layout: each request's draft rows, then its bonus row
    rows, start, chains = [], 0, []
    for r, k in enumerate(counts):
        rows.append(logits[start:start + k])
        rows.append(torch.nn.functional.one_hot(bonus[r].long(), vocab)[None].to(logits.dtype))
        chains.append(drafts[start:start + k].tolist())
        start += k
    assert accept_greedy_chains(chains, torch.cat(rows).argmax(-1).tolist()) == emitted(out)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.one_of(st.integers(1, 40), st.sampled_from([4095, 4096, 4097, 5000, 9216, 49152])),
       st.integers(0, 2**31 - 1), st.sampled_from(["float32", "bfloat16"]), st.booleans())
def test_greedy_ids_are_argmax_ties_inf_and_nan_included(rows, vocab, seed, dtype, nan):
    """A handful of distinct values (ties everywhere, across and within the blocks of the
    two-pass search at large vocabularies, and in a short last block), -inf and +inf, and now and
    then a NaN: the first maximum's index, as ``argmax`` has it."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randint(-3, 4, (rows, vocab), generator=g).float()
    logits[logits == -3] = float("-inf")
    logits[logits == 3] = float("inf")
    if nan:
        logits[0, int(torch.randint(0, vocab, (1,), generator=g))] = float("nan")
    logits = logits.to(getattr(torch, dtype))
    assert torch.equal(greedy_ids(logits), logits.argmax(dim=-1))
    assert torch.equal(greedy_ids(logits[0]), logits[0].argmax(dim=-1))
    assert torch.equal(greedy_ids(logits[None]), logits[None].argmax(dim=-1))


@given(st.sampled_from([4096, 4097, 5000, 49152]), st.data())
@settings(max_examples=100, deadline=None)
def test_greedy_ids_find_a_lone_maximum_or_nan_anywhere(vocab, data):
    """One maximum (or one NaN, or two equal maxima) at any ids, the short last block's included."""
    first = data.draw(st.integers(0, vocab - 1))
    second = data.draw(st.integers(0, vocab - 1))
    value = data.draw(st.sampled_from([5.0, float("inf"), float("nan")]))
    logits = torch.randn(2, vocab)
    logits[0, first] = value
    logits[1, [first, second]] = value
    assert torch.equal(greedy_ids(logits), logits.argmax(dim=-1))
