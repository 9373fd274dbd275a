"""Lossless modes emit tokens distributed exactly as the target: the first emitted token and
emitted pairs, over a context-dependent (Markov) target and drafter, pass Pearson's chi-square.

Seeds are fixed, and each check fails only below p = 1e-6, so a correct sampler would fail a
fresh seed far more rarely than 1e-4 per test run; a biased one (no residual, no bonus, wrong
ratio) fails by orders of magnitude.
"""

import pytest
import torch
from _sample_helpers import chi_square_pvalue

from specpath_engine.sample import VocabMapping, rejection_sample, target_probs

ALPHA = 1e-6
N = 20_000
K = 3


def markov(vocab: int, seed: int, sharpness: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(vocab, vocab, generator=g) * sharpness, -1)


def speculative_pairs(target_logp, draft_q, *, method, one_hot, temperature=1.0, top_k=None, seed=0, mapping=None):
    """Emit two tokens after context token 0 for N independent requests, running a second
    verification round for requests whose first round emitted one token. ``draft_q`` is a
    Markov chain over the target vocabulary, or, with ``mapping`` (TLI), one distribution over
    the drafter's own vocabulary."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)

    def step(prev):
        n = prev.numel()
        x, drafts, q_rows, prev_rows = prev, [], [], []
        for _ in range(K):
            prev_rows.append(x)
            q = draft_q[x] if mapping is None else draft_q.expand(n, -1)
            q_rows.append(q)
            d = torch.multinomial(q, 1, generator=g).squeeze(1)
            drafts.append(d)
            x = d if mapping is None else mapping.draft_ids_to_target(d)
        drafts = torch.stack(drafts, 1).reshape(-1)
        prev_rows = torch.stack(prev_rows, 1).reshape(-1)
        temps = torch.full((n,), temperature)
        ks = None if top_k is None else torch.full((n,), top_k)
        bonus = torch.multinomial(target_probs(target_logp[x], temps, ks), 1, generator=g).squeeze(1).int()
        q = None if one_hot else torch.stack(q_rows, 1).reshape(n * K, -1)
        options = {} if mapping is None else {"vocab_mapping": mapping}
        return rejection_sample(drafts.int(), [K] * n, target_logp[prev_rows], bonus, temps, draft_probs=q,
                                top_k=ks, method=method, **options).long()

    out = step(torch.zeros(N, dtype=torch.long))
    first, second = out[:, 0], out[:, 1].clone()
    short = second < 0
    second[short] = step(first[short])[:, 0]
    return first, second


def expected_pairs(target_logp, temperature, top_k):
    vocab = target_logp.shape[0]
    temps = torch.full((vocab,), temperature)
    ks = None if top_k is None else torch.full((vocab,), top_k)
    p = target_probs(target_logp, temps, ks).double()
    return p[0], p[0][:, None] * p


def check(first, second, target_logp, temperature=1.0, top_k=None):
    vocab = target_logp.shape[0]
    p_first, p_pair = expected_pairs(target_logp, temperature, top_k)
    assert chi_square_pvalue(torch.bincount(first, minlength=vocab), p_first) > ALPHA
    pairs = torch.bincount(first * vocab + second, minlength=vocab * vocab)
    assert chi_square_pvalue(pairs, p_pair) > ALPHA


@pytest.mark.parametrize("method", ["standard", "block"])
@pytest.mark.parametrize("one_hot", [False, True])
def test_lossless_pairs(method, one_hot):
    target_logp = markov(4, 1, 1.5).log()
    draft_q = markov(4, 2, 1.0)
    first, second = speculative_pairs(target_logp, draft_q, method=method, one_hot=one_hot, seed=3)
    check(first, second, target_logp)


@pytest.mark.parametrize("method", ["standard", "block"])
def test_lossless_with_temperature_and_top_k(method):
    target_logp = markov(5, 4, 1.5).log()
    draft_q = markov(5, 5, 1.0)
    first, second = speculative_pairs(target_logp, draft_q, method=method, one_hot=False,
                                      temperature=0.7, top_k=3, seed=6)
    check(first, second, target_logp, 0.7, 3)


def test_statistical_check_has_power():
    """The same check rejects a sampler that skips the residual (emits the draft's argmax)."""
    target_logp = markov(4, 1, 1.5).log()
    p_first, _ = expected_pairs(target_logp, 1.0, None)
    biased = torch.multinomial(markov(4, 2, 1.0)[0], N, replacement=True, generator=torch.Generator().manual_seed(0))
    assert chi_square_pvalue(torch.bincount(biased, minlength=4), p_first) < ALPHA


@pytest.mark.parametrize("method", ["standard", "block"])
def test_tli_is_lossless(method):
    """A drafter with its own (SentencePiece-style) vocabulary sharing 3 of 5 tokens with the
    byte-level target; drafts are verified in the target vocabulary."""
    mapping = VocabMapping.from_vocabs(["▁b", "x", "a", "▁d", "y"], ["a", "Ġb", "c", "Ġd", "e"])
    target_logp = markov(5, 7, 1.2).log()
    draft_logits = mapping.mask_draft_logits(torch.randn(5, generator=torch.Generator().manual_seed(8)))
    first, second = speculative_pairs(target_logp, torch.softmax(draft_logits, -1), method=method,
                                      one_hot=False, seed=9, mapping=mapping)
    check(first, second, target_logp)
