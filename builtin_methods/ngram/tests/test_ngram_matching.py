import pytest
from hypothesis import given, settings
from ngram_naive import naive_propose
from ngram_strategies import ngram_cases

from specpath_ngram import propose_ngram_tokens


@pytest.mark.parametrize(
    ("tokens", "min_n", "max_n", "k", "max_model_len", "expected"),
    [
        pytest.param([], 1, 3, 4, None, [], id="empty"),
        pytest.param([1, 2], 3, 5, 4, None, [], id="min_n-longer-than-sequence"),
        pytest.param([7], 1, 1, 4, None, [], id="single-token"),
        pytest.param([1, 2, 3, 4], 1, 3, 4, None, [], id="no-repeat"),
        pytest.param([1, 2, 3, 9, 1, 2, 3], 3, 3, 2, None, [9, 1], id="match-at-start"),
        pytest.param([1, 2, 1, 2, 1, 2], 1, 5, 4, None, [1, 2], id="periodic-overlapping"),
        pytest.param([3, 3, 3, 3], 1, 2, 4, None, [3, 3], id="constant-run"),
        pytest.param([1, 2, 8, 1, 2], 2, 2, 5, None, [8, 1, 2], id="k-past-the-end"),
        pytest.param([2, 3, 8, 1, 2, 3, 5, 1, 2, 3], 1, 2, 1, None, [8], id="max_n-below-longest-match"),
        pytest.param([2, 3, 8, 1, 2, 3, 5, 1, 2, 3], 1, 3, 1, None, [5], id="max_n-at-longest-match"),
        pytest.param([1, 2, 5, 1, 2, 6, 1, 2], 2, 4, 1, None, [5], id="tie-takes-earliest"),
        pytest.param([9, 1, 2, 6, 1, 2, 8, 2], 1, 3, 1, None, [6], id="tie-earliest-single"),
        pytest.param([1, 2, 5, 8, 2, 5, 1, 2, 5], 2, 3, 2, None, [8, 2], id="longer-beats-earlier"),
        pytest.param([1, 2, 3, 1, 2], 2, 3, 3, 6, [3], id="clipped-by-max-model-len"),
        pytest.param([1, 2, 3, 1, 2], 2, 3, 3, 5, [], id="at-max-model-len"),
        pytest.param([1, 2, 3, 1, 2], 2, 3, 0, None, [], id="k-zero"),
        pytest.param([1, 2, 3, 1, 2], 3, 4, 3, None, [], id="only-shorter-than-min_n-matches"),
    ],
)
def test_edges(tokens, min_n, max_n, k, max_model_len, expected):
    assert propose_ngram_tokens(tokens, min_n, max_n, k, max_model_len) == expected
    assert naive_propose(tokens, min_n, max_n, k, max_model_len) == expected


def test_accepts_any_int_sequence():
    import numpy as np

    assert propose_ngram_tokens(np.array([1, 2, 3, 1, 2], np.int32), 2, 2, 1) == [3]
    assert propose_ngram_tokens((1, 2, 3, 1, 2), 2, 2, 1) == [3]


@pytest.mark.parametrize(
    ("min_n", "max_n", "k", "message"),
    [(0, 3, 1, "min_n must be >= 1"), (4, 3, 1, "max_n must be >= min_n"), (1, 3, -1, "k must")],
)
def test_rejects_bad_window(min_n, max_n, k, message):
    with pytest.raises(ValueError, match=message):
        propose_ngram_tokens([1, 2, 3], min_n, max_n, k)


@settings(max_examples=200, deadline=None)
@given(ngram_cases())
def test_matches_naive_reference(case):
    assert propose_ngram_tokens(*case) == naive_propose(*case)
