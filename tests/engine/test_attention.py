"""Paged attention gives the same logits as plain causal attention over the whole sequence."""

import attrs
import pytest
import torch

from specpath_engine.attention import PagedAttention, build_attention_metadata
from specpath_engine.block_manager import BlockManager, BlockTable
from specpath_engine.kv_cache import KVCache


def _cache(model, blocks, block_size):
    c = model.config
    return KVCache(
        num_layers=c.num_hidden_layers, num_blocks=blocks, block_size=block_size,
        num_kv_heads=c.num_key_value_heads, head_dim=c.head_dim, dtype=torch.float64,
    )


@torch.inference_mode()
def test_ragged_chunks_match_causal_reference(model):
    torch.manual_seed(1)
    block_size = 4
    seqs = [torch.randint(0, model.config.vocab_size, (n,)) for n in (7, 13, 3, 1)]
    reference = [model(s, torch.arange(len(s))).logits for s in seqs]
    cache, blocks = _cache(model, 64, block_size), BlockManager(64, block_size)
    tables = [BlockTable() for _ in seqs]
    done = [0] * len(seqs)
    # Chunks per step: ragged, some requests idle, several query tokens next to single ones.
    for chunk in [(5, 9, 1, 1), (1, 2, 2, 0), (1, 2, 0, 0), (0, 0, 0, 0)]:
        active = [i for i, n in enumerate(chunk) if n]
        if not active:
            break
        for i in active:
            blocks.allocate(tables[i], done[i] + chunk[i])
        meta, positions = build_attention_metadata(
            block_tables=[tables[i].block_ids for i in active],
            num_computed=[done[i] for i in active],
            num_query_tokens=[chunk[i] for i in active],
            block_size=block_size,
            num_query_groups=model.config.num_attention_heads // model.config.num_key_value_heads,
        )
        ids = torch.cat([seqs[i][done[i] : done[i] + chunk[i]] for i in active])
        assert positions.tolist() == [p for i in active for p in range(done[i], done[i] + chunk[i])]
        logits = model(ids, positions, PagedAttention(cache, meta)).logits
        row = 0
        for i in active:
            expected = reference[i][done[i] : done[i] + chunk[i]]
            torch.testing.assert_close(logits[row : row + chunk[i]], expected, rtol=1e-10, atol=1e-10)
            row += chunk[i]
            done[i] += chunk[i]
    assert done == [len(s) for s in seqs]


def test_single_token_equal_contexts_need_no_mask():
    meta, _ = build_attention_metadata(
        block_tables=[[0, 1], [2, 3]], num_computed=[5, 5], num_query_tokens=[1, 1], block_size=4, num_query_groups=2
    )
    assert meta.mask is None and meta.pad_index is None
    meta, _ = build_attention_metadata(
        block_tables=[[0, 1], [2, 3]], num_computed=[5, 3], num_query_tokens=[1, 3], block_size=4, num_query_groups=2
    )
    assert meta.mask is not None and meta.pad_index is not None
    assert meta.slot_mapping.tolist() == [1 * 4 + 1, 2 * 4 + 3, 3 * 4 + 0, 3 * 4 + 1]


@torch.inference_mode()
def test_one_run_of_blocks_is_read_as_a_slice_and_matches_a_gather(model):
    torch.manual_seed(2)
    seq = torch.randint(0, model.config.vocab_size, (11,))
    reference = model(seq, torch.arange(11)).logits
    groups = model.config.num_attention_heads // model.config.num_key_value_heads
    for blocks in ([3, 4, 5], [5, 3, 4]):  # consecutive (slice) and scattered (gather)
        cache = _cache(model, 8, 4)
        outputs = []
        for start, n in ((0, 6), (6, 5)):
            meta, positions = build_attention_metadata(
                block_tables=[blocks], num_computed=[start], num_query_tokens=[n], block_size=4, num_query_groups=groups
            )
            assert (meta.gather_slots is None) == (blocks == [3, 4, 5])
            outputs.append(model(seq[start : start + n], positions, PagedAttention(cache, meta)).logits)
        torch.testing.assert_close(torch.cat(outputs), reference, rtol=1e-10, atol=1e-10)


def test_the_layout_built_here_is_causal_and_a_trees_is_not():
    """Only a causal layout may go to the native attention (it computes no other mask)."""
    from specpath_engine.tree_layout import Tree, apply_tree_attention

    meta, positions = build_attention_metadata(block_tables=[[0, 1]], num_computed=[3], num_query_tokens=[4],
                                               block_size=4, num_query_groups=1)
    assert meta.causal
    tree = Tree(tokens=[5, 6, 7], parents=[-1, 0, 0])
    tree_meta, _ = apply_tree_attention(meta, positions, trees=[tree], num_computed=[3], num_new=[1],
                                        num_query=[4], num_query_groups=1)
    assert not tree_meta.causal


@torch.inference_mode()
def test_bf16_paged_attention_on_the_native_kernel_matches_the_torch_path():
    from specpath_engine.modeling.native import kernels

    if kernels() is None:
        pytest.skip("native kernels unavailable here")
    torch.manual_seed(0)
    cache = KVCache(num_layers=1, num_blocks=8, block_size=4, num_kv_heads=2, head_dim=32, dtype=torch.bfloat16)
    history, tokens = 9, 3
    meta, _ = build_attention_metadata(block_tables=[[2, 3, 4, 5]], num_computed=[history], num_query_tokens=[tokens],
                                       block_size=4, num_query_groups=2)
    cache.keys(0)[8:8 + history] = torch.randn(history, 2, 32).bfloat16()
    cache.values(0)[8:8 + history] = torch.randn(history, 2, 32).bfloat16()
    q, k, v = (torch.randn(tokens, n, 32).bfloat16() for n in (4, 2, 2))
    native_out = PagedAttention(cache, meta)(0, q, k, v)
    torch_out = PagedAttention(cache, attrs.evolve(meta, causal=False))(0, q, k, v)  # same layout, torch's path
    torch.testing.assert_close(native_out.float(), torch_out.float(), rtol=2e-2, atol=2e-2)
