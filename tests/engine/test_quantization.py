"""Weight-only int8 and int4: each layer computes with its own dequantised weight; speculation
stays exact against the quantised model; int4 holds GGUF Q4_1 blocks as they are."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import gguf_helpers
from lookup_methods import LOOKUP, NEEDS_DRAFT, test_methods  # noqa: F401 - fixture
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.quantization import Int4Linear, Int8Linear, quantize_model_
from specpath_engine.testing.native import native_kernels_missing


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
    from specpath_engine.model import LlamaModel

    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    model = quantize_model_(LlamaModel.from_pretrained(file), "int8")
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert isinstance(model.lm_head, Int8Linear)
    with pytest.raises(ValueError, match="'fp4' is not supported; allowed: int8, int4"):
        quantize_model_(model, "fp4")


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


@given(groups=st.integers(1, 4), sixteens=st.integers(1, 3), rows=st.integers(1, 6), bias=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_int4_linear_multiplies_by_its_dequantised_weight(groups, sixteens, rows, bias, dtype, seed):
    torch.manual_seed(seed)
    linear = nn.Linear(32 * groups, 16 * sixteens, bias=bias).to(dtype)
    q = Int4Linear(linear)
    weight = q.dequantized_weight().float()
    # round-to-nearest on 16 levels per group of 32: within half a step (plus the dtype's rounding)
    blocks = linear.weight.detach().float().reshape(16 * sixteens, groups, 32)
    step = (blocks.amax(-1) - blocks.amin(-1)) / 15
    slack = 1e-6 if dtype == torch.float32 else 2e-2 * float(blocks.abs().max())
    err = (weight.reshape_as(blocks) - blocks).abs()
    assert (err <= step[..., None] / 2 + slack).all()
    x = torch.randn(2, rows, 32 * groups).to(dtype)
    expected = torch.nn.functional.linear(x.float(), weight, None if linear.bias is None else linear.bias.float())
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    torch.testing.assert_close(q(x).float(), expected, rtol=tol, atol=tol)
    assert q(x).dtype == dtype


def test_int4_holds_q4_1_blocks_as_they_are():
    """A weight made of Q4_1 blocks (d * level + m, levels spanning 0..15) is recovered."""
    g = torch.Generator().manual_seed(0)
    d = torch.rand(32, 3, 1, generator=g) * 0.01 + 1e-3
    m = torch.randn(32, 3, 1, generator=g) * 0.05
    levels = torch.randint(0, 16, (32, 3, 32), generator=g)
    levels[..., 0], levels[..., 1] = 0, 15
    weight = (d * levels + m).reshape(32, 96)
    linear = nn.Linear(96, 32, bias=False)
    linear.weight.data = weight
    torch.testing.assert_close(Int4Linear(linear).dequantized_weight(), weight, rtol=0, atol=1e-6)


def test_int4_refuses_a_shape_it_cannot_hold_and_leaves_the_model_as_it_was():
    model = nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 24))
    with pytest.raises(ValueError, match="int4 needs in_features divisible by 32 and out_features by 16; "
                                         "a layer here is 24 x 32"):
        quantize_model_(model, "int4")
    assert all(type(m) is nn.Linear for m in model)


def test_greedy_speculation_is_exact_against_the_int4_model(test_methods):
    prompts = ["def main():\n    ", "import os\nimport sys\n"]
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    plain = LLM(None, dtype="float32", quantization="int4", num_threads=1).generate(prompts, params)
    spec = LLM(None, {"method": LOOKUP, "num_speculative_tokens": 4}, dtype="float32", quantization="int4",
               num_threads=1)
    outs = spec.generate(prompts, params)
    assert [o.token_ids for o in outs] == [o.token_ids for o in plain]
    layers = spec.model.model.layers
    assert isinstance(layers[0].mlp.down_proj, Int4Linear) and isinstance(spec.model.lm_head, Int8Linear)
    assert sum(o.metrics.num_accepted_tokens for o in outs) > 0


def test_the_cli_offers_every_quantization():
    """cli_run keeps torch out of its imports, so it spells the choices out: they must stay these."""
    import argparse

    from specpath_engine import cli_run
    from specpath_engine.quantization import QUANTIZATIONS

    parser = argparse.ArgumentParser()
    cli_run._add_engine_args(parser)
    action = next(a for a in parser._actions if a.dest == "quantization")
    assert tuple(action.choices) == QUANTIZATIONS


def test_a_drafter_quantization_the_engine_cannot_apply_is_one_line(tmp_path, test_methods):
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    with pytest.raises(ValueError, match=r"^speculative_config.quantization: 'fp8' is not a quantization the reference "
                                         r"engine applies to drafters; allowed: int8, int4, none$"):
        LLM(str(file), {"method": LOOKUP, "num_speculative_tokens": 4, "quantization": "fp8"})


def test_drafter_preparation_quantizes_modules_and_bare_head_rows():
    from specpath_engine.llm_engine import speculator_context
    from specpath_engine.testing.engine import random_llama

    for method, layer in (("int8", Int8Linear), ("int4", Int4Linear)):
        prepare = speculator_context(random_llama(0), draft_quantization=method).prepare_module
        module = prepare(nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 64)))
        assert all(type(m) is layer for m in module)
        assert type(prepare(nn.Linear(64, 32))) is Int8Linear  # kept head rows: int8, as a target's head under int4


def test_a_drafter_layer_int4_cannot_hold_gets_int8_where_asked():
    module = nn.Sequential(nn.Linear(64, 32), nn.Linear(64, 1))  # a one-output confidence row
    with pytest.raises(ValueError, match="a layer here is 1 x 64"):
        quantize_model_(nn.Sequential(nn.Linear(64, 32), nn.Linear(64, 1)), "int4")
    quantize_model_(module, "int4", int8_where_unfit=True)
    assert [type(m) for m in module] == [Int4Linear, Int8Linear]


@pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))
@given(sixteens=st.integers(1, 4), thirty_twos=st.integers(1, 6), rows=st.integers(1, 12), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_an_int8_layer_with_a_tile_copy_takes_it_from_tiles_from_rows(sixteens, thirty_twos, rows, seed):
    """Dual weights (``keep_tiles``, where the CPU has AMX tiles): fewer rows than
    ``TILES_FROM_ROWS`` stay on the int8 kernel (its bits), that many and more take the tile copy, the same products summed in
    another order (the fp32 sums agree to rounding); the copy costs two bytes a weight, is made
    once, and ``use_tiles_from(None)`` goes back to int8 alone. Without tiles, no copy is kept."""
    from specpath_engine.modeling.native import TILES_FROM_ROWS, kernels

    native = kernels()
    torch.manual_seed(seed)
    n, k = 16 * sixteens, 32 * thirty_twos
    q = Int8Linear(nn.Linear(k, n, bias=False).to(torch.bfloat16))
    x = (3 * torch.randn(rows, k)).to(torch.bfloat16)
    with torch.no_grad():
        int8 = q(x)
        added = q.keep_tiles()
        if not native.tiles:
            assert added == 0 and q.tiles_from_rows is None and torch.equal(q(x), int8)
            return
        assert added == 2 * n * k and q.keep_tiles() == 0 and q.tiles_from_rows == TILES_FROM_ROWS
        dual = q(x)
        tiled = native.q8_tiled(q.tiled_levels, q.scales_f32, x, x.new_empty(rows, n))
        assert torch.equal(dual, int8 if rows < TILES_FROM_ROWS else tiled)
        assert torch.equal(q(x[:1]), int8[:1])  # a lone row: the int8 kernel
        sums = native.q8_tiled(q.tiled_levels, q.scales_f32, x, torch.empty(rows, n))
        torch.testing.assert_close(sums, native.q8(q.qweight, q.scales_f32, x, torch.empty(rows, n)), rtol=1e-5,
                                   atol=1e-4)
        q.use_tiles_from(None)
        assert torch.equal(q(x), int8)


@pytest.mark.parametrize("method", ["int8", "int4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quantized_weights_are_the_quantised_models_on_plain_layers(method, dtype):
    """Training captures a quantised target's features on plain layers: the same logits and taps
    as the quantised model (up to the order of additions), a tied LM head untied, the embedding
    left as it was."""
    from specpath_engine.model import LlamaModel
    from specpath_engine.model import default_model_path
    from specpath_engine.quantization import quantized_weights_

    def load():
        return LlamaModel.from_pretrained(default_model_path(), dtype=dtype)

    plain = load()
    embedding = plain.model.embed_tokens.weight.clone()
    quantized_weights_(plain, method)
    assert all(type(m) is nn.Linear for m in plain.modules() if isinstance(m, nn.Linear | Int8Linear | Int4Linear))
    torch.testing.assert_close(plain.model.embed_tokens.weight, embedding, rtol=0, atol=0)
    quantized = quantize_model_(load(), method)
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(0))  # the same ids whatever ran before
    positions = torch.arange(24)
    a = plain.forward(ids, positions, hidden_layers=(1, 3))
    b = quantized.forward(ids, positions, hidden_layers=(1, 3))
    tol = 1e-4 if dtype == torch.float32 else 6e-2
    torch.testing.assert_close(a.logits.float(), b.logits.float(), rtol=tol, atol=tol)
    torch.testing.assert_close(a.hidden_states.float(), b.hidden_states.float(), rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="'fp4' is not supported"):
        quantized_weights_(plain, "fp4")
