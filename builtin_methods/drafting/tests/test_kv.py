"""The drafter KV: which queries the native attention may take, and that it then computes what
the torch path does (keys written at the queries' slots, causal attention over the row)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.modeling import native
from specpath_engine.testing.native import counting_native_attention, native_kernels_missing
from specpath_drafting.kv import DrafterKV, newest_of_one_row

needs_kernels = pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))


@given(rows=st.lists(st.integers(0, 2), min_size=1, max_size=6), first=st.integers(0, 20), step=st.sampled_from([1, 1, 2]),
       extra=st.integers(0, 2))
def test_one_rows_newest_positions_are_recognised_and_nothing_else(rows, first, step, extra):
    positions = torch.tensor([first + step * i for i in range(len(rows))])
    max_position = int(positions[-1]) + extra
    want = rows[0] if len(set(rows)) == 1 and (len(rows) == 1 or step == 1) and extra == 0 else None
    assert newest_of_one_row(torch.tensor(rows), positions, max_position) == want


def _kv(seed, row_len=48, rows=3, kv_heads=2, head_dim=32):
    kv = DrafterKV(num_rows=rows, row_len=row_len, num_kv_heads=kv_heads, head_dim=head_dim, dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(seed)
    kv.keys.copy_(torch.randn(kv.keys.shape, generator=g))
    kv.values.copy_(torch.randn(kv.values.shape, generator=g))
    return kv


@needs_kernels
@given(row=st.integers(0, 2), history=st.integers(0, 30), tokens=st.integers(1, 8), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_native_ingest_of_several_positions_equals_the_torch_path(row, history, tokens, seed):
    heads, kv_heads, dim = 4, 2, 32
    fast, slow = _kv(seed), _kv(seed)
    g = torch.Generator().manual_seed(seed + 1)
    q = torch.randn(tokens, heads, dim, generator=g).bfloat16()
    k = torch.randn(tokens, kv_heads, dim, generator=g).bfloat16()
    v = torch.randn(tokens, kv_heads, dim, generator=g).bfloat16()
    positions = torch.arange(history, history + tokens)
    rows = torch.full((tokens,), row)
    slots = rows * fast.row_len + positions
    last = history + tokens - 1
    with torch.inference_mode():
        with counting_native_attention() as calls:
            got = fast.attention(slots, rows, positions, last)(q, k, v)
        with native.disabled():
            want = slow.attention(slots, rows, positions, last)(q, k, v)
    assert calls == [1]
    assert torch.equal(fast.keys, slow.keys) and torch.equal(fast.values, slow.values)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


def _tree_mask(tokens, length, seed):
    """Each of the last ``tokens`` positions sees the committed prefix, some earlier scratch slots
    (its ancestors) and itself."""
    g = torch.Generator().manual_seed(seed)
    first = length - tokens  # >= 1: a tree follows at least one committed position
    mask = torch.zeros(tokens, length, dtype=torch.bool)
    prefix = max(1, first - 3)
    mask[:, :prefix] = True
    mask[:, prefix:first] = torch.rand(tokens, first - prefix, generator=g) < 0.5
    mask[torch.arange(tokens), torch.arange(first, length)] = True
    return mask


@given(row=st.integers(0, 2), length=st.integers(4, 40), tokens=st.integers(1, 4), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_tree_attention_sees_what_its_mask_admits(row, length, tokens, seed):
    """float32, the torch path: each query's output is attention over exactly its admitted keys."""
    tokens = min(tokens, length - 1)
    kv = DrafterKV(num_rows=3, row_len=48, num_kv_heads=2, head_dim=32)
    g = torch.Generator().manual_seed(seed)
    kv.keys.copy_(torch.randn(kv.keys.shape, generator=g))
    kv.values.copy_(torch.randn(kv.values.shape, generator=g))
    q, k, v = torch.randn(tokens, 4, 32, generator=g), torch.randn(tokens, 2, 32, generator=g), torch.randn(tokens, 2, 32, generator=g)
    mask = _tree_mask(tokens, length, seed)
    got = kv.tree_attention(row, length, mask)(q, k, v)
    start = row * kv.row_len
    keys, values = kv.keys[0, start : start + length], kv.values[0, start : start + length]
    assert torch.equal(keys[length - tokens :], k) and torch.equal(values[length - tokens :], v)
    for t in range(tokens):
        seen = mask[t].nonzero().squeeze(1)
        for h in range(4):
            scores = keys[seen, h // 2] @ q[t, h] / 32**0.5
            torch.testing.assert_close(got[t, h], scores.softmax(0) @ values[seen, h // 2], rtol=1e-5, atol=1e-5)


@needs_kernels
@given(row=st.integers(0, 2), length=st.integers(4, 40), tokens=st.integers(1, 8), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_native_tree_attention_equals_the_torch_path(row, length, tokens, seed):
    fast, slow = _kv(seed), _kv(seed)
    g = torch.Generator().manual_seed(seed + 1)
    tokens = min(tokens, length - 1)
    q = torch.randn(tokens, 4, 32, generator=g).bfloat16()
    k = torch.randn(tokens, 2, 32, generator=g).bfloat16()
    v = torch.randn(tokens, 2, 32, generator=g).bfloat16()
    mask = _tree_mask(tokens, length, seed)
    with torch.inference_mode():
        with counting_native_attention() as calls:
            got = fast.tree_attention(row, length, mask)(q, k, v)
        with native.disabled():
            want = slow.tree_attention(row, length, mask)(q, k, v)
    assert calls == [1]
    assert torch.equal(fast.keys, slow.keys) and torch.equal(fast.values, slow.values)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
