"""The n-gram matching rule, for one sequence, in plain Python.

This is the specification every other path (the numba batch proposer, the Triton kernel and
its torch reference) is tested against. The rule: take the longest ``n`` in ``[min_n, max_n]``
whose last ``n`` tokens also occur earlier in the sequence (the occurrence must end before the
last token, so at least one token follows it); among the occurrences of that n-gram take the
earliest; propose the tokens that follow it.

The scan is KMP over the reversed sequence: reversed, "a suffix that occurs earlier" becomes
"a prefix that occurs again", which the prefix function finds in one O(length) pass. The
prefix function is capped at ``max_n`` so matches never grow past the window.
"""

from __future__ import annotations

from collections.abc import Sequence


def check_window(min_n: int, max_n: int, k: int) -> None:
    """Reject a window no matcher can honour, in one line."""
    if min_n < 1:
        raise ValueError(f"min_n must be >= 1, got {min_n}")
    if max_n < min_n:
        raise ValueError(f"max_n must be >= min_n, got min_n={min_n}, max_n={max_n}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")


def longest_earliest_match(tokens: Sequence[int], max_n: int) -> tuple[int, int]:
    """``(n, follow)``: the longest match ``n <= max_n`` of the sequence's suffix that occurs
    earlier, and the index of the token that follows its earliest occurrence; ``(0, 0)`` when
    even the last token never occurred before."""
    total = len(tokens)
    reversed_tokens = tokens[::-1]
    # border[i] (i < max_n): longest proper border of reversed_tokens[: i + 1]; enough to fall
    # back from any prefix length <= max_n.
    border = [0] * max_n
    best_n, best_i = 0, 0
    n = 0
    for i in range(1, total):
        token = reversed_tokens[i]
        while n and reversed_tokens[n] != token:
            n = border[n - 1]
        if reversed_tokens[n] != token:
            continue
        n += 1
        # ">=": a later i in reversed order is an earlier occurrence in the sequence.
        if n >= best_n:
            best_n, best_i = n, i
        if i < max_n:
            border[i] = n
        if n == max_n:
            n = border[max_n - 1]
    if best_n == 0:
        return 0, 0
    # The occurrence spans reversed [best_i - best_n + 1, best_i], i.e. it starts at
    # total - 1 - best_i in the sequence; the token after it is best_n further on.
    return best_n, total - 1 - best_i + best_n


def propose_ngram_tokens(
    tokens: Sequence[int],
    min_n: int,
    max_n: int,
    k: int,
    max_model_len: int | None = None,
) -> list[int]:
    """Up to ``k`` draft tokens for one sequence by prompt lookup (see the module docstring).

    Fewer than ``k`` when the sequence ends first or when ``len(tokens) + k`` would pass
    ``max_model_len``; none when the sequence is shorter than ``min_n`` or nothing matches.
    """
    check_window(min_n, max_n, k)
    tokens = [int(t) for t in tokens]
    total = len(tokens)
    if max_model_len is not None:
        k = min(k, max_model_len - total)
    if total < min_n or k <= 0:
        return []
    n, follow = longest_earliest_match(tokens, max_n)
    if n < min_n:
        return []
    return tokens[follow : follow + k]
