"""The draft model's KV rows: one request's pass runs on the native attention (bf16 CPU) and
computes what the batched torch path does."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.modeling import native
from specpath_engine.testing.native import counting_native_attention, native_kernels_missing
from specpath_draft_model.kv import DraftKV

needs_kernels = pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))


def _kv(seed):
    kv = DraftKV(num_layers=2, num_kv_heads=2, head_dim=32, max_len=64, max_rows=2, dtype=torch.bfloat16, device="cpu")
    g = torch.Generator().manual_seed(seed)
    for t in (*kv.k, *kv.v):
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
        return kv.attention([1], [start], [tokens])

    with torch.inference_mode():
        with counting_native_attention() as calls:
            got = attention(fast)(layer, q, k, v)
        with native.disabled():
            want = attention(slow)(layer, q, k, v)
    assert calls == [1]
    assert all(torch.equal(a, b) for a, b in zip(fast.k + fast.v, slow.k + slow.v))
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
