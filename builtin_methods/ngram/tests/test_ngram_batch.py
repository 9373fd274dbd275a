import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from ngram_strategies import ngram_cases

from specpath_ngram import propose_ngram_tokens
from specpath_ngram.batch import pad_sequences, propose_batch, propose_batch_into


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
