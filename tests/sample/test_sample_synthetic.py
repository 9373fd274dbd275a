"""Synthetic verification: schedules, conditional rates, and the mean length it reproduces."""

import math
import warnings

import pytest
import torch
from _sample_helpers import random_step

from specpath_engine.sample import num_accepted, rejection_sample
from specpath_engine.sample.synthetic import acceptance_length_to_rates, check_rates, conditional_rates

pytestmark = pytest.mark.filterwarnings("ignore:rejection_sample.method='synthetic'")


@pytest.mark.parametrize(("length", "k", "rates"), [
    (2.6, 3, [1.0, 0.6, 0.0]), (3.5, 4, [1.0, 1.0, 0.5, 0.0]), (2.0, 3, [1.0, 0.0, 0.0]),
    (1.0, 3, [0.0, 0.0, 0.0]), (4.0, 3, [1.0, 1.0, 1.0]),
])
def test_minimum_variance_schedule(length, k, rates):
    assert acceptance_length_to_rates(length, k) == pytest.approx(rates)


def test_conditional_rates():
    assert conditional_rates([1.0, 0.6, 0.0]) == pytest.approx([1.0, 0.6, 0.0])
    assert conditional_rates([0.8, 0.4, 0.1]) == pytest.approx([0.8, 0.5, 0.25])
    assert conditional_rates([0.5, 0.0, 0.0]) == [0.5, 0.0, 0.0]


def _run(counts, temperature, **options):
    drafts, logits, bonus, _ = random_step(counts, 16, 0)
    out = rejection_sample(drafts, counts, logits, bonus, temperature, method="synthetic", **options)
    return out, logits


@pytest.mark.parametrize("length", [1.0, 2.6, 3.5, 5.0])
def test_reproduces_mean_length_with_minimum_variance(length):
    n, k = 20_000, 4
    torch.manual_seed(1)
    out, _ = _run([k] * n, torch.ones(n), acceptance_length=length)
    emitted = (num_accepted(out) + 1).double()
    whole = math.floor(length - 1)
    assert set(emitted.long().unique().tolist()) <= {whole + 1, whole + 2}
    error = max(emitted.std().item(), 1e-9) / math.sqrt(n)
    assert abs(emitted.mean().item() - length) <= 5 * error + 1e-12


def test_reproduces_unconditional_rates():
    n, rates = 20_000, [0.9, 0.6, 0.3, 0.1]
    torch.manual_seed(2)
    out, _ = _run([4] * n, torch.zeros(n), acceptance_rates=rates)
    accepted = num_accepted(out)
    for i, a in enumerate(rates):
        observed = (accepted > i).double().mean().item()
        assert abs(observed - a) < 5 * math.sqrt(a * (1 - a) / n)


def test_rejection_emits_the_targets_own_token():
    counts = [6] * 300
    torch.manual_seed(3)
    out, logits = _run(counts, torch.zeros(300), acceptance_length=3.0)
    accepted = num_accepted(out)
    for r in range(300):
        a = int(accepted[r])
        assert int(out[r, a]) == int(logits[r * 6 + a].argmax())


def test_options_are_checked():
    with pytest.raises(ValueError, match="exactly one"):
        _run([2], torch.ones(1))
    with pytest.raises(ValueError, match="exactly one"):
        _run([2], torch.ones(1), acceptance_rates=[1, 1], acceptance_length=2.0)
    with pytest.raises(ValueError, match="non-increasing"):
        _run([2], torch.ones(1), acceptance_rates=[0.5, 0.7])
    with pytest.raises(ValueError, match="outside"):
        check_rates([1.5])
    with pytest.raises(ValueError, match="entries"):
        _run([3], torch.ones(1), acceptance_rates=[0.5, 0.2])
    with pytest.raises(ValueError, match=">= 1"):
        _run([3], torch.ones(1), acceptance_length=0.5)


def test_warns_once_that_it_is_lossy():
    from specpath_engine.sample import rejection

    rejection._warned_lossy.discard("synthetic")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run([2], torch.ones(1), acceptance_length=2.0)
        _run([2], torch.ones(1), acceptance_length=2.0)
    assert [str(w.message) for w in caught if "lossy" in str(w.message)] == [
        "rejection_sample(method='synthetic') is lossy: output no longer follows the target distribution"
    ]
