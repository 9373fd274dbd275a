"""The one RMSNorm: float32 is PyTorch's fused kernel, lower precision the Hugging Face order."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.modeling.norm import RMSNorm


def hf_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm.forward, written out."""
    dtype = x.dtype
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dtype)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), dim=st.integers(1, 64), rows=st.integers(1, 5),
       eps=st.sampled_from([1e-6, 1e-5]))
def test_float32_is_the_fused_kernel_bit_for_bit(seed, dim, rows, eps):
    g = torch.Generator().manual_seed(seed)
    norm = RMSNorm(dim, eps)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(dim, generator=g))
    x = torch.randn(rows, dim, generator=g) * 3
    assert torch.equal(norm(x), F.rms_norm(x, (dim,), norm.weight, eps))
    assert torch.allclose(norm(x), hf_rms_norm(x, norm.weight, eps), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_follows_the_hugging_face_order(dtype):
    g = torch.Generator().manual_seed(0)
    norm = RMSNorm(48, 1e-5).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(48, generator=g).to(dtype))
    x = (torch.randn(7, 48, generator=g) * 4).to(dtype)
    out = norm(x)
    assert out.dtype == dtype
    assert torch.equal(out, hf_rms_norm(x, norm.weight, 1e-5))
