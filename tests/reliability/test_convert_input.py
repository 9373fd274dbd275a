"""``specpath convert``'s destination: never the current directory by accident, never mixed with
another checkpoint's files, never a checkpoint ``run`` would refuse."""

from __future__ import annotations

import json
import math
import struct

import pytest

import gguf_bytes
from specpath.cli import main
from specpath_engine.modeling.checkpoint import CheckpointError
from specpath_engine.modeling.gguf import ConvertError, convert_gguf


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    import gguf_helpers

    file = tmp_path_factory.mktemp("src") / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    return file


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("specpath: error:"), err
    return err


def test_empty_destination_is_refused(gguf_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["convert", str(gguf_file), ""]) == 1
    assert "empty name" in _error_line(capsys)
    assert list(tmp_path.iterdir()) == []  # nothing written into the current directory
    with pytest.raises(ConvertError, match="empty name"):
        convert_gguf(gguf_file, " ")


def test_non_empty_destination_needs_overwrite(gguf_file, tmp_path, capsys):
    out = tmp_path / "other"
    out.mkdir()
    stale = {"model.safetensors.index.json": "{}", "generation_config.json": "{}", "config.json": '{"x": 1}'}
    for name, text in stale.items():
        (out / name).write_text(text)
    assert main(["convert", str(gguf_file), str(out)]) == 1
    err = _error_line(capsys)
    assert "not empty" in err and "--overwrite" in err and str(out) in err
    assert {p.name: p.read_text() for p in out.iterdir()} == stale  # untouched
    assert main(["convert", str(gguf_file), str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json",
                                                    "tokenizer_config.json"]  # no stale file left behind
    assert json.loads((out / "config.json").read_text())["model_type"] == "llama"
    assert [p.name for p in tmp_path.iterdir()] == ["other"]  # no staging directory left


def test_empty_existing_directory_and_new_nested_directory(gguf_file, tmp_path):
    (tmp_path / "empty").mkdir()
    assert (convert_gguf(gguf_file, tmp_path / "empty") / "model.safetensors").is_file()
    assert (convert_gguf(gguf_file, tmp_path / "a" / "b") / "config.json").is_file()


def test_destination_that_is_a_file(gguf_file, tmp_path):
    (tmp_path / "f").write_text("keep")
    with pytest.raises(ConvertError, match="not a directory"):
        convert_gguf(gguf_file, tmp_path / "f", overwrite=True)
    assert (tmp_path / "f").read_text() == "keep"


def test_overwrite_never_replaces_the_directory_holding_the_input(gguf_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").write_text("x")
    with pytest.raises(ConvertError, match="current directory"):
        convert_gguf(gguf_file, ".", overwrite=True)
    with pytest.raises(ConvertError, match="input file"):
        convert_gguf(gguf_file, gguf_file.parent, overwrite=True)
    assert gguf_file.is_file()


def test_a_defective_file_writes_nothing(gguf_file, tmp_path, capsys):
    parts = gguf_bytes.decode(gguf_file.read_bytes())
    parts.metadata["llama.attention.layer_norm_rms_epsilon"] = gguf_bytes.Value(gguf_bytes.FLOAT32, math.nan)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(parts.encode())
    assert main(["convert", str(bad), str(tmp_path / "out")]) == 1
    err = _error_line(capsys)
    assert "CheckpointError" in err and str(bad) in err and "layer_norm_rms_epsilon" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf"]


def test_nan_weights_leave_the_old_checkpoint_in_place(gguf_file, tmp_path):
    parts = gguf_bytes.decode(gguf_file.read_bytes())
    at = parts.tensor("output_norm.weight").offset  # F32
    data = bytearray(parts.data)
    data[at : at + 4] = struct.pack("<f", math.nan)
    parts.data = bytes(data)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(parts.encode())
    out = convert_gguf(gguf_file, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(CheckpointError, match="output_norm.weight has NaN"):
        convert_gguf(bad, out, overwrite=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf", "out"]


def test_what_convert_writes_is_checked_like_a_load(gguf_file, tmp_path, monkeypatch):
    """A conversion the engine's loader would refuse fails the convert, not the later run."""
    from specpath_engine.modeling import gguf

    def broken(self, dtype=None):
        tensors = original(self, dtype)
        tensors.pop("model.layers.1.mlp.up_proj.weight")
        return tensors

    original = gguf.GGUFCheckpoint.state_dict
    monkeypatch.setattr(gguf.GGUFCheckpoint, "state_dict", broken)
    with pytest.raises(CheckpointError, match="converted checkpoint does not load .*missing 1 tensor"):
        convert_gguf(gguf_file, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
