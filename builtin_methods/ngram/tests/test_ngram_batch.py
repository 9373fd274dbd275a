import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ngram_strategies import ngram_cases

from specpath_ngram import propose_ngram_tokens
from specpath_ngram.batch import (
    _kmp_row,
    _match_row,
    pad_sequences,
    propose_batch,
    propose_batch_into,
)


@settings(max_examples=100, deadline=None)
@given(st.lists(ngram_cases(), min_size=1, max_size=12))
def test_batch_matches_single_sequence_rule(cases):
    """Each sequence carries its own window and k; group them by window for the batch call."""
    for tokens, min_n, max_n, k, max_model_len in cases:
        expected = propose_ngram_tokens(tokens, min_n, max_n, k, max_model_len)
        assert propose_batch([tokens], min_n, max_n, k, max_model_len) == [expected]
    _, min_n, max_n, k, _ = cases[0]
    sequences = [case[0] for case in cases]
    expected = [propose_ngram_tokens(s, min_n, max_n, k) for s in sequences]
    assert propose_batch(sequences, min_n, max_n, k) == expected


def test_agrees_on_a_large_batch():
    rng = np.random.default_rng(0)
    sequences = [rng.integers(0, 4, rng.integers(0, 600)).tolist() for _ in range(64)]
    expected = [propose_ngram_tokens(s, 2, 6, 5) for s in sequences]
    assert propose_batch(sequences, 2, 6, 5) == expected
    assert sum(map(len, expected)) > 0


def test_rows_select_slots_and_k_is_per_request():
    sequences = [[9, 9, 9], [1, 2, 3, 1, 2], [5, 6, 5, 6, 5, 6]]
    tokens, lengths = pad_sequences(sequences, width=10)
    rows = np.array([2, 1, 0, 1], np.int32)
    ks = np.array([3, 0, 1, 2], np.int32)
    drafts = np.full((4, 3), -7, np.int32)
    counts = np.zeros(4, np.int32)
    propose_batch_into(tokens, rows, lengths[rows], ks, 2, 3, drafts, counts)
    assert counts.tolist() == [2, 0, 1, 2]
    assert drafts[0, :2].tolist() == [5, 6]
    assert drafts[2, :1].tolist() == [9]
    assert drafts[3, :2].tolist() == [3, 1]


@settings(max_examples=150, deadline=None)
@given(ngram_cases(max_length=64))
def test_compiled_kmp_fallback_matches_rule(case):
    tokens, min_n, max_n, k, _ = case
    n, follow = _kmp_row(np.array(tokens or [0], np.int32), len(tokens), min_n, max_n)
    expected = propose_ngram_tokens(tokens, min_n, max_n, max(k, 1))
    assert (tokens[follow : follow + max(k, 1)] if n else []) == expected


@pytest.mark.parametrize("max_n", [5, 8])
def test_partial_matches_everywhere_hand_over_to_kmp(max_n):
    """``a...a b a^(max_n-1)``: every end in the run of ``a`` matches ``max_n - 1`` tokens and
    then fails, which would cost O(length * max_n) without the hand-over."""
    tokens = [0] * 300 + [1] + [0] * (max_n - 1)
    row = np.array(tokens, np.int32)
    assert _match_row(row, len(tokens), 1, max_n) == _kmp_row(row, len(tokens), 1, max_n)
    assert propose_batch([tokens], 1, max_n, 3) == [propose_ngram_tokens(tokens, 1, max_n, 3)]
