"""The block-query kernel against its torch reference (Triton interpreter on CPU, tiny shapes)."""

import pytest
import torch

from specpath_drafting.block.kernels import build_block_queries
from specpath_drafting.block.reference import MASK_ID, build_block_queries_reference


@pytest.mark.parametrize("num_reqs,block,ctx_len", [(1, 1, 1), (3, 5, 17), (4, 9, 70)])
def test_kernel_equals_reference(num_reqs, block, ctx_len):
    gen = torch.Generator().manual_seed(num_reqs * 100 + block)
    anchors = torch.randint(0, 256, (num_reqs,), generator=gen)
    pos = torch.randint(0, ctx_len + 1, (num_reqs,), generator=gen)
    rows = torch.randperm(8, generator=gen)[:num_reqs]
    want = build_block_queries_reference(anchors, pos, rows, block, 100, ctx_len)
    got = build_block_queries(anchors, pos, rows, block, 100, ctx_len)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and torch.equal(w, g)


def test_reference_layout():
    ids, pos, slots, visible = build_block_queries_reference(torch.tensor([42, 7]), torch.tensor([3, 0]),
                                                             torch.tensor([1, 0]), 3, 10, 4)
    assert ids.tolist() == [[42, MASK_ID, MASK_ID], [7, MASK_ID, MASK_ID]]
    assert pos.tolist() == [[3, 4, 5], [0, 1, 2]]
    assert slots.tolist() == [[10, 11, 12, 13], [0, 1, 2, 3]]
    assert visible.tolist() == [[True, True, True, False], [False, False, False, False]]
