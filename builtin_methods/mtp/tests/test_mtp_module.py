"""MTP checkpoints: the layout round-trips (also in float16), damaged ones fail in one line, and
the input order of the checkpoint is the order the module concatenates."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from specpath_mtp.module import MTPModule, head_config, load_mtp_modules, read_config, save_mtp_checkpoint


def test_round_trip_in_float16(tiny, tmp_path):
    target, paths = tiny
    modules = load_mtp_modules(paths[3])
    config = read_config(paths["target"])
    save_mtp_checkpoint(modules, tmp_path / "half", config, dtype=torch.float16)
    saved = load_file(str(tmp_path / "half" / "model.safetensors"))
    assert {t.dtype for t in saved.values()} == {torch.float16}
    assert all(key.startswith("mtp.") for key in saved)
    assert json.loads((tmp_path / "half" / "config.json").read_text())["torch_dtype"] == "float16"
    again = load_mtp_modules(tmp_path / "half")
    assert len(again) == 3
    for a, b in zip(modules, again):
        for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
            assert y.dtype == torch.float32, name
            torch.testing.assert_close(x, y, atol=2e-3, rtol=1e-2)


def test_damaged_checkpoints_fail_in_one_line(tiny, tmp_path):
    _, paths = tiny
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((paths[2] / "config.json").read_text())
    tensors = load_file(str(paths[2] / "model.safetensors"))
    del tensors["mtp.1.eh_proj.weight"]
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match=r"module 1 does not match .*eh_proj.weight") as info:
        load_mtp_modules(broken)
    assert "\n" not in str(info.value)
    tensors = load_file(str(paths[2] / "model.safetensors"))
    tensors["mtp.0.enorm.weight"] = torch.ones(3)
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match=r"mtp.0.enorm.weight has shape \(3,\)"):
        load_mtp_modules(broken)
    config = json.loads((paths[2] / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "mtp_input_order": ["hidden", "hidden"]}))
    with pytest.raises(ValueError, match="mtp_input_order"):
        load_mtp_modules(broken)


def test_the_checkpoint_order_decides_the_concatenation(tiny):
    target, paths = tiny
    config = read_config(paths["target"])
    torch.manual_seed(0)
    first = MTPModule(head_config(config), order=("embedding", "hidden"))
    second = MTPModule(head_config(config), order=("hidden", "embedding"))
    second.load_state_dict(first.state_dict())
    d = config["hidden_size"]
    with torch.no_grad():  # swap the column halves of eh_proj: the two orders then agree
        second.eh_proj.weight.copy_(torch.cat([first.eh_proj.weight[:, d:], first.eh_proj.weight[:, :d]], dim=1))
    emb, hidden = torch.randn(5, d), torch.randn(5, d)
    torch.testing.assert_close(first.layer_input(emb, hidden)[1], second.layer_input(emb, hidden)[1])
    assert not torch.allclose(first.layer_input(emb, hidden)[1], first.layer_input(hidden, emb)[1])
