"""``specpath_drafting.coupling``: seeded rows race on the request's noise (indexed through a
reduced vocabulary), a drafter equal to the target drafts exactly the target's race winner
(hypothesis), and the other rows keep their greedy or sampled rule."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath.speculator import DraftRequest
from specpath_drafting import coupling
from specpath_engine.sample.noise import SeededNoise, gumbel_noise
from specpath_engine.sample.race import race_tokens

V = 16


def _logits(seed: int, rows: int, vocab: int = V) -> torch.Tensor:
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * 2


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**20), st.lists(st.floats(0.2, 2.0), min_size=1, max_size=5))
def test_a_drafter_equal_to_the_target_drafts_the_target_race_winner(seed, temps):
    logits = _logits(seed, len(temps))
    noise = torch.stack([gumbel_noise(seed, 9 + i, V) for i in range(len(temps))])
    want = race_tokens(logits, torch.tensor(temps), None, None, noise)
    assert torch.equal(coupling.race(logits, temps, noise), want)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**20), st.floats(0.2, 2.0), st.sets(st.integers(0, V - 1), min_size=1, max_size=V))
def test_a_reduced_vocabulary_races_on_the_noise_of_its_target_ids(seed, t, kept):
    """Drafting over the kept ids is racing over the whole vocabulary with the others at -inf."""
    ids = torch.tensor(sorted(kept))
    full = _logits(seed, 1)
    noise = gumbel_noise(seed, 3, V)[None]
    reduced = coupling.race(full[:, ids], [t], noise, vocab_ids=ids)
    masked = torch.full_like(full, float("-inf"))
    masked[:, ids] = full[:, ids]
    assert int(ids[reduced[0]]) == int(coupling.race(masked, [t], noise)[0])


def test_choose_races_seeded_rows_and_keeps_the_others_rules():
    logits = _logits(1, 4)
    temps = [0.8, 0.0, 1.2, 0.9]
    gens = [None, None, torch.Generator().manual_seed(5), None]
    g0 = gumbel_noise(4, 0, V)
    g3 = gumbel_noise(4, 1, V)
    ids, probs = coupling.choose(logits, temps, gens, [g0, None, None, g3], sample=True)
    assert int(ids[0]) == int((logits[0] / 0.8 + g0).argmax()) and int(ids[3]) == int((logits[3] / 0.9 + g3).argmax())
    assert int(ids[1]) == int(logits[1].argmax())
    want = torch.softmax(logits[2] / 1.2, -1)
    torch.testing.assert_close(probs[2], want)
    assert int(ids[2]) == int(torch.multinomial(want, 1, generator=torch.Generator().manual_seed(5))[0])
    for row in (0, 1, 3):  # verified as one-hot drafts
        assert torch.equal(probs[row], torch.nn.functional.one_hot(ids[row], V).float())
    ids, probs = coupling.choose(logits, temps, gens, [g0, None, None, g3], sample=False)
    assert probs is None and int(ids[2]) == int(logits[2].argmax())


def test_request_noise_reads_the_draft_positions_of_seeded_sampling_requests():
    noise = SeededNoise(seed=21, vocab_size=V)
    seeded = DraftRequest(req_id="a", token_ids=[1, 2, 3], num_new_positions=1, max_draft_tokens=2, temperature=0.7,
                          noise=noise)
    greedy = DraftRequest(req_id="b", token_ids=[1], num_new_positions=0, max_draft_tokens=2, noise=noise)
    plain = DraftRequest(req_id="c", token_ids=[1], num_new_positions=0, max_draft_tokens=2, temperature=0.7)
    got, none_greedy, none_plain = coupling.request_noise([seeded, greedy, plain], 2)
    assert none_greedy is None and none_plain is None
    assert torch.equal(got, torch.stack([gumbel_noise(21, 3, V), gumbel_noise(21, 4, V)]))
