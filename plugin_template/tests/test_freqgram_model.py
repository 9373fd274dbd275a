"""The online frequency model on its own: what it learns and what it proposes."""

import random

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


def naive_next(tokens, history, max_order):
    """Reference by rescanning the whole text: the follower of the longest matching context
    with the highest count; among equal counts, the one that reached that count last."""
    for order in range(min(max_order, len(history)), 0, -1):
        context = list(history[len(history) - order:])
        counts, best, best_count = {}, None, 0
        for i in range(order, len(tokens)):
            if tokens[i - order:i] == context:
                counts[tokens[i]] = counts.get(tokens[i], 0) + 1
                if counts[tokens[i]] >= best_count:
                    best, best_count = tokens[i], counts[tokens[i]]
        if best is not None:
            return best
    return None


def naive_propose(tokens, k, max_order):
    history, chain = list(tokens[-max_order:]), []
    for _ in range(k):
        token = naive_next(tokens, history, max_order)
        if token is None:
            break
        chain.append(token)
        history = (history + [token])[-max_order:]
    return chain


def test_agrees_with_a_rescanning_reference_on_random_text():
    rng = random.Random(0)
    for trial in range(300):
        alphabet = rng.randint(2, 6)
        tokens = [rng.randrange(alphabet) for _ in range(rng.randint(0, 60))]
        max_order, k = rng.randint(1, 4), rng.randint(0, 6)
        model = FrequencyModel(max_order)
        cut = rng.randint(0, len(tokens))  # learn in two steps, as across engine steps
        model.sync(tokens[:cut])
        model.sync(tokens)
        assert model.propose(k) == naive_propose(tokens, k, max_order), (trial, tokens, max_order, k)
