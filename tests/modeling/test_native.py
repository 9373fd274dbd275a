"""The native CPU kernels: each matmul row is its dequantised weight's product and does not depend
on the other rows; the element-wise ops round as the torch code they replace; the fused decoder
layer is the per-op path to the bit; without a compiler (or switched off) everything falls back
to torch with a one-line reason."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from specpath_engine.modeling import native
from specpath_engine.modeling.rope import rotate_half

KERNELS = native.kernels()
needs_kernels = pytest.mark.skipif(KERNELS is None, reason=f"native kernels unavailable: {native.unavailable_reason()}")


def _q4_layer(out_features, in_features, seed):
    from specpath_engine.quantization import Int4Linear

    torch.manual_seed(seed)
    return Int4Linear(nn.Linear(in_features, out_features, bias=False).bfloat16())


def _q8_layer(out_features, in_features, seed):
    from specpath_engine.quantization import Int8Linear

    torch.manual_seed(seed)
    return Int8Linear(nn.Linear(in_features, out_features, bias=False).bfloat16())


def _bf16_layer(out_features, in_features, seed):
    from specpath_engine.packed_linear import PackedLinear

    torch.manual_seed(seed)
    return PackedLinear(nn.Linear(in_features, out_features, bias=False).bfloat16())


LAYERS = {4: _q4_layer, 8: _q8_layer, 16: _bf16_layer}


def _rows_alone(layer, x):
    return torch.cat([layer(x[i : i + 1]) for i in range(x.shape[0])])


@needs_kernels
@given(bits=st.sampled_from(sorted(LAYERS)), pairs=st.integers(1, 8), k_groups=st.integers(1, 4),
       rows=st.integers(1, 2 * native.MAX_ROWS + 3),
       seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_each_row_is_its_dequantised_product_whatever_else_is_in_the_batch(bits, pairs, k_groups, rows, seed):
    out_features, in_features = 16 * pairs, 64 * k_groups
    layer = LAYERS[bits](out_features, in_features, seed)
    assert layer.native and layer.native_linear().bits == bits
    x = torch.randn(rows, in_features).bfloat16()
    out = layer(x)
    assert out.dtype == torch.bfloat16 and out.shape == (rows, out_features)
    weight = layer.dense_weight() if bits == 16 else layer.dequantized_weight()
    expected = x.float() @ weight.float().T
    torch.testing.assert_close(out.float(), expected, rtol=1e-2, atol=1e-2 * float(expected.abs().max()))
    # more than MAX_ROWS rows run in passes; every row gets the same bits alone or in any batch
    assert torch.equal(_rows_alone(layer, x), out)


needs_vnni = pytest.mark.skipif(KERNELS is None or not KERNELS.vnni, reason="no AVX512-VNNI (or SPECPATH_VNNI=0)")


def _int16_reference(weight, scales, x):
    """What q8a16 computes, the products in float64: each row rounded to int16 levels at its own
    scale (its largest magnitude at the top level the K-long int32 sums allow) in fp32 as the
    kernel rounds them (x times top / largest, to nearest even), times the int8 weight."""
    k = x.shape[1]
    top = torch.tensor(float(min(32767, (1 << 31) // (128 * (k // 16 + 1)) - 1)))
    x = x.float()
    largest = x.abs().amax(dim=1, keepdim=True)
    inv = torch.where(largest > 0, top / torch.where(largest > 0, largest, 1), 0)
    levels = torch.round(x * inv).clamp(-32768, 32767)
    step = torch.where(largest > 0, largest / top, 0)
    return (levels.double() * step.double()) @ (weight.double() * scales.double()[:, None]).T


@needs_vnni
@given(pairs=st.integers(1, 8), thirty_twos=st.integers(1, 12), rows=st.integers(1, 2 * native.MAX_ROWS + 3),
       spread=st.sampled_from([0.0, 1.0, 6.0]), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_int16_activations_give_each_row_its_product_whatever_else_is_in_the_batch(pairs, thirty_twos, rows,
                                                                                     spread, seed):
    """q8a16 (a drafter's int8 layer on AVX512-VNNI): each row quantised to int16 at its own
    scale, the int8 products summed exactly; within fp32 rounding of that product in float64,
    within 1e-3 of the largest output of the bf16 path's, a zero row gives zeros, and a row's
    bits do not depend on the batch (the quad and pair loops sum the same int32 lanes)."""
    torch.manual_seed(seed)
    n, k = 16 * pairs, 32 * thirty_twos
    layer = _q8_layer(n, k, seed)
    # rows with outliers too (spread: log-normal magnitudes), and an all-zero row
    x = (torch.randn(rows, k) * torch.exp(spread * torch.randn(rows, k))).bfloat16()
    x[rows // 2] = 0
    out = KERNELS.q8a16(layer.qweight, layer.scales_f32, x, torch.empty(rows, n))
    expected = _int16_reference(layer.qweight, layer.scales_f32, x.float())
    # fp32 rounding of the int32 lanes, their sum and the two scales: relative to the sum of the
    # products' magnitudes (an output that cancels to near zero keeps its lanes' rounding)
    magnitude = _int16_reference(layer.qweight.double().abs(), layer.scales_f32.abs(), x.float().abs())
    assert ((out.double() - expected).abs() <= 8 * 2.0**-24 * magnitude + 1e-30).all()
    bf16 = KERNELS.q8(layer.qweight, layer.scales_f32, x, torch.empty(rows, n))
    assert float((out - bf16).abs().max()) <= 1e-3 * float(bf16.abs().max()) + 1e-30
    assert not out[rows // 2].any()
    alone = torch.cat([KERNELS.q8a16(layer.qweight, layer.scales_f32, x[i:i + 1], torch.empty(1, n))
                       for i in range(rows)])
    assert torch.equal(alone, out)


@needs_vnni
def test_int16_activations_stay_inside_int32_over_a_long_row():
    """The top level shrinks with K so no lane's int32 sum overflows: a 16,384-wide row of equal
    largest values against weights of -127 everywhere still gives the float product."""
    n, k = 16, 16384
    weight = torch.full((n, k), -127, dtype=torch.int8)
    scales = torch.full((n,), 0.01)
    x = torch.full((1, k), 3.0).bfloat16()
    out = KERNELS.q8a16(weight, scales, x, torch.empty(1, n))
    torch.testing.assert_close(out, torch.full((1, n), -127 * 0.01 * 3.0 * k), rtol=1e-5, atol=0)


@needs_vnni
def test_a_drafter_int8_layer_takes_int16_activations_and_its_descriptor_follows():
    """``use_int16_activations``: the layer's forward and its native descriptor (what a drafter's
    native form reads) both switch to q8a16 for passes of up to ``INT16_ACTIVATION_ROWS`` rows;
    ``quantize_model_(int16_activations=True)`` sets it on every int8 layer, and a target's
    layers never have it."""
    from specpath_engine.quantization import Int8Linear, quantize_model_

    layer = _q8_layer(64, 128, 3)
    x = torch.randn(3, 128).bfloat16()
    descriptor = layer.native_linear()
    assert descriptor.int16_activations == 0
    with torch.no_grad():
        before = layer(x)
        assert layer.use_int16_activations()
        after = layer(x)
    assert descriptor.int16_activations == 1 and layer.native_linear() is descriptor
    assert torch.equal(after, KERNELS.q8a16(layer.qweight, layer.scales_f32, x, torch.empty(3, 64)).bfloat16())
    assert torch.equal(KERNELS.linear(descriptor, x, torch.empty(3, 64, dtype=torch.bfloat16)), after)
    # a pass of more rows than INT16_ACTIVATION_ROWS takes the bf16-activation kernel, on both paths
    many = torch.randn(native.INT16_ACTIVATION_ROWS + 2, 128).bfloat16()
    with torch.no_grad():
        wide = layer(many)
    assert torch.equal(wide, KERNELS.q8(layer.qweight, layer.scales_f32, many, torch.empty(len(many), 64)).bfloat16())
    assert torch.equal(KERNELS.linear(descriptor, many, torch.empty(len(many), 64, dtype=torch.bfloat16)), wide)
    torch.testing.assert_close(after.float(), before.float(), rtol=2e-2, atol=1e-2 * float(before.abs().max()))
    drafter = quantize_model_(nn.Sequential(nn.Linear(128, 64), nn.Linear(64, 32)).bfloat16(), "int8",
                              int16_activations=True)
    target = quantize_model_(nn.Sequential(nn.Linear(128, 64)).bfloat16(), "int8")
    assert all(m.int16_activations for m in drafter) and not target[0].int16_activations
    assert "int16 activations" in repr(drafter[0]) and isinstance(target[0], Int8Linear)


@needs_kernels
@given(blocks_out=st.integers(1, 5), blocks_in=st.integers(1, 4), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_the_tile_layout_round_trips(blocks_out, blocks_in, seed):
    torch.manual_seed(seed)
    weight = torch.randn(16 * blocks_out, 32 * blocks_in).bfloat16()
    packed = KERNELS.tile_pack(weight)
    assert packed.shape == weight.shape
    assert torch.equal(KERNELS.tile_unpack(packed), weight)


needs_tiles = pytest.mark.skipif(KERNELS is None or not KERNELS.tiles, reason="this CPU has no AMX-BF16 tiles")


def _plain(weight, x, out):
    return KERNELS.bf16(weight, x, out)


def _tiled(weight, x, out):
    return KERNELS.bf16_tiled(KERNELS.tile_pack(weight), x, out)


@needs_kernels
@pytest.mark.parametrize("matmul", [_plain, pytest.param(_tiled, marks=needs_tiles)], ids=["avx512", "amx"])
@given(blocks_out=st.integers(1, 7), blocks_in=st.integers(1, 3), rows=st.integers(1, 35), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_each_bf16_kernel_gives_a_row_its_product_whatever_else_is_in_the_batch(matmul, blocks_out, blocks_in,
                                                                                 rows, seed):
    torch.manual_seed(seed)
    n, k = 16 * blocks_out, 32 * blocks_in
    weight, x = torch.randn(n, k).bfloat16(), torch.randn(rows, k).bfloat16()
    out = matmul(weight, x, torch.empty(rows, n))  # fp32 sums
    expected = x.float() @ weight.float().T
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5 * float(expected.abs().max()))
    alone = torch.cat([matmul(weight, x[i:i + 1].contiguous(), torch.empty(1, n)) for i in range(rows)])
    assert torch.equal(alone, out)
    assert torch.equal(matmul(weight, x, torch.empty(rows, n, dtype=torch.bfloat16)), out.bfloat16())


@needs_kernels
def test_fp32_output_is_the_unrounded_sum():
    layer = _q4_layer(32, 128, 0)
    x = torch.randn(3, 128).bfloat16()
    full = KERNELS.q4(layer.levels, layer.scale_mins, x, torch.empty(3, 32))
    torch.testing.assert_close(full, x.float() @ layer.dequantized_weight().float().T, rtol=1e-5, atol=1e-5)
    assert torch.equal(full.bfloat16(), layer(x))


@needs_kernels
@given(rows=st.integers(1, 6), width=st.sampled_from([16, 64, 576]), scale=st.floats(0.01, 100.0),
       seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_rms_norm_and_the_residual_add_round_as_torch(rows, width, scale, seed):
    torch.manual_seed(seed)
    x, delta = (torch.randn(rows, width) * scale).bfloat16(), torch.randn(rows, width).bfloat16()
    weight = torch.randn(width).bfloat16()
    expected = weight * F.rms_norm(x.float(), (width,), None, 1e-5).bfloat16()
    # only the order of the sum of squares differs from torch: at most one bf16 step
    torch.testing.assert_close(KERNELS.rms_norm(x, weight, 1e-5), expected, rtol=2**-7, atol=0)
    total, normed = KERNELS.add_rms_norm(x, delta, weight, 1e-5)
    assert torch.equal(total, x + delta)
    torch.testing.assert_close(normed, KERNELS.rms_norm(total, weight, 1e-5), rtol=0, atol=0)


@needs_kernels
@given(tokens=st.integers(1, 5), heads=st.integers(1, 4), head_dim=st.sampled_from([32, 64, 128]),
       seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_rope_is_torchs_to_the_bit_on_a_strided_view(tokens, heads, head_dim, seed):
    torch.manual_seed(seed)
    packed = torch.randn(tokens, (heads + 3) * head_dim).bfloat16()
    x = packed[:, : heads * head_dim].view(tokens, heads, head_dim)  # q's view of a fused qkv row
    cos, sin = torch.randn(tokens, head_dim).bfloat16(), torch.randn(tokens, head_dim).bfloat16()
    expected = x * cos.unsqueeze(-2) + rotate_half(x) * sin.unsqueeze(-2)
    assert torch.equal(KERNELS.rope(x, cos, sin), expected)


@needs_kernels
@given(rows=st.integers(1, 4), width=st.sampled_from([16, 48, 1536]), scale=st.floats(0.1, 30.0),
       seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_silu_mul_rounds_as_torch(rows, width, scale, seed):
    torch.manual_seed(seed)
    gate_up = (torch.randn(rows, 2 * width) * scale).bfloat16()
    gate, up = gate_up.chunk(2, dim=-1)
    expected = F.silu(gate) * up
    # the exponential may differ from torch's in its last fp32 bits: at most one bf16 step, and
    # rarely where it is accurate (a gate above -20); far below, silu(gate) ~ gate * exp(gate) is
    # tiny (1e-27 at -60) and the approximation's relative error there flips more roundings
    # (2 of 96 seen at rows=2, width=48, scale=30, seed=842)
    out = KERNELS.silu_mul(gate_up)
    torch.testing.assert_close(out, expected, rtol=2**-7, atol=1e-30)
    accurate = gate.float() > -20
    assert int(((out != expected) & accurate).sum()) <= max(1, int(accurate.sum()) // 200)


def _tiny_int4_model(seed=0):
    from specpath_engine.model import LlamaModel
    from specpath_engine.model_config import LlamaConfig
    from specpath_engine.quantization import quantize_model_

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True)
    model = LlamaModel(config).to(torch.bfloat16).eval()
    return quantize_model_(model.fuse_projections(), "int4")


@needs_kernels
@pytest.mark.parametrize("tokens", [1, 5, 12])
def test_the_fused_layer_is_the_per_op_path_to_the_bit(tokens, monkeypatch):
    from specpath_engine.model import DecoderLayer

    model = _tiny_int4_model()
    ids, positions = torch.randint(0, 96, (tokens,)), torch.arange(tokens)
    with torch.inference_mode():
        assert all(layer.native_linears() for layer in model.model.layers)
        fused = model(ids, positions).logits
        # the per-op path: native matmuls, norms, RoPE, SiLU one by one
        monkeypatch.setattr(DecoderLayer, "native_linears", lambda self: None)
        per_op = model(ids, positions).logits
    assert torch.equal(fused, per_op)


@needs_kernels
def test_a_replaced_or_moved_weight_is_never_read_through_a_stale_pointer():
    from specpath_engine.quantization import Int4Linear

    model = _tiny_int4_model()
    layer = model.model.layers[0]
    first = layer.native_linears()
    assert layer.native_linears()[0] is first[0]  # cached while the tensors stay
    down = layer.mlp.down_proj
    layer.mlp.down_proj = Int4Linear(nn.Linear(256, 128, bias=False).bfloat16())
    assert layer.native_linears()[3].weight != first[3].weight
    layer.mlp.down_proj = down
    down.levels = down.levels.clone()  # a replaced buffer
    assert layer.native_linears()[3].weight == down.levels.data_ptr() != first[3].weight


@needs_kernels
def test_a_drafter_layer_runs_its_halves_natively_and_equals_the_per_op_path(monkeypatch):
    from specpath_engine.packed_linear import pack_linears_
    from specpath_engine.modeling.layers import DraftLayer, LayerShape
    from specpath_engine.modeling.rope import RotaryEmbedding

    torch.manual_seed(0)
    shape = LayerShape(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
                       head_dim=32, vocab_size=50)
    layer = DraftLayer(shape, attn_in=128).to(torch.bfloat16).eval()
    layer.fuse_projections()
    pack_linears_(layer)
    cos, sin = RotaryEmbedding(theta=1e4, head_dim=32, scaling=None, max_position_embeddings=64).to(torch.bfloat16)(
        torch.arange(3))
    x, residual = torch.randn(3, 128).bfloat16(), torch.randn(3, 64).bfloat16()

    def attend(q, k, v):
        return q  # any function of q/k/v; identical in both paths

    with torch.inference_mode():
        assert layer.native_linears() is not None
        native_out = layer(x, residual, cos, sin, attend)
        monkeypatch.setattr(DraftLayer, "native_linears", lambda self: None)
        per_op = layer(x, residual, cos, sin, attend)
    assert torch.equal(native_out, per_op)


def test_projections_fuse_into_the_same_products():
    from specpath_engine.model import LlamaModel
    from specpath_engine.model_config import LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, attention_bias=True)
    model = LlamaModel(config).eval()
    ids, positions = torch.randint(0, 50, (6,)), torch.arange(6)
    with torch.no_grad():
        before = model(ids, positions).logits
        model.fuse_projections()
        after = model(ids, positions).logits
    assert not hasattr(model.model.layers[0].self_attn, "q_proj")
    assert not hasattr(model.model.layers[0].mlp, "gate_proj")
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)


@pytest.fixture
def fresh_load(monkeypatch, tmp_path):
    """A new build attempt with its own cache; the process's kernels come back afterwards."""
    monkeypatch.setenv("SPECPATH_CACHE_DIR", str(tmp_path))
    native._load.cache_clear()
    yield monkeypatch
    native._load.cache_clear()


def test_switched_off_the_layers_keep_torchs_kernels(fresh_load):
    from specpath_engine.quantization import Int4Linear, Int8Linear

    fresh_load.setenv(native.ENV_SWITCH, "0")
    assert native.kernels() is None and native.unavailable_reason() == "SPECPATH_NATIVE=0"
    torch.manual_seed(0)
    linear = nn.Linear(128, 32, bias=False).bfloat16()
    for layer in (Int4Linear(linear), Int8Linear(linear)):
        assert not layer.native and layer.native_linear() is None
        x = torch.randn(3, 128).bfloat16()
        expected = x.float() @ layer.dequantized_weight().float().T
        torch.testing.assert_close(layer(x).float(), expected, rtol=5e-2, atol=5e-2)


def test_without_a_compiler_the_reason_is_one_line(fresh_load):
    fresh_load.setenv("CC", "/nonexistent/cc")
    assert native.kernels() is None
    reason = native.unavailable_reason()
    assert reason == "the C compiler /nonexistent/cc could not run: No such file or directory"


def test_a_failed_build_says_why_in_one_line(fresh_load, tmp_path):
    compiler = tmp_path / "cc"
    compiler.write_text("#!/bin/sh\necho 'cc: error: unrecognized option' >&2\nexit 1\n")
    compiler.chmod(0o755)
    fresh_load.setenv("CC", str(compiler))
    assert native.kernels() is None
    assert native.unavailable_reason() == "cc could not build the native kernels: cc: error: unrecognized option"


@needs_kernels
def test_a_build_is_cached_by_source_and_flags(fresh_load, tmp_path):
    assert native.kernels() is not None
    built = list((tmp_path / "native").glob("specpath_native-*.so"))
    assert len(built) == 1
    native._load.cache_clear()
    assert native.kernels() is not None
    assert list((tmp_path / "native").glob("*")) == built  # reused, nothing rebuilt beside it


def test_a_changed_header_is_a_new_build(fresh_load, tmp_path):
    """The sources include common.h: a build with another header must not be taken from the cache."""
    header = tmp_path / "common.h"
    header.write_text("/* one version */\n")
    fresh_load.setattr(native, "HEADERS", (header,))
    compiler = tmp_path / "cc"  # records each build and writes a file that is no library
    compiler.write_text(f"#!/bin/sh\necho built >> {tmp_path}/builds\n"
                        'while [ $# -gt 0 ]; do if [ "$1" = -o ]; then shift; echo stub > "$1"; fi; shift; done\n')
    compiler.chmod(0o755)
    fresh_load.setenv("CC", str(compiler))
    for version in ("one", "one", "two"):
        header.write_text(f"/* {version} version */\n")
        native._load.cache_clear()
        assert native.kernels() is None  # the stub does not load
    assert (tmp_path / "builds").read_text().count("built") == 2  # "one" built once, cached; "two" built again


def _reference_attention(q, key_cache, value_cache, length):
    tokens, heads, _ = q.shape
    group = heads // key_cache.shape[1]
    keys = key_cache[:length].float().transpose(0, 1).repeat_interleave(group, 0)
    values = value_cache[:length].float().transpose(0, 1).repeat_interleave(group, 0)
    allowed = torch.arange(length)[None, :] <= (length - tokens + torch.arange(tokens))[:, None]
    out = F.scaled_dot_product_attention(q.float().transpose(0, 1), keys, values, attn_mask=allowed)
    return out.transpose(0, 1)


@needs_kernels
@given(history=st.integers(0, 40), tokens=st.integers(1, 6), kv_heads=st.integers(1, 3), group=st.integers(1, 3),
       head_dim=st.sampled_from([32, 64]), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_attention_writes_the_new_keys_and_attends_causally_row_by_row(history, tokens, kv_heads, group, head_dim, seed):
    torch.manual_seed(seed)
    heads, length = kv_heads * group, history + tokens
    key_cache = torch.randn(length + 3, kv_heads, head_dim).bfloat16()
    value_cache = torch.randn(length + 3, kv_heads, head_dim).bfloat16()
    qkv = torch.randn(tokens, heads + 2 * kv_heads, head_dim).bfloat16()  # the fused layer's strided views
    q, k, v = qkv[:, :heads], qkv[:, heads : heads + kv_heads], qkv[:, heads + kv_heads :]
    beyond = key_cache[length:].clone()
    out = KERNELS.attention(q, k, v, key_cache, value_cache, length)
    assert torch.equal(key_cache[history:length], k) and torch.equal(value_cache[history:length], v)
    assert torch.equal(key_cache[length:], beyond)
    torch.testing.assert_close(out.float(), _reference_attention(q, key_cache, value_cache, length), rtol=2e-2, atol=2e-2)
    # each new token alone, in order, gets the same bits as all of them at once
    alone = [KERNELS.attention(q[i : i + 1], k[i : i + 1], v[i : i + 1], key_cache, value_cache, history + i + 1)
             for i in range(tokens)]
    assert torch.equal(torch.cat(alone), out)


@needs_kernels
@pytest.mark.parametrize("threads", [1, 2])
def test_attention_over_a_wide_score_span_flushes_only_inside_the_call(threads):
    """Scores spanning hundreds (far keys' weights at the bottom of float's range, their products
    with the values denormal: flushed inside the call) give the reference's attention, and the
    caller's floating-point environment is restored: torch still produces denormals after it."""
    torch.manual_seed(0)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        key_cache = torch.randn(120, 3, 64).bfloat16()
        key_cache[::3] *= 40  # some keys score far above the rest, some far below
        value_cache = torch.randn(120, 3, 64).bfloat16()
        qkv = (torch.randn(4, 15, 64) * 4).bfloat16()
        q, k, v = qkv[:, :9], qkv[:, 9:12], qkv[:, 12:]
        out = KERNELS.attention(q, k, v, key_cache, value_cache, 112)
        torch.testing.assert_close(out.float(), _reference_attention(q, key_cache, value_cache, 112),
                                   rtol=2e-2, atol=2e-2)
        tiny = torch.tensor([1e-38], dtype=torch.float32) * 0.5
        assert 0 < float(tiny) < torch.finfo(torch.float32).tiny  # still a denormal, not flushed
    finally:
        torch.set_num_threads(before)


@needs_kernels
@given(history=st.integers(1, 20), nodes=st.integers(1, 6), seed=st.integers(0, 2**16))
@settings(max_examples=30, deadline=None)
def test_a_tree_row_gets_the_bits_of_a_chain_over_the_keys_it_sees(history, nodes, seed):
    """A masked row runs over its visible keys in order: its result is a causal row's over a cache
    holding just those keys (so the accepted path of a tree verifies as a chain would)."""
    torch.manual_seed(seed)
    kv_heads, heads, head_dim, length = 1, 2, 32, history + nodes
    mask = _tree_mask(history, nodes, torch.Generator().manual_seed(seed))
    key_cache = torch.randn(length, kv_heads, head_dim).bfloat16()
    value_cache = torch.randn(length, kv_heads, head_dim).bfloat16()
    qkv = torch.randn(nodes, heads + 2 * kv_heads, head_dim).bfloat16()
    q, k, v = qkv[:, :heads], qkv[:, heads : heads + kv_heads], qkv[:, heads + kv_heads :]
    out = KERNELS.attention(q, k, v, key_cache, value_cache, length, mask)
    for i in range(nodes):
        seen = mask[i].nonzero().squeeze(1)
        keys, values = key_cache[seen].clone(), value_cache[seen].clone()
        last = len(seen) - 1
        chain = KERNELS.attention(q[i : i + 1], keys[last:], values[last:], keys, values, len(seen))
        assert torch.equal(chain, out[i : i + 1])


@needs_kernels
def test_disabled_builds_torch_layers_and_gives_the_kernels_back():
    from specpath_engine.quantization import Int4Linear

    linear = nn.Linear(128, 32, bias=False).bfloat16()
    with native.disabled():
        assert native.kernels() is None
        on_torch = Int4Linear(linear)
    assert native.kernels() is not None and not on_torch.native and Int4Linear(linear).native
    x = torch.randn(2, 128).bfloat16()
    torch.testing.assert_close(on_torch(x), Int4Linear(linear)(x), rtol=5e-2, atol=5e-2)


def _tree_mask(history: int, nodes: int, generator: torch.Generator) -> torch.Tensor:
    """bool ``[nodes, history + nodes]``: the history, then each node's ancestors and itself."""
    parents = [-1] + [int(torch.randint(-1, i, (), generator=generator)) for i in range(1, nodes)]
    mask = torch.zeros(nodes, history + nodes, dtype=torch.bool)
    mask[:, :history] = True
    for i in range(nodes):
        j = i
        while j >= 0:
            mask[i, history + j] = True
            j = parents[j]
    return mask


@needs_kernels
@given(requests=st.lists(st.tuples(st.integers(0, 30), st.integers(1, 5)), min_size=1, max_size=5),
       kv_heads=st.integers(1, 3), group=st.integers(1, 3), head_dim=st.sampled_from([32, 64]),
       tree=st.booleans(), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_batched_attention_is_each_requests_attention_alone(requests, kv_heads, group, head_dim, tree, seed):
    """Requests (history, new tokens) at scattered slots of one cache, in one call: the new keys
    land at their slots, each request's rows are torch's attention over its own keys (causal, or
    a tree's mask) and the bits the one-request kernel gives it alone."""
    g = torch.Generator().manual_seed(seed)
    heads, lengths = kv_heads * group, [h + n for h, n in requests]
    num_slots = sum(lengths) + 5
    order = torch.randperm(num_slots, generator=g)  # every request's positions scattered over the cache
    width = max(lengths)
    slots = torch.zeros(len(requests), width, dtype=torch.int64)
    at = 0
    for b, length in enumerate(lengths):
        slots[b, :length] = order[at : at + length]
        at += length
    key_cache = torch.randn(num_slots, kv_heads, head_dim, generator=g).bfloat16()
    value_cache = torch.randn(num_slots, kv_heads, head_dim, generator=g).bfloat16()
    tokens = sum(n for _, n in requests)
    qkv = torch.randn(tokens, heads + 2 * kv_heads, head_dim, generator=g).bfloat16()
    q, k, v = qkv[:, :heads], qkv[:, heads : heads + kv_heads], qkv[:, heads + kv_heads :]
    masks = [_tree_mask(h, n, g) if tree else None for h, n in requests]
    grid = None
    if tree:  # [B, Q, L] padded as the engine's layout pads, the padding never read
        grid = torch.ones(len(requests), max(n for _, n in requests) + 1, width + 2, dtype=torch.bool)
        for b, m in enumerate(masks):
            grid[b, : m.shape[0], : m.shape[1]] = m
    starts = torch.tensor([0, *torch.tensor([n for _, n in requests]).cumsum(0).tolist()], dtype=torch.int64)
    before_k, before_v = key_cache.clone(), value_cache.clone()
    out = KERNELS.attention_batch(q, k, v, key_cache, value_cache, starts, torch.tensor(lengths), slots, grid)
    for b, ((history, n), length) in enumerate(zip(requests, lengths)):
        rows, own = slice(int(starts[b]), int(starts[b + 1])), slots[b, :length]
        assert torch.equal(key_cache[own[history:]], k[rows]) and torch.equal(value_cache[own[history:]], v[rows])
        alone_k, alone_v = before_k.clone(), before_v.clone()
        alone = KERNELS.attention(q[rows], k[rows], v[rows], alone_k, alone_v, length, masks[b], own.contiguous())
        assert torch.equal(out[rows], alone)
        keys = key_cache[own].float().transpose(0, 1).repeat_interleave(group, 0)  # [H, L, D]
        values = value_cache[own].float().transpose(0, 1).repeat_interleave(group, 0)
        allowed = masks[b] if tree else torch.arange(length)[None, :] <= (history + torch.arange(n))[:, None]
        want = F.scaled_dot_product_attention(q[rows].float().transpose(0, 1), keys, values, attn_mask=allowed)
        torch.testing.assert_close(out[rows].float(), want.transpose(0, 1), rtol=2e-2, atol=2e-2)
    untouched = torch.ones(num_slots, dtype=torch.bool)
    for b, ((history, _), length) in enumerate(zip(requests, lengths)):
        untouched[slots[b, history:length]] = False
    assert torch.equal(key_cache[untouched], before_k[untouched])
