"""Speculation metrics: definitions and aggregation."""

import pytest

from specpath_engine.metrics import SpecMetrics
from specpath_engine.request import SamplingParams


def test_per_request_definitions():
    m = SpecMetrics()
    m.record_verification(4, 4)
    m.record_verification(4, 1)
    m.record_verification(2, 0)
    m.record_verification(0, 0)  # a step without drafts counts as a step, not as a draft
    m.num_generated_tokens, m.elapsed_s = 10, 2.0
    assert (m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens, m.num_steps) == (3, 10, 5, 4)
    assert m.mean_acceptance_length == pytest.approx(1 + 5 / 3)
    assert m.acceptance_rate_by_position == [2 / 3, 1 / 3, 1 / 2, 1 / 2]
    assert m.tokens_per_s == 5.0
    assert set(m.as_dict()) >= {"num_drafts", "num_draft_tokens", "num_accepted_tokens", "mean_acceptance_length",
                                "acceptance_rate_by_position", "tokens_per_s"}


def test_aggregate_sums_counts_and_uses_the_call_time():
    a, b = SpecMetrics(), SpecMetrics()
    a.record_verification(2, 2)
    b.record_verification(3, 1)
    a.num_generated_tokens, b.num_generated_tokens = 3, 2
    total = SpecMetrics.total([a, b], elapsed_s=0.5)
    assert total.drafted_by_position == [2, 2, 1] and total.accepted_by_position == [2, 1, 0]
    assert total.mean_acceptance_length == pytest.approx(1 + 3 / 2)
    assert total.tokens_per_s == 10.0


def test_without_drafts_tau_is_one():
    assert SpecMetrics().mean_acceptance_length == 1.0
    assert SpecMetrics().acceptance_rate_by_position == []


@pytest.mark.parametrize("bad", [{"temperature": -1.0}, {"top_p": 0.0}, {"top_p": 1.5}, {"max_tokens": 0},
                                 {"top_k": -1}])
def test_bad_sampling_params_are_value_errors(bad):
    with pytest.raises(ValueError):
        SamplingParams(**bad)


def test_stop_accepts_a_string_or_a_list():
    assert SamplingParams(stop="\n\n").stop == ("\n\n",)
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b")
