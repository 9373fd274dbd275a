"""Hypothesis strategies shared by the matcher tests: small vocabularies so matches, ties and
periodic stretches are common."""

from hypothesis import strategies as st


@st.composite
def ngram_cases(draw, max_length=48):
    vocab = draw(st.integers(1, 5))
    tokens = draw(st.lists(st.integers(0, vocab - 1), max_size=max_length))
    min_n = draw(st.integers(1, 4))
    max_n = draw(st.integers(min_n, 7))
    k = draw(st.integers(0, 6))
    max_model_len = draw(st.none() | st.integers(len(tokens) - 2, len(tokens) + 6))
    return tokens, min_n, max_n, k, max_model_len
