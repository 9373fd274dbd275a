"""The online frequency model on its own: what it learns and what it proposes."""

import pytest

from specpath_freqgram.model import FrequencyModel


def learned(tokens, max_order=3):
    model = FrequencyModel(max_order)
    model.sync(tokens)
    return model


def test_repeated_phrase_is_proposed_in_full():
    # "1 2 3 4" occurred once; the text now ends in "1 2": the chain continues the phrase.
    assert learned([1, 2, 3, 4, 9, 1, 2]).propose(2) == [3, 4]


def test_chain_wraps_around_a_cycle():
    assert learned([5, 6, 7, 5, 6, 7, 5]).propose(5) == [6, 7, 5, 6, 7]


def test_most_frequent_follower_wins_and_ties_go_to_the_most_recent():
    model = learned([1, 2, 1, 2, 1, 3, 1], max_order=1)
    assert model.propose(1) == [2]  # 1 -> 2 twice, 1 -> 3 once
    model = learned([1, 2, 1, 3, 1], max_order=1)
    assert model.propose(1) == [3]  # 1 -> 2 once, 1 -> 3 once: most recent


def test_longest_context_is_preferred_over_shorter_ones():
    # After "8 1" came 4; after "1" alone, 2 is more frequent. Order 2 knows better.
    tokens = [1, 2, 1, 2, 1, 2, 8, 1, 4, 0, 8, 1]
    assert learned(tokens, max_order=2).propose(1) == [4]
    assert learned(tokens, max_order=1).propose(1) == [2]


def test_unseen_context_proposes_nothing():
    assert learned([1, 2, 3]).propose(4) == []
    assert learned([]).propose(4) == []
    assert learned([1, 2, 1, 2]).propose(0) == []


def test_sync_learns_only_new_tokens_and_restarts_when_text_shrinks():
    model = FrequencyModel(3)
    model.sync([1, 2, 3])
    model.sync([1, 2, 3, 1, 2])
    assert len(model) == 5
    assert model.propose(1) == [3]
    model.sync([7, 8])  # recomputed request: counts of the old text are gone
    assert len(model) == 2
    assert model.propose(1) == []


def test_max_order_below_one_is_rejected():
    with pytest.raises(ValueError, match="max_order"):
        FrequencyModel(0)
