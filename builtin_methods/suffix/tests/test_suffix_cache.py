"""The compiled suffix trees against the naive restatement (``suffix_naive``), and their
bookkeeping: counts, best-child pointers, the hash index and the free list after any mix of
appends, roll-backs, drafts and finished requests."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_suffix import forest as f
from specpath_suffix.cache import SuffixCache
from suffix_naive import NaiveSuffixCache, all_counts


def dump(cache, root):
    """{string: count} of one tree, read from the arrays; checks the per-node invariants."""
    nodes, out, stack = cache.nodes, {}, [(root, ())]
    while stack:
        node, prefix = stack.pop()
        child, kids = nodes[node, f.CHILD], []
        while child != -1:
            assert nodes[child, f.PARENT] == node
            assert f.lookup(cache.nodes, cache.table, node, nodes[child, f.TOKEN]) == child
            key = prefix + (int(nodes[child, f.TOKEN]),)
            assert nodes[child, f.COUNT] > 0
            out[key] = int(nodes[child, f.COUNT])
            kids.append(child)
            stack.append((child, key))
            child = nodes[child, f.NEXT]
        assert nodes[node, f.FANOUT] == len(kids)
        if kids:
            assert sum(nodes[k, f.COUNT] for k in kids) <= nodes[node, f.COUNT]
            if prefix:  # roots keep no best child
                best = max(kids, key=lambda k: (nodes[k, f.COUNT], -nodes[k, f.TOKEN]))
                assert nodes[node, f.BEST] == best
    return out


def check_same(cache, naive):
    for req_id, seq in naive.live.items():
        assert cache.tokens(req_id).tolist() == seq
        row = cache._rows[req_id]
        assert dump(cache, cache.roots[row]) == all_counts([seq], cache.depth)
        assert cache.nodes[cache.roots[row], f.COUNT] == len(seq)
    if cache.global_root != -1:
        assert dump(cache, cache.global_root) == all_counts(naive.global_sequences(), cache.depth)
        assert cache.cached_requests == list(naive.responses)
    trees = list(naive.live) + ([None] if cache.global_root != -1 else [])
    expected_nodes = sum(len(all_counts([s], cache.depth)) + 1 for s in naive.live.values())
    if cache.global_root != -1:
        expected_nodes += len(all_counts(naive.global_sequences(), cache.depth)) + 1
    assert cache.num_nodes == expected_nodes, trees  # nothing leaks, nothing is shared
    live = set(range(int(cache.meta[f.META_NEXT]))) - set(cache.free[: cache.meta[f.META_FREE]].tolist())
    hashed = sum(int(cache.nodes[n, f.FANOUT]) for n in live if cache.nodes[n, f.FANOUT] > f.HASHED_FANOUT)
    assert cache.meta[f.META_HASH_USED] == hashed  # exactly the children of wide nodes are indexed


ids = st.sampled_from(["a", "b", "c"])
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), ids, st.lists(st.integers(0, 3), min_size=1, max_size=12)),
        st.tuples(st.just("truncate"), ids, st.floats(0, 1)),
        st.tuples(st.just("draft"), ids, st.integers(1, 8)),
        st.tuples(st.just("stop"), ids, st.none()),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(
    depth=st.integers(1, 6),
    max_cached=st.integers(0, 3),
    factor=st.sampled_from([0.5, 1.0, 2.5]),
    min_prob=st.sampled_from([0.0, 0.1, 0.4]),
    ops=operations,
)
def test_matches_the_naive_cache(depth, max_cached, factor, min_prob, ops):
    cache = SuffixCache(max_tree_depth=depth, max_cached_requests=max_cached, max_spec_factor=factor,
                        min_token_prob=min_prob, slots=1, width=2)
    naive = NaiveSuffixCache(depth, max_cached, factor, min_prob)
    for op, req_id, arg in ops:
        if op == "append":
            cache.append(req_id, arg)
            naive.append(req_id, arg)
        elif req_id not in naive.live:
            continue
        elif op == "truncate":
            length = int(arg * len(naive.live[req_id]))
            cache.truncate(req_id, length)
            naive.truncate(req_id, length)
        elif op == "draft":
            assert cache.draft(req_id, arg) == naive.draft(req_id, arg)
            tokens, parents, probs, score = cache.tree_draft(req_id, arg)
            assert score == pytest.approx(naive.tree_score(req_id, arg))
            assert len(tokens) <= min(arg, depth) and all(-1 <= p < i for i, p in enumerate(parents))
            assert all(p >= min_prob for p in probs)
        else:
            cache.stop(req_id)
            naive.stop(req_id)
        check_same(cache, naive)


@settings(max_examples=60, deadline=None)
@given(
    depth=st.integers(1, 6),
    seqs=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=10), min_size=1, max_size=4),
    cut=st.integers(0, 3),
)
def test_batch_update_and_step_equal_one_request_at_a_time(depth, seqs, cut):
    """The speculator's path (update + step over a batch, histories given whole) agrees with
    appends and drafts one request at a time, including a history that was rewritten (a
    restarted request: shorter, or its last known token changed; committed tokens before
    that are trusted, as the engine never rewrites them)."""
    from types import SimpleNamespace

    batch = SuffixCache(max_tree_depth=depth, slots=1, width=1)
    single = NaiveSuffixCache(depth, 10000, 1.0, 0.1)
    grown = [list(s[: max(len(s) - cut, 1)]) for s in seqs]
    for history in (grown, [list(s) for s in seqs], [s[:-1] + [(s[-1] + 1) % 4] + s for s in seqs]):
        requests = [SimpleNamespace(req_id=str(i), token_ids=tuple(h)) for i, h in enumerate(history)]
        rows, old, new = batch.update(requests)
        counts = batch.step(rows, old, new, np.full(len(requests), 8, np.int32))
        for i, h in enumerate(history):
            if str(i) in single.live:
                seq = single.live[str(i)]
                common = 0
                while common < min(len(seq), len(h)) and seq[common] == h[common]:
                    common += 1
                single.truncate(str(i), common)
                single.append(str(i), h[common:])
            else:
                single.append(str(i), h)
            assert batch.drafts[i, : counts[i]].tolist() == single.draft(str(i), 8)


def test_global_tree_is_fifo_and_zero_disables_it():
    cache = SuffixCache(max_tree_depth=6, max_cached_requests=2)
    for name, tokens in [("a", [1, 2, 3]), ("b", [4, 5, 6]), ("c", [7, 8, 9])]:
        cache.append(name, [0])
        cache.draft(name, 4)  # the response starts here
        cache.append(name, tokens)
        cache.stop(name)
    assert cache.cached_requests == ["b", "c"]
    cache.append("d", [0, 4, 5])
    assert cache.draft("d", 4) == [6]
    cache.append("e", [0, 1, 2])
    assert cache.draft("e", 4) == []  # "a" was evicted
    off = SuffixCache(max_tree_depth=6, max_cached_requests=0)
    off.append("a", [0])
    off.draft("a", 4)
    off.append("a", [1, 2, 3])
    off.stop("a")
    assert off.global_root == -1 and off.cached_requests == [] and off.num_nodes == 0


def test_draft_follows_the_most_frequent_continuation():
    cache = SuffixCache(max_tree_depth=8, max_cached_requests=0)
    cache.append("a", [1, 2, 3, 4, 1, 2, 3, 4, 1, 2])
    assert cache.draft("a", 8) == [3, 4, 1, 2]  # a 4-token match drafts 4 (depth 8 caps it)
    assert cache.draft("a", 2) == [3, 4]
    tokens, parents, probs, score = cache.tree_draft("a", 4)
    assert tokens == [3, 4, 1, 2] and parents == [-1, 0, 1, 2] and score == pytest.approx(2.0)


def test_low_probability_stops_the_draft():
    cache = SuffixCache(max_tree_depth=8, max_cached_requests=0, min_token_prob=0.6)
    cache.append("a", [5, 1, 5, 2, 5, 3, 5])  # after 5: 1, 2, 3 once each (prob 1/4 each)
    assert cache.draft("a", 4) == []
    cache.append("a", [1, 5])  # [5, 1] now once before: prob 1/2 < 0.6
    assert cache.draft("a", 4) == []
