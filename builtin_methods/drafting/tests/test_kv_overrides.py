"""The drafter KV under the engine's overrides: ``kv_cache_dtype`` stores keys/values in another
dtype than the drafter computes in (each view reads them back in the query's), and
``attention_backend`` ``torch`` (``native=False``) keeps every view off the native kernel."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.testing.native import counting_native_attention, native_kernels_missing
from specpath_drafting.kv import DrafterKV

HEADS, KV_HEADS, DIM, ROW_LEN = 4, 2, 32, 24


def _pair():
    """A bf16 KV and a float32 one; the float32 one is fed bf16-rounded keys/values."""
    make = lambda dtype: DrafterKV(num_rows=2, row_len=ROW_LEN, num_kv_heads=KV_HEADS, head_dim=DIM,  # noqa: E731
                                   num_layers=2, dtype=dtype)
    return make(torch.bfloat16), make(torch.float32)


def _qkv(seed, t):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(t, h, DIM, generator=g) for h in (HEADS, KV_HEADS, KV_HEADS))  # [T, H|KV, D]
    return q, k, v


def _rounded(x):
    return x.bfloat16().float()


@given(seed=st.integers(0, 2**16), row=st.integers(0, 1), start=st.integers(0, 10), t=st.integers(1, 6),
       layer=st.integers(0, 1))
@settings(max_examples=25, deadline=None)
def test_a_bf16_kv_under_a_float32_drafter_reads_as_the_rounded_float32_kv(seed, row, start, t, layer):
    low, ref = _pair()
    q, k, v = _qkv(seed, t)
    positions = torch.arange(start, start + t)  # [T]
    rows = torch.full((t,), row)
    slots = rows * ROW_LEN + positions
    last = start + t - 1
    got = low.attention(slots, rows, positions, last, layer=layer)(q, k, v)  # [T, H, D]
    want = ref.attention(slots, rows, positions, last, layer=layer)(q, _rounded(k), _rounded(v))
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert low.keys.dtype == torch.bfloat16 and torch.equal(low.keys.float(), ref.keys)
    got = low.row_attention([row], [start], [t])(layer, q, k, v)  # a draft model's pass: SDPA
    want = ref.row_attention([row], [start], [t])(layer, q, _rounded(k), _rounded(v))
    assert torch.equal(got, want)
    low.write(layer, slots, k, v)  # a block drafter's direct writes, stored in the KV's dtype
    keys, _ = low.gather(layer, slots)
    assert keys.dtype == torch.bfloat16 and torch.equal(keys.float(), _rounded(k))


def _native_calls(native: bool, seed: int, t: int) -> int:
    """Native attention calls of a chain step, a tree pass and a draft model's pass over one
    request's newest positions in bf16 (the kernel's case), with the KV's ``native`` flag."""
    kv = DrafterKV(num_rows=1, row_len=ROW_LEN, num_kv_heads=KV_HEADS, head_dim=DIM, dtype=torch.bfloat16,
                   native=native)
    q, k, v = (x.bfloat16() for x in _qkv(seed, t))
    positions, rows = torch.arange(t), torch.zeros(t, dtype=torch.long)
    mask = torch.ones(t, t, dtype=torch.bool).tril()  # [Q, length]
    def passes():
        return [kv.attention(positions, rows, positions, t - 1)(q, k, v), kv.tree_attention(0, t, mask)(q, k, v),
                kv.row_attention([0], [0], [t])(0, q, k, v)]

    with torch.inference_mode():
        if native_kernels_missing() is not None:  # no kernel to count: the torch passes still run
            assert all(o.shape == (t, HEADS, DIM) for o in passes())
            return 0
        with counting_native_attention() as calls:
            assert all(o.shape == (t, HEADS, DIM) for o in passes())
    return calls[0]


@given(seed=st.integers(0, 2**16), t=st.integers(1, 4))
@settings(max_examples=10, deadline=None)
def test_native_false_keeps_every_view_on_torch(seed, t):
    assert _native_calls(False, seed, t) == 0
    if native_kernels_missing() is None:  # the same passes with the flag on do take the kernel
        assert _native_calls(True, seed, t) == 3
