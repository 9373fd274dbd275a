"""The native chain's pick of a draft (``specpath_draft_argmax``, vectorised) is torch's argmax of
``(logits + bias) + noise`` in fp32: the same index, ties to the first, over random logits drawn
from few values (so ties are common), with and without a bias and a race's noise."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.modeling import native

KERNELS = native.kernels()
pytestmark = pytest.mark.skipif(KERNELS is None, reason=f"native kernels unavailable: {native.unavailable_reason()}")


@given(blocks=st.integers(1, 40), levels=st.integers(1, 6), seed=st.integers(0, 2**31 - 1),
       bias=st.booleans(), noise=st.booleans(), neg_inf=st.booleans())
@settings(max_examples=200, deadline=None)
def test_the_native_argmax_is_torchs_first_argmax(blocks, levels, seed, bias, noise, neg_inf):
    g = torch.Generator().manual_seed(seed)
    n = 16 * blocks
    logits = torch.randint(0, levels, (n,), generator=g).float().sub(levels).to(torch.bfloat16)  # [n], ties
    if neg_inf:
        logits[torch.rand(n, generator=g) < 0.5] = float("-inf")
    b = torch.randint(0, 2, (n,), generator=g).float() if bias else None  # [n] fp32
    z = torch.randint(0, 3, (n,), generator=g).float() * 0.5 if noise else None  # [n] fp32
    want = logits.float()
    if b is not None:
        want = want + b
    if z is not None:
        want = want + z
    assert KERNELS.draft_argmax(logits, b, z) == int(want.argmax())


def test_all_minus_infinity_picks_the_first():
    logits = torch.full((64,), float("-inf"), dtype=torch.bfloat16)
    assert KERNELS.draft_argmax(logits) == int(logits.float().argmax()) == 0
