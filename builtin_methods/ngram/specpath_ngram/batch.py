"""The CPU batch proposer: one compiled call drafts for every request of a step.

Tool choice (measured in ``builtin_methods/ngram/benchmarks/ngram.py``): numba ``njit`` over a padded int32 token
buffer. It needs no per-token Python, compiles once to an on-disk cache (``cache=True``), and
lets each request stop as soon as it has its answer, which no vectorised numpy/torch
formulation can do (they must touch every position for every ``n``).

It runs on one thread, on purpose. Spread over numba's threads (``parallel=True``/``prange``)
the scan is faster only in an idle process: next to torch, whose OpenMP threads keep spinning
after each op, the two pools fight for the same cores and a 0.1 ms scan takes milliseconds
(measured in ``builtin_methods/ngram/benchmarks/ngram.py``). A decode step always runs the target model just before
drafting, so the serial kernel is the one that is fast where it is used.

The scan runs forward from the start of the sequence. For each end position it compares the
tokens before it with the sequence's suffix, most of the time a single comparison (the last
token differs), and it stops at the first occurrence of the full ``max_n``-gram: with the
earliest-occurrence rule nothing after it can win. Its answer is the one KMP over the
reversed sequence gives (``matching.py``). Partial matches cost up to ``max_n`` comparisons
each, so a crafted sequence (``a...a b a a a a`` with ``max_n`` 5) could make the scan
O(length * max_n); once partial matches have cost more than ``2 * length`` comparisons the
request is finished by the compiled KMP instead, which keeps every request O(length).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _match_row(tokens, length, min_n, max_n):
    """``(n, follow)`` for one sequence held in ``tokens[:length]``; ``(0, 0)`` if no match
    of at least ``min_n`` tokens."""
    last = length - 1
    best_n = 0
    best_follow = 0
    if length < min_n or length < 2:
        return 0, 0
    last_token = tokens[last]
    budget = 2 * length  # comparisons partial matches may spend before KMP takes over
    for end in range(last):
        if tokens[end] != last_token:
            continue
        limit = min(max_n, end + 1)
        n = 1
        while n < limit and tokens[end - n] == tokens[last - n]:
            n += 1
        budget -= n
        if budget < 0:
            break
        if n > best_n:  # strict: an earlier occurrence of the same length stays
            best_n = n
            best_follow = end + 1
            if n == max_n:
                break
    if budget < 0:
        return _kmp_row(tokens, length, min_n, max_n)
    if best_n < min_n:
        return 0, 0
    return best_n, best_follow


@numba.njit(nogil=True, cache=True)
def _kmp_row(tokens, length, min_n, max_n):
    """:func:`_match_row` by KMP over the reversed sequence (see ``matching.py``): O(length)
    whatever the input, but always a full pass."""
    border = np.zeros(max_n, np.int32)
    best_n = 0
    best_i = 0
    n = 0
    for i in range(1, length):
        token = tokens[length - 1 - i]
        while n > 0 and tokens[length - 1 - n] != token:
            n = border[n - 1]
        if tokens[length - 1 - n] != token:
            continue
        n += 1
        if n >= best_n:  # a later i (reversed) is an earlier occurrence
            best_n = n
            best_i = i
        if i < max_n:
            border[i] = n
        if n == max_n:
            n = border[max_n - 1]
    if best_n < min_n:
        return 0, 0
    return best_n, length - 1 - best_i + best_n


@numba.njit(nogil=True, cache=True)
def _propose_rows(tokens, rows, lengths, ks, min_n, max_n, drafts, counts):
    for i in range(rows.shape[0]):
        row = tokens[rows[i]]
        length = lengths[i]
        count = 0
        if ks[i] > 0:
            n, follow = _match_row(row, length, min_n, max_n)
            if n > 0:
                count = min(ks[i], length - follow)
                for j in range(count):
                    drafts[i, j] = row[follow + j]
        counts[i] = count


def propose_batch_into(
    tokens: np.ndarray,
    rows: np.ndarray,
    lengths: np.ndarray,
    ks: np.ndarray,
    min_n: int,
    max_n: int,
    drafts: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Draft for a batch held in a padded buffer, writing into preallocated outputs.

    ``tokens`` int32 ``[slots, width]``; request ``i`` is ``tokens[rows[i], :lengths[i]]`` and
    may draft up to ``ks[i]`` tokens (the caller clips ``ks`` to ``max_model_len``).
    ``drafts[i, :counts[i]]`` receives its drafts (int32 ``[batch, >= max(ks)]``).
    """
    _propose_rows(tokens, rows, lengths, ks, min_n, max_n, drafts, counts)


def pad_sequences(sequences, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, lengths)``: sequences packed into a zero-padded int32 buffer."""
    lengths = np.array([len(s) for s in sequences], dtype=np.int32)
    width = max(int(lengths.max(initial=0)), 1) if width is None else width
    tokens = np.zeros((len(sequences), width), dtype=np.int32)
    for i, sequence in enumerate(sequences):
        tokens[i, : len(sequence)] = sequence
    return tokens, lengths


def propose_batch(
    sequences,
    min_n: int,
    max_n: int,
    k: int,
    max_model_len: int | None = None,
) -> list[list[int]]:
    """:func:`~specpath_ngram.propose_ngram_tokens` for many sequences in one compiled call."""
    from specpath_ngram.matching import check_window

    check_window(min_n, max_n, k)
    tokens, lengths = pad_sequences(sequences)
    ks = np.full(len(sequences), k, dtype=np.int32)
    if max_model_len is not None:
        ks = np.minimum(ks, max_model_len - lengths).astype(np.int32)
    rows = np.arange(len(sequences), dtype=np.int32)
    drafts = np.zeros((len(sequences), max(k, 1)), dtype=np.int32)
    counts = np.zeros(len(sequences), dtype=np.int32)
    propose_batch_into(tokens, rows, lengths, ks, min_n, max_n, drafts, counts)
    return [drafts[i, : counts[i]].tolist() for i in range(len(sequences))]


def warm_up() -> None:
    """Compile (or load from the cache) the kernel now, not on the first real step."""
    tokens = np.array([[1, 2, 3, 1, 2, 3, 1, 2]], dtype=np.int32)
    rows, lengths, ks = np.zeros(1, np.int32), np.array([8], np.int32), np.array([2], np.int32)
    drafts, counts = np.zeros((1, 2), np.int32), np.zeros(1, np.int32)
    _propose_rows(tokens, rows, lengths, ks, 1, 3, drafts, counts)
