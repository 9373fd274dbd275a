"""Weight-only int8: the layer computes with its own dequantised weight; speculation stays exact."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import gguf_helpers
from lookup_methods import LOOKUP, NEEDS_DRAFT, test_methods  # noqa: F401 - fixture
from specpath.engine.llm import LLM, SamplingParams
from specpath.engine.quantization import Int8Linear, quantize_model_


@given(out_features=st.integers(1, 24), in_features=st.integers(1, 40), rows=st.integers(1, 5),
       bias=st.booleans(), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_int8_linear_multiplies_by_its_dequantised_weight(out_features, in_features, rows, bias, seed):
    torch.manual_seed(seed)
    linear = nn.Linear(in_features, out_features, bias=bias)
    q = Int8Linear(linear)
    weight = q.dequantized_weight()
    # round-to-nearest: every weight within half a step of the original
    assert ((weight - linear.weight).abs() <= q.scales[:, None] / 2 + 1e-6).all()
    x = torch.randn(2, rows, in_features)
    expected = torch.nn.functional.linear(x, weight, linear.bias)
    torch.testing.assert_close(q(x), expected, rtol=1e-5, atol=1e-5)


def test_quantize_model_replaces_every_linear(tmp_path):
    from specpath.engine.model import LlamaModel

    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    model = quantize_model_(LlamaModel.from_pretrained(file), "int8")
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert isinstance(model.lm_head, Int8Linear)
    with pytest.raises(ValueError, match="'int4' is not supported; allowed: int8"):
        quantize_model_(model, "int4")


def test_bf16_activations_use_the_same_weight():
    torch.manual_seed(0)
    linear = nn.Linear(64, 32).bfloat16()
    q = Int8Linear(linear)
    assert q.scales.dtype == torch.bfloat16
    x = torch.randn(3, 64).bfloat16()
    expected = torch.nn.functional.linear(x.float(), q.dequantized_weight().float(), linear.bias.float())
    torch.testing.assert_close(q(x).float(), expected, rtol=2e-2, atol=2e-2)


def test_greedy_speculation_is_exact_against_the_int8_model(tmp_path, test_methods):
    dtype = "float32"
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    prompts = ["def the 12 def the 12 def the", "12 12 12 the the"]
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    plain = LLM(str(file), dtype=dtype, quantization="int8").generate(prompts, params)
    spec = LLM(str(file), {"method": LOOKUP, "num_speculative_tokens": 4}, dtype=dtype, quantization="int8")
    outs = spec.generate(prompts, params)
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain]
    assert spec.engine_config.model_config.quantization == "int8"
    with pytest.raises(ValueError, match="quantization"):
        LLM(str(file), quantization="fp4")
