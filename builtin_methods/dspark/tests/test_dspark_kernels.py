"""The Markov-head sampling kernel against its torch reference (Triton interpreter on CPU), the
reference against a direct, position-by-position computation of DSpark's definition, and the
walks over a reduced draft vocabulary against the walks over the whole one."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_dspark.kernels import markov_sample
from specpath_dspark.reference import markov_sample_reference, topk_floor


def inputs(num_reqs, k, vocab, rank, topk, greedy_rows, seed):
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(num_reqs, k, vocab, generator=gen) * 2
    w1 = torch.randn(vocab, rank, generator=gen)
    w2 = torch.randn(rank, vocab, generator=gen) * 0.5
    anchors = torch.randint(0, vocab, (num_reqs,), generator=gen)
    conf_base = torch.randn(num_reqs, k, generator=gen)
    conf_w = torch.randn(rank, generator=gen)
    conf_temp = torch.rand(k, generator=gen) + 0.5
    inv_t = torch.rand(num_reqs, generator=gen) + 0.5
    inv_t[list(greedy_rows)] = 0.0
    uniforms = torch.rand(num_reqs, k, generator=gen)
    return base, topk_floor(base, topk), w1, w2, anchors, conf_base, conf_w, conf_temp, inv_t, uniforms


@pytest.mark.parametrize("num_reqs,k,vocab,rank,topk,greedy_rows", [
    (1, 1, 8, 4, None, ()), (3, 4, 37, 5, None, (1,)), (2, 6, 64, 16, 5, (0,)), (4, 3, 30, 3, 1, ())])
def test_kernel_equals_reference(num_reqs, k, vocab, rank, topk, greedy_rows):
    args = inputs(num_reqs, k, vocab, rank, topk, greedy_rows, seed=num_reqs * 10 + k)
    want = markov_sample_reference(*args)
    got = markov_sample(*args)
    assert torch.equal(want[0], got[0])
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[2], want[2], rtol=1e-5, atol=1e-6)


def test_reference_follows_the_definition():
    base, floor, w1, w2, anchors, cb, cw, ct, inv_t, u = inputs(2, 5, 20, 4, 6, (1,), seed=3)
    tokens, probs, conf = markov_sample_reference(base, floor, w1, w2, anchors, cb, cw, ct, inv_t, u)
    for r in range(2):
        prev = int(anchors[r])
        for j in range(5):
            logits = base[r, j] + w1[prev] @ w2
            top = base[r, j].topk(6).indices
            masked = torch.full_like(logits, float("-inf"))
            masked[top] = logits[top]
            t = 1.0 if inv_t[r] == 0 else float(inv_t[r])
            q = torch.softmax(masked * t, -1)
            torch.testing.assert_close(probs[r, j], q)
            assert int(tokens[r, j]) in top.tolist()
            if inv_t[r] == 0:
                assert int(tokens[r, j]) == int(masked.argmax())
            else:
                assert float(q[: int(tokens[r, j])].sum()) <= float(u[r, j]) < float(q[: int(tokens[r, j]) + 1].sum()) + 1e-6
            want_c = torch.sigmoid((cb[r, j] + w1[prev] @ cw) / ct[j])
            torch.testing.assert_close(conf[r, j], want_c)
            prev = int(tokens[r, j])


def test_race_follows_the_definition():
    """``markov_race``: position j's draft is ``argmax(l_j * inv_t + G_j)`` over the Markov-biased,
    floored logits after the previous draft, and the confidences follow the drafts it made."""
    from specpath_dspark.reference import markov_race

    base, floor, w1, w2, anchors, cb, cw, ct, inv_t, _ = inputs(3, 4, 20, 4, 6, (), seed=5)
    gumbel = -torch.empty(3, 4, 20).exponential_(generator=torch.Generator().manual_seed(2)).log()
    tokens, conf = markov_race(base, floor, w1, w2, anchors, cb, cw, ct, inv_t, gumbel)
    for r in range(3):
        prev = int(anchors[r])
        for j in range(4):
            logits = base[r, j] + w1[prev] @ w2
            logits = logits.masked_fill(base[r, j] < floor[r, j], float("-inf"))
            want = int((logits * inv_t[r] + gumbel[r, j]).argmax())
            assert int(tokens[r, j]) == want
            torch.testing.assert_close(conf[r, j], torch.sigmoid((cb[r, j] + cw @ w1[prev]) / ct[j]))
            prev = want


@pytest.mark.parametrize("num_reqs,k,vocab,rank,topk", [(1, 1, 8, 4, None), (3, 4, 37, 5, None), (2, 6, 64, 16, 5),
                                                         (4, 3, 30, 3, 1)])
def test_the_greedy_walk_is_the_references_greedy_rows(num_reqs, k, vocab, rank, topk):
    """``markov_greedy``: the tokens and confidences of the reference's greedy rows, bit for bit,
    with float32 or bfloat16 weights, and without a floor where there is no top-k."""
    from specpath_dspark.reference import markov_greedy

    base, floor, w1, w2, anchors, cb, cw, ct, inv_t, u = inputs(num_reqs, k, vocab, rank, topk,
                                                                 range(num_reqs), seed=k * 7 + vocab)
    for dtype in (torch.float32, torch.bfloat16):
        w1d, w2d, cwd = w1.to(dtype), w2.to(dtype), cw.to(dtype)
        want_tokens, _, want_conf = markov_sample_reference(base, floor, w1d, w2d, anchors, cb, cwd, ct, inv_t, u)
        tokens, conf = markov_greedy(base, None if topk is None else floor, w1d.float(), w2d.float(), anchors, cb,
                                     cwd.float(), ct)
        assert torch.equal(tokens, want_tokens) and torch.equal(conf, want_conf)


@settings(max_examples=25, deadline=None)
@given(num_reqs=st.integers(1, 3), k=st.integers(1, 5), vocab=st.integers(8, 80), kept=st.integers(1, 80),
       topk=st.sampled_from([None, 1, 3, 200]), seed=st.integers(0, 2**16))
def test_walks_over_the_kept_ids_draft_what_the_whole_vocabulary_drafts(num_reqs, k, vocab, kept, topk, seed):
    """A reduced draft vocabulary: the greedy and raced walks over the kept ids' logits (``ids``)
    give the tokens and confidences of the walks over the whole vocabulary, where every other
    logit is ``-inf``, bit for bit (top-k floors included, the kept ids' noise in the race)."""
    from specpath_dspark.reference import markov_greedy, markov_race

    base, _, w1, w2, anchors, cb, cw, ct, inv_t, _ = inputs(num_reqs, k, vocab, 4, None, (), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randperm(vocab, generator=gen)[:min(kept, vocab)].sort().values
    whole = torch.full_like(base, float("-inf"))
    whole[..., ids] = base[..., ids]
    compact = base[..., ids].contiguous()
    gumbel = -torch.empty(num_reqs, k, vocab).exponential_(generator=gen).log()
    floors = [None if topk is None else topk_floor(b, topk) for b in (whole, compact)]
    want = markov_greedy(whole, floors[0], w1, w2, anchors, cb, cw, ct)
    got = markov_greedy(compact, floors[1], w1, w2[:, ids].contiguous(), anchors, cb, cw, ct, ids=ids)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    want = markov_race(whole, floors[0], w1, w2, anchors, cb, cw, ct, inv_t, gumbel)
    got = markov_race(compact, floors[1], w1, w2[:, ids].contiguous(), anchors, cb, cw, ct, inv_t,
                      gumbel[..., ids], ids=ids)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
