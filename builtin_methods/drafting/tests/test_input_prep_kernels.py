"""The Triton input-preparation kernel against its torch reference (TRITON_INTERPRET=1 on CPU)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from specpath_drafting.kernels import prepare_drafter_inputs  # noqa: E402
from specpath_drafting.reference import prepare_drafter_inputs_reference  # noqa: E402


def case(seed: int, num_rows: int = 5, row_len: int = 40, batch: int = 4):
    gen = torch.Generator().manual_seed(seed)
    table = torch.randint(0, 1000, (num_rows, row_len), generator=gen, dtype=torch.int32)
    rows = torch.randperm(num_rows, generator=gen)[:batch].to(torch.int32)
    num_new = torch.randint(0, 9, (batch,), generator=gen, dtype=torch.int32)
    num_new[0] = 0 if seed % 2 else num_new[0]  # a request without new positions
    start = torch.stack([torch.randint(0, row_len - 1 - int(n), (1,), generator=gen)[0] for n in num_new]).to(torch.int32)
    cu = torch.zeros(batch + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(num_new, 0)
    return table, rows, start, num_new, cu, int(cu[-1])


@pytest.mark.parametrize("seed", range(6))
def test_kernel_matches_reference(seed):
    args = case(seed)
    got = prepare_drafter_inputs(*args, block=4)  # several blocks per request
    want = prepare_drafter_inputs_reference(*args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)


def test_reference_semantics():
    table = torch.arange(30, dtype=torch.int32).view(3, 10)
    rows = torch.tensor([2, 0], dtype=torch.int32)
    start = torch.tensor([4, 0], dtype=torch.int32)
    num_new = torch.tensor([3, 1], dtype=torch.int32)
    cu = torch.tensor([0, 3, 4], dtype=torch.int32)
    ids, pos, slots, last = prepare_drafter_inputs_reference(table, rows, start, num_new, cu, 4)
    assert ids.tolist() == [25, 26, 27, 1]  # the token after each position (shifted input)
    assert pos.tolist() == [4, 5, 6, 0]
    assert slots.tolist() == [24, 25, 26, 0]
    assert last.tolist() == [2, 3]
