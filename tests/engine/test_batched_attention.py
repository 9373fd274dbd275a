"""A batched step on the native attention (every request of the step in one call per layer) gives
each request the bits it gets stepped alone: ragged histories and query counts, scattered blocks,
token trees beside chains. The torch path stays the reference and the fallback (a float32 cache),
and agrees within bf16's precision."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.attention import PagedAttention, build_attention_metadata
from specpath_engine.kv_cache import KVCache
from specpath_engine.model import LlamaModel
from specpath_engine.model_config import LlamaConfig
from specpath_engine.modeling import native
from specpath_engine.testing.native import native_kernels_missing
from specpath_engine.tree_layout import Tree, apply_tree_attention

pytestmark = pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))

BLOCK, BLOCKS, VOCAB = 4, 40, 96


def _model() -> LlamaModel:
    """A 3-layer bf16 Llama prepared as the engine prepares a target (fused, packed)."""
    from specpath_engine.llm import _inference_model

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True)
    return _inference_model(LlamaModel(config).to(torch.bfloat16).eval(), packed=True)


MODEL = _model() if native_kernels_missing() is None else None
GROUPS = 2


def _cache(dtype=torch.bfloat16) -> KVCache:
    return KVCache(num_layers=3, num_blocks=BLOCKS, block_size=BLOCK, num_kv_heads=2, head_dim=32, dtype=dtype)


def _step(cache, tables, computed, ids, trees=None, num_new=None):
    """One step of requests ``b`` (``ids[b]`` after ``computed[b]`` positions); ``trees[b]``: the
    last tokens of ``ids[b]`` laid out as that tree."""
    meta, positions = build_attention_metadata(block_tables=tables, num_computed=computed,
                                               num_query_tokens=[len(i) for i in ids], block_size=BLOCK,
                                               num_query_groups=GROUPS)
    if trees is not None and any(t is not None for t in trees):
        meta, positions = apply_tree_attention(meta, positions, trees=trees, num_computed=computed, num_new=num_new,
                                               num_query=[len(i) for i in ids], num_query_groups=GROUPS)
    with torch.inference_mode():
        return MODEL(torch.tensor([t for i in ids for t in i]), positions, PagedAttention(cache, meta)).logits


@st.composite
def batches(draw):
    """Requests as (history, ids of this step, tree or None, new tokens before the tree)."""
    out = []
    for _ in range(draw(st.integers(2, 4))):
        history = draw(st.integers(0, 20))
        if draw(st.booleans()):  # a chain: a prefill chunk, one decode token, or a token and its drafts
            ids = draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6))
            out.append((history, ids, None, len(ids)))
        else:  # a token and a tree of drafts after it
            nodes = draw(st.integers(1, 5))
            parents = [-1] + [draw(st.integers(-1, i - 1)) for i in range(1, nodes)]
            ids = draw(st.lists(st.integers(0, VOCAB - 1), min_size=nodes + 1, max_size=nodes + 1))
            out.append((max(history, 1), ids, Tree(tokens=ids[1:], parents=parents), 1))
    return out


def _prefilled(requests, seed):
    """A cache holding each request's history (prefilled alone) at scattered blocks; the tables."""
    order = torch.randperm(BLOCKS, generator=torch.Generator().manual_seed(seed)).tolist()
    tables, at = [], 0
    for history, ids, _, _ in requests:
        n = -(-(history + len(ids)) // BLOCK)
        tables.append(order[at : at + n])
        at += n
    cache = _cache()
    g = torch.Generator().manual_seed(seed + 1)
    for (history, _, _, _), table in zip(requests, tables):
        if history:
            _step(cache, [table], [0], [torch.randint(0, VOCAB, (history,), generator=g).tolist()])
    return cache, tables


def _counting(monkeypatch):
    calls = [0]
    original = type(native.kernels()).attention_batch

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(type(native.kernels()), "attention_batch", counted)
    return calls


@given(requests=batches(), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_a_batched_step_gives_each_request_the_bits_it_gets_alone(requests, seed):
    cache, tables = _prefilled(requests, seed)
    alone_from = cache.data.clone()
    computed = [h for h, _, _, _ in requests]
    ids = [i for _, i, _, _ in requests]
    trees = [t for _, _, t, _ in requests]
    with pytest.MonkeyPatch.context() as monkeypatch:
        calls = _counting(monkeypatch)
        logits = _step(cache, tables, computed, ids, trees, [n for _, _, _, n in requests])
    assert calls[0] == MODEL.config.num_hidden_layers  # one native call per layer for the whole batch
    row = 0
    for (history, step_ids, tree, n_new), table in zip(requests, tables):
        alone = _cache()
        alone.data.copy_(alone_from)
        want = _step(alone, [table], [history], [step_ids], [tree], [n_new])  # the decoder stack, one request
        assert torch.equal(logits[row : row + len(step_ids)], want)
        slots = [table[p // BLOCK] * BLOCK + p % BLOCK for p in range(history, history + len(step_ids))]
        assert torch.equal(cache.data[:, :, slots], alone.data[:, :, slots])  # the KV the next step reads
        row += len(step_ids)


@given(requests=batches(), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_the_native_batch_agrees_with_the_torch_path(requests, seed):
    """One layer's attention of the batch both ways, over the same scattered history."""
    cache, tables = _prefilled(requests, seed)
    torch_cache = _cache()
    torch_cache.data.copy_(cache.data)
    computed, ids = [h for h, _, _, _ in requests], [i for _, i, _, _ in requests]
    meta, positions = build_attention_metadata(block_tables=tables, num_computed=computed,
                                               num_query_tokens=[len(i) for i in ids], block_size=BLOCK,
                                               num_query_groups=GROUPS)
    trees = [t for _, _, t, _ in requests]
    if any(t is not None for t in trees):
        meta, positions = apply_tree_attention(meta, positions, trees=trees, num_computed=computed,
                                               num_new=[n for _, _, _, n in requests],
                                               num_query=[len(i) for i in ids], num_query_groups=GROUPS)
    g = torch.Generator().manual_seed(seed)
    tokens = positions.shape[0]
    q, k, v = (torch.randn(tokens, n, 32, generator=g).bfloat16() for n in (4, 2, 2))
    with torch.inference_mode():
        fast = PagedAttention(cache, meta)(1, q, k, v)
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(PagedAttention, "_native_batch", lambda *a: None)
            calls = _counting(monkeypatch)
            slow = PagedAttention(torch_cache, meta)(1, q, k, v)
    assert calls[0] == 0
    assert torch.equal(cache.data, torch_cache.data)  # the same keys and values written
    torch.testing.assert_close(fast.float(), slow.float(), rtol=2e-2, atol=2e-2)


def test_a_float32_cache_keeps_the_torch_path(monkeypatch):
    cache = _cache(torch.float32)
    meta, _ = build_attention_metadata(block_tables=[[0], [1]], num_computed=[0, 0], num_query_tokens=[2, 1],
                                       block_size=BLOCK, num_query_groups=GROUPS)
    calls = _counting(monkeypatch)
    q, k, v = (torch.randn(3, n, 32).bfloat16() for n in (4, 2, 2))
    with torch.inference_mode():
        out = PagedAttention(cache, meta)(0, q.float(), k.float(), v.float())
    assert calls[0] == 0 and out.shape == (3, 4, 32)
    assert torch.equal(cache.keys(0)[[0, 1, 4]], k.float())
