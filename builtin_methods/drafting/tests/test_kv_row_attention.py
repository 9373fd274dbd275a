"""The drafter KV's row view (a whole draft model's ``attention(layer, q, k, v)``): one request's
pass runs on the native attention (bf16 CPU) and computes what the batched torch path does; a
cache that grows on demand holds and attends exactly as one built at its full size."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.modeling import native
from specpath_engine.testing.native import counting_native_attention, native_kernels_missing
from specpath_drafting.kv import DrafterKV

needs_kernels = pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))


def _kv(seed):
    kv = DrafterKV(num_layers=2, num_kv_heads=2, head_dim=32, row_len=64, num_rows=2, dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(seed)
    for t in (kv.keys, kv.values):
        t.copy_(torch.randn(t.shape, generator=g))
    return kv


@needs_kernels
@given(start=st.integers(0, 40), tokens=st.integers(1, 8), layer=st.integers(0, 1), decode=st.booleans(),
       seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_one_requests_pass_on_the_native_attention_equals_the_torch_path(start, tokens, layer, decode, seed):
    if decode:
        tokens = 1
    fast, slow = _kv(seed), _kv(seed)
    for kv in (fast, slow):
        kv.row("a"), kv.row("b")
    g = torch.Generator().manual_seed(seed + 1)
    q = torch.randn(tokens, 4, 32, generator=g).bfloat16()
    k = torch.randn(tokens, 2, 32, generator=g).bfloat16()
    v = torch.randn(tokens, 2, 32, generator=g).bfloat16()

    def attention(kv):
        if decode:
            return kv.decode_attention(torch.tensor([1]), torch.tensor([start]), start + 1)
        return kv.row_attention([1], [start], [tokens])

    with torch.inference_mode():
        with counting_native_attention() as calls:
            got = attention(fast)(layer, q, k, v)
        with native.disabled():
            want = attention(slow)(layer, q, k, v)
    assert calls == [1]
    assert torch.equal(fast.keys, slow.keys) and torch.equal(fast.values, slow.values)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=5), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_a_growing_cache_attends_as_one_built_at_full_size(lengths, seed):
    """float32 torch path: requests arrive one by one, so the small cache doubles (1 -> 2 -> 4 -> 5
    rows) while the full one never grows; every pass returns the same and leaves the same keys."""
    n = len(lengths)
    grown = DrafterKV(num_layers=2, num_kv_heads=2, head_dim=8, row_len=16, num_rows=5, initial_rows=1)
    full = DrafterKV(num_layers=2, num_kv_heads=2, head_dim=8, row_len=16, num_rows=5)
    g = torch.Generator().manual_seed(seed)
    for i, length in enumerate(lengths):
        rows = [kv.row(f"r{i}") for kv in (grown, full)]
        assert rows[0] == rows[1] == i
        q, k, v = (torch.randn(length, h, 8, generator=g) for h in (4, 2, 2))
        for layer in (0, 1):
            got = grown.row_attention([i], [0], [length])(layer, q, k, v)
            want = full.row_attention([i], [0], [length])(layer, q, k, v)
            assert torch.equal(got, want)
    assert grown.num_rows == min(5, 1 << (n - 1).bit_length())
    assert torch.equal(grown.keys, full.keys[:, : grown.keys.shape[1]])
    assert not full.keys[:, grown.keys.shape[1] :].any()


def test_rows_are_the_caches_and_its_errors_name_the_owner():
    kv = DrafterKV(num_rows=2, row_len=4, num_kv_heads=1, head_dim=8, owner="my drafter")
    assert (kv.row("a"), kv.row("b"), kv.row("a")) == (0, 1, 0)
    kv.release("a")
    assert kv.row("c") == 0
    with pytest.raises(RuntimeError, match="my drafter: more live requests than its 2 rows"):
        kv.row("d")


@given(rows=st.lists(st.integers(0, 2), min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_slot_access_is_row_times_row_len_plus_position(rows, seed):
    """What a block drafter writes at slots it reads back, at the row views' (row, position)."""
    kv = DrafterKV(num_layers=2, num_rows=3, row_len=8, num_kv_heads=1, head_dim=4)
    g = torch.Generator().manual_seed(seed)
    positions = torch.randperm(8, generator=g)[: len(rows)]
    slots = torch.tensor(rows) * kv.row_len + positions
    slots = slots.unique()  # a slot written twice would keep either value
    k, v = torch.randn(len(slots), 1, 4, generator=g), torch.randn(len(slots), 1, 4, generator=g)
    kv.write(1, slots, k, v)
    assert all(torch.equal(a, b) for a, b in zip(kv.gather(1, slots), (k, v)))
    by_row_k, _ = kv.layer_rows(1)
    assert torch.equal(by_row_k[slots // kv.row_len, slots % kv.row_len], k)
    span_k, _ = kv.row_span(1, int(slots[0]) // kv.row_len)
    assert torch.equal(span_k[int(slots[0]) % kv.row_len], k[0])
    assert not kv.keys[0].any()
