"""Broken checkpoints: every one is a single line naming the file, before any big allocation,
and nothing outside the checkpoint directory is ever opened."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from specpath_engine.model import LlamaModel
from specpath_engine.model_config import LlamaConfig
from specpath_engine.modeling.checkpoint import CheckpointError

BAD = (CheckpointError, FileNotFoundError)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=64)
    return LlamaModel(config).save_pretrained(tmp_path_factory.mktemp("good") / "ckpt")


@pytest.fixture
def ckpt(good, tmp_path):
    return shutil.copytree(good, tmp_path / "ckpt")


def _one_line(exc_info, name: str | None = None) -> str:
    message = str(exc_info.value)
    assert "\n" not in message and len(message) < 400, message
    if name is not None:
        assert name in message, message
    return message


@pytest.mark.parametrize("content", [b"", b"\x00" * 7, b"garbage that is not safetensors"])
def test_empty_and_garbage_weights(ckpt, content):
    (ckpt / "model.safetensors").write_bytes(content)
    with pytest.raises(CheckpointError) as failure:
        LlamaModel.from_pretrained(ckpt)
    _one_line(failure, "model.safetensors")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.99])
def test_truncated_weights(ckpt, fraction):
    weights = ckpt / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(CheckpointError) as failure:
        LlamaModel.from_pretrained(ckpt)
    _one_line(failure, "model.safetensors")


def test_weights_that_are_a_directory(ckpt):
    (ckpt / "model.safetensors").unlink()
    (ckpt / "model.safetensors").mkdir()
    with pytest.raises(CheckpointError, match="not a regular file") as failure:
        LlamaModel.from_pretrained(ckpt)
    _one_line(failure, "model.safetensors")


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.int64])
def test_integer_weights_are_one_short_line(ckpt, dtype):
    weights = ckpt / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"].to(dtype)
    save_file(tensors, str(weights))
    with pytest.raises(CheckpointError, match="floating point") as failure:
        LlamaModel.from_pretrained(ckpt)
    assert len(_one_line(failure, "model.embed_tokens.weight")) < 300


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused(ckpt, bad):
    weights = ckpt / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["model.norm.weight"][3] = bad
    save_file(tensors, str(weights))
    with pytest.raises(CheckpointError, match="NaN or infinite") as failure:
        LlamaModel.from_pretrained(ckpt)
    _one_line(failure, "model.norm.weight")


@pytest.mark.parametrize("field,value", [("num_hidden_layers", 10**9), ("max_position_embeddings", 10**12),
                                         ("hidden_size", 10**7), ("vocab_size", 10**11)])
def test_absurd_sizes_are_refused_before_allocating(ckpt, field, value):
    config = json.loads((ckpt / "config.json").read_text())
    config[field] = value
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(BAD) as failure:
        LlamaModel.from_pretrained(ckpt)
    _one_line(failure, str(ckpt))


def test_absurd_mtp_module_count_is_refused(ckpt):
    module = pytest.importorskip("specpath_mtp.module")
    config = json.loads((ckpt / "config.json").read_text())
    config.update(n_predict=10**6, num_nextn_predict_layers=10**6)
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="memory") as failure:
        module.load_mtp_modules(ckpt)
    _one_line(failure, "config.json")


def test_shard_index_never_leaves_the_checkpoint(ckpt, tmp_path):
    outside = tmp_path / "x.safetensors"
    shutil.copy(ckpt / "model.safetensors", outside)  # a valid file, so opening it would "work"
    (ckpt / "model.safetensors").unlink()
    for name in ["../x.safetensors", "../../x.safetensors", str(outside), "sub/../../x.safetensors"]:
        index = {"weight_map": {"model.embed_tokens.weight": name}}
        (ckpt / "model.safetensors.index.json").write_text(json.dumps(index))
        with pytest.raises(CheckpointError, match="outside the checkpoint") as failure:
            LlamaModel.from_pretrained(ckpt)
        _one_line(failure, "model.safetensors.index.json")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_weights_load_or_fail_in_one_line(good, tmp_path_factory, data):
    path = shutil.copytree(good, tmp_path_factory.mktemp("fuzz") / "ckpt")
    weights = path / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(raw))))
    weights.write_bytes(bytes(raw[:cut] if cut is not None else raw))
    try:
        LlamaModel.from_pretrained(path)
    except BAD as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400


# Plausible or absurd sizes (absurd ones must be refused from the config alone); sizes that fit
# but take gigabytes would only test the allocator, on a shared machine.
sizes = st.one_of(st.integers(-2, 4), st.integers(5, 512), st.sampled_from([10**6, 10**9, 10**12, 10**13]),
                  st.sampled_from([None, "8", 2.5, True, [], {}]))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                                "num_attention_heads", "num_key_value_heads", "head_dim",
                                                "max_position_embeddings", "rope_theta", "tie_word_embeddings"]),
                               sizes, min_size=1, max_size=3))
def test_fuzzed_configs_load_or_fail_in_one_line(good, tmp_path_factory, changes):
    path = shutil.copytree(good, tmp_path_factory.mktemp("fuzzcfg") / "ckpt")
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))
    try:
        LlamaModel.from_pretrained(path)
    except BAD as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400


@pytest.mark.parametrize("field,value,problem", [
    ("eos_token_id", "x", "eos_token_id must be a token id"),
    ("eos_token_id", [2, "x"], "eos_token_id must be a token id"),
    ("bos_token_id", 1.5, "bos_token_id must be a token id"),
    ("eos_token_id", 64, "outside the vocabulary"),
    ("rms_norm_eps", "x", "rms_norm_eps must be a finite number"),
    ("rms_norm_eps", None, "rms_norm_eps must be a finite number"),
    ("rms_norm_eps", -1e-6, "rms_norm_eps must be a finite number"),
    ("rope_theta", "x", "rope_theta must be a finite number"),
])
def test_bad_config_values_are_refused_at_load(ckpt, field, value, problem):
    """Refused by from_pretrained, naming config.json (not at the first forward, not unnamed)."""
    config = json.loads((ckpt / "config.json").read_text())
    config[field] = value
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=problem) as failure:
        LlamaModel.from_pretrained(ckpt)
    _one_line(failure, str(ckpt / "config.json"))


def test_a_list_of_eos_ids_still_loads(ckpt):
    config = json.loads((ckpt / "config.json").read_text())
    config["eos_token_id"] = [1, 2]
    (ckpt / "config.json").write_text(json.dumps(config))
    assert LlamaModel.from_pretrained(ckpt).config.eos_token_id == [1, 2]


@pytest.mark.parametrize("extra", ["mtp.0.extra.weight", "mtp.1.norm.weight", "model.norm.weight"])
def test_mtp_tensor_that_no_module_loads_is_refused(good, tmp_path, extra):
    from specpath_mtp.module import load_mtp_modules, random_mtp_checkpoint

    path = random_mtp_checkpoint(good, tmp_path / "mtp", 1)
    assert len(load_mtp_modules(path)) == 1
    tensors = load_file(str(path / "model.safetensors"))
    tensors[extra] = torch.ones(16)
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="belong to no MTP module|module 0 does not match") as failure:
        load_mtp_modules(path)
    _one_line(failure, extra)


@pytest.mark.parametrize("act", ["gelu", "relu", None])
def test_eagle_head_with_another_activation_is_refused(tmp_path, act):
    from specpath_drafting.heads import read_head_config
    from specpath_eagle.config import EAGLE_HEAD

    head = shutil.copytree(EAGLE_HEAD, tmp_path / "head")
    assert read_head_config(head, "eagle").kind == "eagle"
    config = json.loads((head / "config.json").read_text())
    config["hidden_act"] = act
    (head / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="hidden_act") as failure:
        read_head_config(head, "eagle")
    _one_line(failure, str(head / "config.json"))


def test_mtp_checkpoint_with_another_activation_is_refused(good, tmp_path):
    from specpath_mtp.module import load_mtp_modules, random_mtp_checkpoint

    path = random_mtp_checkpoint(good, tmp_path / "mtp", 1)
    config = json.loads((path / "config.json").read_text())
    config["hidden_act"] = "gelu"
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="hidden_act") as failure:
        load_mtp_modules(path)
    _one_line(failure, "config.json")
