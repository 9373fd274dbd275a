"""Pre-packed low-precision linears: ``F.linear``'s products to one bf16 rounding (oneDNN's packed
weight), or each row's fp32 sum rounded once (the native bf16 kernel, for the shapes it takes);
only where they apply (bf16/fp16 on a CPU whose oneDNN has the kernels; float32 wherever oneDNN
runs, to float32 rounding)."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import gguf_helpers
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.packed_linear import ENV_SWITCH, PackedLinear, pack_linears_, packing_enabled

BF16 = packing_enabled(torch.bfloat16)
"""This CPU packs bf16 (AVX512-BF16 or AMX); elsewhere the tests check that nothing is packed."""


@given(out_features=st.integers(1, 96), in_features=st.integers(1, 80), rows=st.integers(1, 9),
       lead=st.sampled_from([(), (2,)]), bias=st.booleans(), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_packed_linear_is_f_linear_to_one_rounding(out_features, in_features, rows, lead, bias, seed):
    torch.manual_seed(seed)
    linear = nn.Linear(in_features, out_features, bias=bias).bfloat16()
    x = torch.randn(*lead, rows, in_features).bfloat16()
    want = F.linear(x, linear.weight, linear.bias)
    if not BF16:
        assert not packing_enabled(torch.bfloat16)
        return
    layer = PackedLinear(linear)
    got = layer(x)
    assert got.shape == want.shape and got.dtype == torch.bfloat16
    if not layer.native:
        # oneDNN's packed kernel; at some widths (44 inputs) it sums in another order than F.linear
        torch.testing.assert_close(got, want, rtol=2**-7, atol=1e-3)
        return
    assert in_features % 32 == 0
    exact = F.linear(x.float(), linear.weight.float())  # fp32 sums, in another order than oneDNN's
    rounded = exact.bfloat16() if linear.bias is None else exact.bfloat16() + linear.bias
    torch.testing.assert_close(got, rounded, rtol=2**-7, atol=1e-3)
    rows_alone = torch.cat([layer(r) for r in x.reshape(-1, in_features).split(1)]).view_as(got)
    assert torch.equal(rows_alone, got)


@pytest.mark.skipif(not packing_enabled(torch.float32), reason="this torch has no oneDNN")
@given(out_features=st.integers(1, 40), in_features=st.integers(1, 48), rows=st.integers(1, 9), bias=st.booleans(),
       seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_a_packed_float32_linear_gives_the_linear_products(out_features, in_features, rows, bias, seed):
    torch.manual_seed(seed)
    linear = nn.Linear(in_features, out_features, bias=bias)
    layer = PackedLinear(linear)
    x = torch.randn(rows, in_features)
    got = layer(x)
    assert got.dtype == torch.float32 and got.shape == (rows, out_features)
    torch.testing.assert_close(got, F.linear(x, linear.weight, linear.bias), rtol=1e-5, atol=1e-5)


def test_packing_applies_to_cpu_models_of_the_packable_dtypes(monkeypatch):
    assert packing_enabled(torch.float32) == torch.backends.mkldnn.is_available()
    assert not packing_enabled(torch.float64)
    assert not packing_enabled(torch.bfloat16, "meta")
    assert not packing_enabled(torch.float32, "meta")
    monkeypatch.setenv(ENV_SWITCH, "0")
    assert not packing_enabled(torch.bfloat16)


def test_a_bare_linear_comes_back_packed():
    """``SpeculatorContext.prepare_module`` may be handed one linear layer (a drafter's kept head rows)."""
    if not BF16:
        return
    linear = nn.Linear(16, 32, bias=False).bfloat16()
    packed = pack_linears_(linear)
    assert isinstance(packed, PackedLinear) and packed.out_features == 32
    x = torch.randn(3, 16).bfloat16()
    assert torch.equal(packed(x), F.linear(x, linear.weight))


def _tiny(tmp_path):
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    return str(file)


def test_pack_linears_keeps_the_model_output(tmp_path):
    from specpath_engine.model import LlamaModel

    file = _tiny(tmp_path)
    plain = LlamaModel.from_pretrained(file, dtype=torch.bfloat16)
    packed = LlamaModel.from_pretrained(file, dtype=torch.bfloat16)
    if not BF16:
        return
    pack_linears_(packed)
    assert not any(type(m) is nn.Linear for m in packed.modules())
    assert isinstance(packed.lm_head, PackedLinear)
    assert packed.model.embed_tokens.weight.dtype == torch.bfloat16  # the tied embedding stays
    ids = torch.tensor([5, 9, 40, 41, 7, 3])
    pos = torch.arange(6)
    with torch.no_grad():
        assert torch.equal(packed(ids, pos).logits, plain(ids, pos).logits)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_engine_packs_targets_and_keeps_their_greedy_output(tmp_path, monkeypatch, dtype):
    file = _tiny(tmp_path)
    prompts = ["def the 12 def the", "12 12 the"]
    params = SamplingParams(max_tokens=16, ignore_eos=True)
    monkeypatch.setenv(ENV_SWITCH, "0")
    unpacked = LLM(file, dtype=dtype)
    monkeypatch.delenv(ENV_SWITCH)
    packed = LLM(file, dtype=dtype)
    assert isinstance(unpacked.model.lm_head, nn.Linear)
    assert isinstance(packed.model.lm_head, PackedLinear) == packing_enabled(getattr(torch, dtype))
    want = [o.token_ids for o in unpacked.generate(prompts, params)]
    assert [o.token_ids for o in packed.generate(prompts, params)] == want
