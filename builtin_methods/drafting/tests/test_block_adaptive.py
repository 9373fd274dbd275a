"""The adaptive-verification schedulers: the static threshold, the prefix scheduler's admission
order and early stop, and non-anticipation (the length chosen never depends on estimates
after it)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_drafting.block.adaptive import VerifyCost, prefix_schedule, threshold_lengths

FLAT = VerifyCost(overhead=1.0, per_token=0.0)  # verifying more tokens costs nothing
STEEP = VerifyCost(overhead=1.0, per_token=1.0)  # every token doubles the base cost


def test_threshold_keeps_the_leading_drafts_above_it():
    conf = torch.tensor([[0.9, 0.8, 0.3, 0.9], [0.2, 0.9, 0.9, 0.9], [0.9, 0.9, 0.9, 0.9]])
    assert threshold_lengths(conf, [4, 4, 2], 0.5) == [2, 0, 2]


def test_free_verification_admits_every_draft():
    conf = torch.tensor([[0.9, 0.5, 0.1], [0.3, 0.3, 0.3]])
    assert prefix_schedule(conf, [3, 2], FLAT.steps_per_second) == [3, 2]


def test_costly_verification_admits_only_likely_drafts():
    # Theta with l drafts of one request: (1 + a_1 + ... + a_l) / (2 + l)
    conf = torch.tensor([[0.99, 0.99, 0.2]])
    assert prefix_schedule(conf, [3], STEEP.steps_per_second) == [2]
    assert prefix_schedule(torch.tensor([[0.3, 0.99]]), [2], STEEP.steps_per_second) == [0]


def test_admission_follows_survival_across_requests():
    cost = VerifyCost(overhead=1.0, per_token=0.2)
    conf = torch.tensor([[0.95, 0.95, 0.95], [0.5, 0.9, 0.9]])
    # survival: [.95, .90, .86] and [.5, .45, .41]; Theta = (2 + sum a) / (1 + 0.2 * tokens) rises
    # through request 0's three drafts and request 1's first (2.355 -> 2.368), then falls (2.358): stop
    assert prefix_schedule(conf, [3, 3], cost.steps_per_second) == [3, 1]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6), st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6),
       st.floats(0.0, 0.5), st.floats(0.05, 1.0))
def test_the_choice_never_reads_estimates_after_it(prefix, tail, per_token, threshold):
    """Changing the estimates past the chosen length (which depend on drafts the verifier has
    not seen) must not change the length: the non-anticipation rule that keeps truncation lossless."""
    k = len(prefix)
    cost = VerifyCost(overhead=1.0, per_token=per_token)
    a = torch.tensor([prefix], dtype=torch.float64)
    for choose in (lambda c: prefix_schedule(c, [k], cost.steps_per_second)[0],
                   lambda c: threshold_lengths(c, [k], threshold)[0]):
        n = choose(a)
        if n + 1 < k:
            b = a.clone()
            b[0, n + 1:] = torch.tensor(tail[: k - n - 1], dtype=torch.float64)
            assert choose(b) == n
