"""specpath_train.tensorfile: mapped reads and streamed writes of safetensors files."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from specpath_train.tensorfile import mapped, write_streamed

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64, torch.uint8, torch.int8]


def _tensor(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-100 if dtype.is_signed else 0, 100, shape, generator=g).to(dtype)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(DTYPES), st.integers(0, 9), st.integers(1, 5), st.integers(1, 4)),
                min_size=1, max_size=4), st.integers(0, 1000))
def test_streamed_file_is_a_safetensors_file_and_maps_back(tmp_path_factory, specs, seed):
    path = tmp_path_factory.mktemp("t") / "x.safetensors"
    tensors = {f"t{i}": _tensor(dtype, (rows, cols, 3), seed + i) for i, (dtype, rows, cols, _) in enumerate(specs)}
    step = {f"t{i}": chunk for i, (_, _, _, chunk) in enumerate(specs)}
    write_streamed(path, {n: (t.dtype, t.shape, lambda n=n, t=t: (t[a:a + step[n]] for a in range(0, len(t), step[n])))
                          for n, t in tensors.items()})
    for name, got in load_file(str(path)).items():  # safetensors reads it
        assert torch.equal(got, tensors[name])
    for name, got in mapped(path).items():  # and so does the mapped view
        assert got.dtype == tensors[name].dtype and torch.equal(got, tensors[name])
    other = path.with_name("y.safetensors")
    save_file(tensors, str(other))  # a file safetensors wrote maps too
    assert all(torch.equal(mapped(other)[n], t) for n, t in tensors.items())


def test_mapped_views_are_private(tmp_path):
    path = tmp_path / "x.safetensors"
    save_file({"a": torch.arange(8, dtype=torch.int32)}, str(path))
    view = mapped(path)["a"]
    view[0] = 99
    assert load_file(str(path))["a"][0] == 0


def test_write_streamed_refuses_slices_that_do_not_make_the_tensor(tmp_path):
    t = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="3 rows written of 4"):
        write_streamed(tmp_path / "x.safetensors", {"a": (t.dtype, t.shape, lambda: iter([t[:3]]))})
    with pytest.raises(ValueError, match="a slice of torch.float16"):
        write_streamed(tmp_path / "x.safetensors", {"a": (t.dtype, t.shape, lambda: iter([t.half()]))})
    assert not list(tmp_path.iterdir())  # nothing left behind, not even the partial file
