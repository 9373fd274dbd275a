"""The native decoder stack (every layer in one call for one request) gives the per-layer path's
bits: logits, captured hidden states and the KV it writes, causal and under a token tree's mask,
over one run of KV slots or scattered blocks (the same bits either way); it is rebuilt when a
weight changes and steps aside elsewhere."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from specpath_engine.attention import PagedAttention, build_attention_metadata
from specpath_engine.kv_cache import KVCache
from specpath_engine.model import LlamaModel
from specpath_engine.model_config import LlamaConfig
from specpath_engine.tree_layout import Tree, apply_tree_attention
from specpath_engine.modeling import native
from specpath_engine.testing.native import native_kernels_missing

pytestmark = pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))

BLOCK = 4


def _model(weights: str, seed: int = 0) -> LlamaModel:
    """A 3-layer bf16 Llama prepared as the engine prepares a target (fused, then packed or quantised)."""
    from specpath_engine.llm import _inference_model

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=96, hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True)
    model = LlamaModel(config).to(torch.bfloat16).eval()
    return _inference_model(model, None if weights == "bf16" else weights, packed=weights == "bf16")


def _cache(model: LlamaModel, dtype=torch.bfloat16) -> KVCache:
    c = model.config
    return KVCache(num_layers=c.num_hidden_layers, num_blocks=16, block_size=BLOCK, num_kv_heads=c.num_key_value_heads,
                   head_dim=c.head_dim, dtype=dtype)


def _step(model, cache, blocks, history, ids, *, tree=None, hidden_layers=()):
    groups = model.config.num_attention_heads // model.config.num_key_value_heads
    meta, positions = build_attention_metadata(block_tables=[blocks], num_computed=[history],
                                               num_query_tokens=[len(ids)], block_size=BLOCK, num_query_groups=groups)
    if tree is not None:
        meta, positions = apply_tree_attention(meta, positions, trees=[tree], num_computed=[history], num_new=[1],
                                               num_query=[len(ids)], num_query_groups=groups)
    with torch.inference_mode():
        return model(torch.tensor(ids), positions, PagedAttention(cache, meta), hidden_layers=hidden_layers)


def _both_ways(model, blocks, history, ids, monkeypatch, **step):
    """(stack output, stack cache, per-layer output, per-layer cache, stack calls) for one step after
    a prefill of ``history`` tokens, each way on its own cache."""
    torch.manual_seed(1)
    prefix = torch.randint(0, 96, (history,)).tolist()
    results = []
    for use_stack in (True, False):
        with monkeypatch.context() as patch:
            if not use_stack:
                patch.setattr(LlamaModel, "_native_stack", lambda *args: None)
            calls = [0]
            original = type(native.kernels()).decoder_stack

            def counted(*args, **kwargs):
                calls[0] += 1
                return original(*args, **kwargs)

            patch.setattr(type(native.kernels()), "decoder_stack", counted)
            cache = _cache(model)
            if history:
                _step(model, cache, blocks, 0, prefix)
            results.append((_step(model, cache, blocks, history, ids, **step), cache, calls[0]))
    (stacked, stack_cache, calls), (per_layer, layer_cache, none) = results
    assert none == 0
    return stacked, stack_cache, per_layer, layer_cache, calls


@given(weights=st.sampled_from(["bf16", "int8", "int4"]), history=st.integers(0, 20), tokens=st.integers(1, 10),
       hidden=st.lists(st.integers(0, 2), max_size=3), first_block=st.integers(0, 4))
@settings(max_examples=25, deadline=None)
def test_the_stack_is_the_per_layer_path_to_the_bit(weights, history, tokens, hidden, first_block):
    model = _model(weights)
    blocks = list(range(first_block, first_block + (history + tokens + BLOCK - 1) // BLOCK))
    ids = torch.randint(0, 96, (tokens,), generator=torch.Generator().manual_seed(history)).tolist()
    with pytest.MonkeyPatch.context() as monkeypatch:
        stacked, stack_cache, per_layer, layer_cache, calls = _both_ways(
            model, blocks, history, ids, monkeypatch, hidden_layers=tuple(hidden))
    assert calls == 1 + bool(history)  # the prefill and the step both ran as one call
    assert torch.equal(stacked.logits, per_layer.logits)
    assert (stacked.hidden_states is None) == (per_layer.hidden_states is None) == (not hidden)
    if hidden:
        assert torch.equal(stacked.hidden_states, per_layer.hidden_states)
    assert torch.equal(stack_cache.data, layer_cache.data)  # the KV the next step reads


@given(weights=st.sampled_from(["bf16", "int4"]), history=st.integers(0, 12), tokens=st.integers(1, 5),
       hidden=st.lists(st.integers(0, 2), min_size=1, max_size=3), float_store=st.booleans(),
       strided=st.booleans(), seed=st.integers(0, 99))
@settings(max_examples=20, deadline=None)
def test_a_feature_store_gets_the_captured_rows_at_its_slots(weights, history, tokens, hidden, float_store, strided,
                                                             seed):
    """``hidden_store``: the captured layers land in the store's rows at the step's slots (written
    by the stack in its call, or copied after the per-layer path, for another dtype and for a
    store the stack may not write raw: a strided view), the rest of the store untouched,
    hidden_states None; logits as without a store."""
    model = _model(weights)
    blocks = list(range(1, 1 + (history + tokens + BLOCK - 1) // BLOCK))
    ids = torch.randint(0, 96, (history + tokens,), generator=torch.Generator().manual_seed(seed)).tolist()
    groups = model.config.num_attention_heads // model.config.num_key_value_heads
    results = []
    for use_stack in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            if not use_stack:
                patch.setattr(LlamaModel, "_native_stack", lambda *args: None)
            dtype = torch.float32 if float_store else torch.bfloat16
            store = (torch.full((16 * BLOCK, len(hidden), 256), 7.0, dtype=dtype)[:, :, ::2] if strided else
                     torch.full((16 * BLOCK, len(hidden), 128), 7.0, dtype=dtype))
            plain = []
            for with_store in (False, True):
                cache = _cache(model)
                if history:
                    _step(model, cache, blocks, 0, ids[:history])
                meta, positions = build_attention_metadata(block_tables=[blocks], num_computed=[history],
                                                           num_query_tokens=[tokens], block_size=BLOCK,
                                                           num_query_groups=groups)
                with torch.inference_mode():
                    out = model(torch.tensor(ids[history:]), positions, PagedAttention(cache, meta),
                                hidden_layers=tuple(hidden),
                                hidden_store=(store, meta.slot_mapping) if with_store else None)
                plain.append((out, meta.slot_mapping))
            (bare, slots), (stored, _) = plain
            assert stored.hidden_states is None and torch.equal(bare.logits, stored.logits)
            assert torch.equal(store[slots], bare.hidden_states.to(store.dtype))
            rest = torch.ones(store.shape[0], dtype=torch.bool)
            rest[slots] = False
            assert bool((store[rest] == 7.0).all())
            results.append(store)
    assert torch.equal(results[0], results[1])


def test_a_token_tree_reads_its_mask_in_the_stack(monkeypatch):
    model = _model("bf16")
    tree = Tree(tokens=[5, 6, 7, 8, 9], parents=[-1, 0, 0, 1, -1])
    stacked, stack_cache, per_layer, layer_cache, calls = _both_ways(
        model, [2, 3, 4, 5], 9, [3, *tree.tokens], monkeypatch, tree=tree)
    assert calls == 2
    assert torch.equal(stacked.logits, per_layer.logits)
    assert torch.equal(stack_cache.data, layer_cache.data)


def test_a_replaced_weight_rebuilds_the_stack(monkeypatch):
    model = _model("bf16")
    first = _both_ways(model, [0, 1], 5, [1, 2], monkeypatch)[0].logits
    stack = model.__dict__["_stack"]
    layer = model.model.layers[1]
    layer.mlp.down_proj = type(layer.mlp.down_proj)(nn.Linear(256, 128, bias=False).bfloat16())
    stacked, _, per_layer, _, calls = _both_ways(model, [0, 1], 5, [1, 2], monkeypatch)
    assert calls == 2 and model.__dict__["_stack"] is not stack
    assert torch.equal(stacked.logits, per_layer.logits) and not torch.equal(stacked.logits, first)
    norm = model.model.layers[0].post_attention_layernorm
    norm.weight = nn.Parameter(norm.weight * 2, requires_grad=False)  # a replaced norm weight, too
    stacked, _, per_layer, _, _ = _both_ways(model, [0, 1], 5, [1, 2], monkeypatch)
    assert torch.equal(stacked.logits, per_layer.logits)


def test_a_weight_moved_under_the_same_tensor_rebuilds_the_stack(monkeypatch):
    model = _model("int8")
    _both_ways(model, [0, 1], 5, [1, 2], monkeypatch)
    stack = model.__dict__["_stack"]
    assert stack.valid()
    down = model.model.layers[2].mlp.down_proj
    down.qweight.data = down.qweight.data.clone()  # same tensor object, other memory: the old is freed
    assert not stack.valid()
    assert model.model.layers[2].native_linears()[3].weight == down.qweight.data_ptr()  # the descriptor, too
    stacked, _, per_layer, _, calls = _both_ways(model, [0, 1], 5, [1, 2], monkeypatch)
    assert calls == 2 and model.__dict__["_stack"] is not stack
    assert torch.equal(stacked.logits, per_layer.logits)
    model.to(torch.bfloat16)  # _apply may swap buffers without a registration hook: the stack goes
    assert "_stack" not in model.__dict__


@given(weights=st.sampled_from(["bf16", "int4"]), history=st.integers(1, 20), tokens=st.integers(1, 6),
       seed=st.integers(0, 2**16), tree=st.booleans())
@settings(max_examples=20, deadline=None)
def test_scattered_blocks_give_one_runs_bits(weights, history, tokens, seed, tree):
    """A request's output does not depend on where its blocks lie (the allocator's state)."""
    model = _model(weights)
    n = (history + tokens + BLOCK - 1) // BLOCK
    scattered = torch.randperm(16, generator=torch.Generator().manual_seed(seed))[:n].tolist()
    ids = torch.randint(0, 96, (tokens,), generator=torch.Generator().manual_seed(seed)).tolist()
    step = {"tree": Tree(tokens=ids[1:], parents=[-1, *range(len(ids) - 2)][: len(ids) - 1])} if tree and tokens > 1 else {}
    runs = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for blocks in (list(range(n)), scattered):
            stacked, cache, per_layer, _, calls = _both_ways(model, blocks, history, ids, monkeypatch, **step)
            assert calls == 2 and torch.equal(stacked.logits, per_layer.logits)
            slots = [blocks[p // BLOCK] * BLOCK + p % BLOCK for p in range(history + tokens)]
            runs.append((stacked.logits, cache.data[:, :, slots]))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


@pytest.mark.parametrize("case", ["two requests", "float32 cache"])
def test_the_stack_steps_aside_where_the_native_attention_would(case):
    model = _model("bf16")
    groups = model.config.num_attention_heads // model.config.num_key_value_heads
    tables, computed, query = {"two requests": ([[0], [1]], [0, 0], [2, 2]),
                               "float32 cache": ([[0, 1]], [4], [2])}[case]
    meta, _ = build_attention_metadata(block_tables=tables, num_computed=computed, num_query_tokens=query,
                                       block_size=BLOCK, num_query_groups=groups)
    cache = _cache(model, torch.float32 if case == "float32 cache" else torch.bfloat16)
    assert PagedAttention(cache, meta).one_request() is None
