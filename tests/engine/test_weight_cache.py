"""The dequantised-GGUF weight cache: used by a second load, rebuilt when the source changes."""

from __future__ import annotations

import os

import torch

import gguf_helpers
from specpath_engine.model import LlamaModel
from specpath_engine.modeling import gguf as gguf_module
from specpath_engine.modeling import weight_cache
from specpath_engine.modeling.weight_cache import cache_file


def _load_counting(path, monkeypatch):
    monkeypatch.setattr(weight_cache, "MIN_BYTES", 0)  # the tiny file counts as large
    calls = []
    real = gguf_module.GGUFCheckpoint.state_dict

    def counted(self, dtype=None):
        calls.append(dtype)
        return real(self, dtype)

    monkeypatch.setattr(gguf_module.GGUFCheckpoint, "state_dict", counted)
    return LlamaModel.from_pretrained(path), calls


def test_second_load_reads_the_cache_and_a_changed_source_invalidates_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPATH_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file, seed=0)
    first, calls = _load_counting(file, monkeypatch)
    assert len(calls) == 1 and cache_file(file, torch.float32).is_file()
    second, calls = _load_counting(file, monkeypatch)
    assert calls == []  # dequantised once, read back the second time
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items()):
        assert torch.equal(a, b), name

    gguf_helpers.write_tiny_gguf(file, seed=1)  # same size, new weights: a new key
    os.utime(file, ns=(os.stat(file).st_atime_ns, os.stat(file).st_mtime_ns + 10**9))
    third, calls = _load_counting(file, monkeypatch)
    assert len(calls) == 1
    assert not torch.equal(third.model.embed_tokens.weight, first.model.embed_tokens.weight)
    assert len(list((tmp_path / "cache" / "weights").glob("*.safetensors"))) == 1  # the stale entry is gone


def test_an_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("SPECPATH_CACHE_DIR", str(blocker))
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    model, calls = _load_counting(file, monkeypatch)
    assert len(calls) == 1 and model.model.embed_tokens.weight.shape[0] == gguf_helpers.VOCAB


def test_a_damaged_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPATH_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    _load_counting(file, monkeypatch)
    cache_file(file, torch.float32).write_bytes(b"garbage")
    _, calls = _load_counting(file, monkeypatch)
    assert len(calls) == 1


def test_small_files_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECPATH_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    LlamaModel.from_pretrained(file)
    assert not (tmp_path / "cache" / "weights").exists()
