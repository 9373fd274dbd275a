"""``specpath train --device``: the data stage through transformers' batched decoding, live
features, the recipes on a device, and the GPU job's helpers. ``cpu:0`` names the CPU as a
device, so every line of the device path runs here exactly as it runs on a GPU (``cuda``)."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath.cli import main
from specpath_train.live import LIVE_FILE, LiveTaps, is_live, write_live

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory) -> Path:
    """A tiny BPE Llama with a chat template, converted to an HF directory (what the device path loads)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import gguf_helpers

    from specpath_engine.modeling.gguf import convert_gguf

    tmp = tmp_path_factory.mktemp("target")
    gguf_helpers.write_tiny_gguf(tmp / "tiny.gguf", arch="llama")
    convert_gguf(tmp / "tiny.gguf", tmp / "hf", dtype=torch.float32)
    return tmp / "hf"


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    rows = [{"prompt": f"def f{i}(x):\n    return x + {i}\n"} for i in range(10)]
    rows += [{"messages": [{"role": "user", "content": f"question number {i}"}]} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


DEVICE_RUN = ["--device", "cpu:0", "--steps", "2", "--max-new-tokens", "16", "--window", "32", "--batch", "2",
              "--max-num-seqs", "8", "--eval-prompts", "0", "--no-progress", "--heldout", "0.2"]


@pytest.mark.parametrize("method", ["eagle3", "mtp", "dflash", "dspark"])
def test_each_common_recipe_trains_on_a_device_from_live_data(capsys, tmp_path, tiny_target, prompts_file, method):
    out = tmp_path / method
    code = main(["train", method, "--target", str(tiny_target), "--data", str(prompts_file), "--out", str(out),
                 *DEVICE_RUN])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    data = out / "run" / "data"
    assert is_live(data) and (data / LIVE_FILE).is_file()
    assert not (data / "features.safetensors").exists()  # no cache: the features were computed as training went
    assert (out / "model.safetensors").is_file() and "not served (--eval-prompts 0)" in stdout
    record = json.loads((out / "config.json").read_text())["specpath_training"]
    assert record["argv"][record["argv"].index("--device") + 1] == "cpu:0"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 2 and metrics["heldout"] is None


def test_data_only_stops_after_the_data_and_a_later_run_reuses_the_responses(capsys, tmp_path, tiny_target,
                                                                              prompts_file):
    gens = tmp_path / "gens"
    common = ["--target", str(tiny_target), "--data", str(prompts_file), "--generations", str(gens), *DEVICE_RUN]
    assert main(["train", "eagle3", "--out", str(tmp_path / "data"), "--data-only", *common]) == 0
    assert not (tmp_path / "data" / "model.safetensors").exists()
    chunks = sorted(gens.glob("*/gen-*.json"))
    assert chunks
    stamps = [c.stat().st_mtime_ns for c in chunks]
    assert main(["train", "mtp", "--out", str(tmp_path / "mtp"), *common]) == 0
    assert [c.stat().st_mtime_ns for c in chunks] == stamps  # the responses were read, not written again
    assert (tmp_path / "mtp" / "model.safetensors").is_file()


def test_a_recipe_without_live_features_refuses_a_device_in_one_line(capsys, tmp_path, tiny_target, prompts_file):
    code = main(["train", "draft_model", "--target", str(tiny_target), "--data", str(prompts_file),
                 "--out", str(tmp_path / "d"), *DEVICE_RUN])
    err = capsys.readouterr().err
    assert code == 1
    assert [line for line in err.splitlines() if line.startswith("specpath train: error:")] == [
        "specpath train: error: --device cpu:0: draft_model's recipe trains on the CPU only (its data has no live "
        "features); leave --device out"]
    assert not (tmp_path / "d").exists()


def test_the_device_generator_decodes_greedily_like_the_engine(tiny_target):
    from specpath_train.device_generate import DeviceGenerator
    from specpath_train.target_text import generate, generation_model

    prompts = [[5, 9, 13], [7, 7, 7, 7, 7, 7], [3], [11, 2 + 20, 40, 41]]
    gen = DeviceGenerator(tiny_target, device="cpu", dtype=torch.float32, max_batch_tokens=64)
    assert len(gen.batches([len(p) for p in prompts], 12)) > 1  # several batches, padded on the left
    ours = gen.generate_ids(prompts, max_new_tokens=12, temperature=0.0, eos_token_ids=[], seed=0)
    engine = generate(generation_model(tiny_target, torch.float32), prompts, max_new_tokens=12, temperatures=(0.0,),
                      eos_token_ids=[], seed=0)
    assert ours == engine


def test_the_device_generator_stops_at_stop_strings_and_says_why(tiny_target):
    from specpath_engine.request import SamplingParams
    from specpath_train.device_generate import DeviceGenerator

    gen = DeviceGenerator(tiny_target, device="cpu", dtype=torch.float32)
    full = gen.generate(["hello"], [SamplingParams(temperature=0.0, max_tokens=10)])[0]
    assert full.finish_reason in ("stop", "length") and full.text
    cut = full.text[len(full.text) // 2:][:2]
    stopped = gen.generate(["hello"], [SamplingParams(temperature=0.0, max_tokens=10, stop=(cut,))])[0]
    assert stopped.finish_reason == "stop" and stopped.text == full.text[:full.text.index(cut)]


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 6), start=st.integers(0, 5), stop=st.integers(0, 6), picks=st.lists(st.integers(0, 5), max_size=4))
def test_live_taps_are_the_cached_features_of_the_same_windows(n, start, stop, picks):
    from specpath_engine.model import LlamaModel
    from specpath_engine.modeling.named_models import embedded_model_path
    from specpath_train.trainer import target_features

    target = _target(LlamaModel, embedded_model_path())
    windows = torch.randint(0, target.config.vocab_size, (n, 12), generator=torch.Generator().manual_seed(n))
    layers = (0, target.config.num_hidden_layers - 1)
    taps = LiveTaps(target, windows, layers, chunk=4)
    cached = target_features(target, windows, layers, batch=16).float()
    assert taps.shape == tuple(cached.shape) and len(taps) == n
    torch.testing.assert_close(taps.float(), cached, atol=1e-3, rtol=1e-3)  # the cache is float16
    part = taps[start:stop]
    assert isinstance(part, LiveTaps) and part.shape[0] == windows[start:stop].shape[0]
    idx = torch.tensor([p % n for p in picks], dtype=torch.int64)
    torch.testing.assert_close(taps[idx], cached[idx], atol=1e-3, rtol=1e-3)


_TARGETS: dict = {}


def _target(cls, path):
    if path not in _TARGETS:
        _TARGETS[path] = cls.from_pretrained(str(path))
    return _TARGETS[path]


def test_write_live_marks_a_directory_live(tmp_path):
    windows = torch.arange(24).view(3, 8)
    meta = write_live(tmp_path / "d", windows, {"heldout": 1, "key": {"target": "x", "layers": [0]}})
    assert meta["live"] and is_live(tmp_path / "d") and not is_live(tmp_path)
    from safetensors.torch import load_file

    assert torch.equal(load_file(str(tmp_path / "d" / LIVE_FILE))["tokens"].long(), windows)


def test_install_tree_makes_the_trees_plugins_discoverable(tmp_path):
    sys.path.insert(0, str(ROOT / "train" / "gpu"))
    import install_tree

    assert install_tree.main([str(tmp_path), str(ROOT)]) == 0
    found = {d.metadata["Name"]: d for d in importlib.metadata.distributions(path=[str(tmp_path)])}
    assert {"specpath", "specpath-train", "specpath-eagle3", "specpath-dspark"} <= set(found)
    methods = {ep.name for d in found.values() for ep in d.entry_points if ep.group == "specpath.methods"}
    assert {"eagle3", "mtp", "dflash", "dspark", "draft_model", "ngram", "suffix"} <= methods
    scripts = {ep.name: ep.value for ep in found["specpath"].entry_points if ep.group == "console_scripts"}
    assert scripts == {"specpath": "specpath.cli:main"}


def test_merge_live_puts_every_parts_held_out_windows_first(tmp_path):
    from specpath_train.live import merge_live

    a, b = torch.arange(0, 32).view(4, 8), torch.arange(100, 140).view(5, 8)
    key = {"target": "t", "layers": [0]}
    write_live(tmp_path / "a", a, {"heldout": 1, "key": key, "sequences": {"heldout": 1, "train": 3}})
    write_live(tmp_path / "b", b, {"heldout": 2, "key": key, "sequences": {"heldout": 2, "train": 4}})
    meta = merge_live([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    from safetensors.torch import load_file

    got = load_file(str(tmp_path / "m" / LIVE_FILE))["tokens"].long()
    assert meta["heldout"] == 3 and meta["parts"] == 2 and meta["sequences"] == {"heldout": 3, "train": 7}
    assert torch.equal(got[:3], torch.cat([a[:1], b[:2]]))
    assert sorted(map(tuple, got[3:].tolist())) == sorted(map(tuple, torch.cat([a[1:], b[2:]]).tolist()))
    write_live(tmp_path / "c", a, {"heldout": 1, "key": {"target": "other", "layers": [0]}})
    with pytest.raises(ValueError, match="different targets"):
        merge_live([tmp_path / "a", tmp_path / "c"], tmp_path / "n")
