"""Block accounting: allocation, freeing, prefix hits, tail-block drop, hash lookahead."""

from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.block_manager import BlockManager, BlockTable, NoFreeBlocksError

import pytest


def _check_invariants(bm: BlockManager, tables):
    owned = {}
    for t in tables:
        for b in t.block_ids:
            owned[b] = owned.get(b, 0) + 1
    for b in range(bm.num_blocks):
        assert bm.ref_counts[b] == owned.get(b, 0)
    assert bm.num_free_blocks == sum(1 for b in range(bm.num_blocks) if bm.ref_counts[b] == 0)


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["grow", "free", "match", "register"]),
                           st.integers(0, 3), st.integers(0, 40)), max_size=60),
    prefix_caching=st.booleans(),
    drop=st.booleans(),
    lookahead=st.integers(0, 2),
)
def test_random_operations_keep_counts_exact(ops, prefix_caching, drop, lookahead):
    bm = BlockManager(12, 4, enable_prefix_caching=prefix_caching, num_hash_lookahead_tokens=lookahead,
                      use_eagle_block_drop=drop)
    tables = [BlockTable() for _ in range(4)]
    prompts = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13][: 5 + 2 * i] for i in range(4)]
    computed = [0] * 4
    for op, i, n in ops:
        t = tables[i]
        if op == "grow":
            if bm.can_allocate(t, n):
                bm.allocate(t, n)
            else:
                with pytest.raises(NoFreeBlocksError):
                    bm.allocate(t, n)
        elif op == "free":
            bm.free(t)
            computed[i] = 0
        elif op == "match" and not t.block_ids:
            t.block_hashes.clear()
            computed[i] = bm.match_prefix(t, prompts[i])
            assert computed[i] < len(prompts[i])
            assert computed[i] % 4 == 0
        elif op == "register":
            upto = min(len(t.block_ids) * 4, len(prompts[i]))
            computed[i] = max(computed[i], upto)
            bm.register_computed(t, prompts[i], computed[i])
        _check_invariants(bm, tables)
    for t in tables:
        bm.free(t)
    assert bm.num_free_blocks == bm.num_blocks


def _prefill(bm, tokens):
    t = BlockTable()
    cached = bm.match_prefix(t, tokens)
    bm.allocate(t, len(tokens))
    bm.register_computed(t, tokens, len(tokens))
    return t, cached


def test_prefix_hit_reuses_blocks_and_leaves_one_token():
    bm = BlockManager(16, 4, enable_prefix_caching=True)
    tokens = list(range(12))
    a, cached = _prefill(bm, tokens)
    assert cached == 0
    b, cached = _prefill(bm, tokens)
    assert cached == 8  # 12 tokens = 3 full blocks, but the last token must be recomputed
    assert b.block_ids[:2] == a.block_ids[:2]
    c, cached = _prefill(bm, tokens + [99])
    assert cached == 12
    for t in (a, b, c):
        bm.free(t)
    assert bm.num_free_blocks == 16
    d, cached = _prefill(bm, tokens + [5])  # freed blocks keep their content until reused
    assert cached == 12


def test_eagle_block_drop_recomputes_last_matched_block():
    bm = BlockManager(16, 4, enable_prefix_caching=True, use_eagle_block_drop=True)
    tokens = list(range(13))
    _prefill(bm, tokens)
    _, cached = _prefill(bm, tokens)
    assert cached == 8  # 3 full blocks match, the tail one is dropped


def test_hash_lookahead_needs_the_tokens_after_the_block():
    bm = BlockManager(16, 4, enable_prefix_caching=True, num_hash_lookahead_tokens=2)
    _prefill(bm, list(range(13)))
    _, cached = _prefill(bm, list(range(9)) + [77, 78, 79, 80])
    assert cached == 4  # block 1 (4..7) hashes tokens 8, 9 too: 9 differs, so only block 0 hits


def test_evicted_block_is_no_longer_a_hit():
    bm = BlockManager(3, 4, enable_prefix_caching=True)
    a, _ = _prefill(bm, list(range(9)))
    bm.free(a)
    other = BlockTable()
    bm.allocate(other, 12)  # takes every block, evicting the cached ones
    bm.free(other)
    _, cached = _prefill(bm, list(range(9)))
    assert cached == 0


def test_lookahead_hashes_replace_the_tail_block_drop():
    bm = BlockManager(16, 4, enable_prefix_caching=True, num_hash_lookahead_tokens=1, use_eagle_block_drop=True)
    tokens = list(range(14))
    _prefill(bm, tokens)
    _, cached = _prefill(bm, tokens)
    assert cached == 12  # block 2 (8..11) hashes token 12 too, which matches: no block is dropped
