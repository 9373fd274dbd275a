"""specpath_train.calibrate: the temperature scale at which a drafter's races agree most with the
target's, fitted from held-out windows and written where the engine reads it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_drafting.checkpoints import TEMPERATURE_SCALE_KEY, recorded_temperature_scale
from specpath_train import calibrate
from test_target_text import byte_target  # noqa: F401  (the embedded target with a byte tokenizer)

ROOT = Path(__file__).resolve().parents[2]


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from([0.6, 0.75, 0.9, 1.0, 1.2]))
def test_a_uniformly_softer_drafter_is_fitted_its_softness(seed, k):
    """Draft logits k * l: its race at T s is the target's race at T s / k, so at s = k they
    agree on every position and every draw, and the fit finds k."""
    g = torch.Generator().manual_seed(seed)
    target = torch.randn(300, 24, generator=g) * 3
    ids = torch.arange(24)
    scale, table = calibrate.fit_scale(target * k, ids, target, temperatures=(0.8, 1.0))
    assert scale == k
    assert all(row[calibrate.SCALES.index(k)] == 1.0 for row in table.values())


def test_a_reduced_vocabulary_races_over_its_target_ids():
    target = torch.randn(200, 16, generator=torch.Generator().manual_seed(3))
    ids = torch.tensor([0, 2, 3, 7, 9, 15])
    got = calibrate.race_agreement(target[:, ids], ids, target, 0.8, [1.0])[0]
    masked = torch.full_like(target, float("-inf"))
    masked[:, ids] = target[:, ids]
    assert got == calibrate.race_agreement(masked, torch.arange(16), target, 0.8, [1.0])[0]


@pytest.fixture(scope="module")
def data(byte_target, tmp_path_factory):
    """Held-out windows of the embedded target with the taps of its shipped EAGLE-3 head and MTP module."""
    from specpath_train import target_text as tt

    out = tt.build_dataset(byte_target, tmp_path_factory.mktemp("data"), [1, 2, 4, 5], num_code=2, num_chat=1,
                           heldout_code=2, heldout_chat=1, window=32, max_new_tokens=12, chunk=2,
                           dtype=torch.float32, seed=3, log=lambda s: None)
    return byte_target, out


@pytest.mark.parametrize("head", ["eagle3/specpath_eagle3/heads/eagle3-byte-llama", "mtp/specpath_mtp/checkpoints/mtp1",
                                  "dflash/specpath_dflash/checkpoints/dflash-byte-llama",
                                  "dspark/specpath_dspark/checkpoints/dspark-byte-llama"])
def test_the_cli_fits_a_shipped_drafter_and_writes_its_scale(data, tmp_path, capsys, head):
    target, out = data
    d = tmp_path / "head"
    shutil.copytree(ROOT / "builtin_methods" / head, d)
    assert calibrate.main(["--head", str(d), "--data", str(out), "--windows", "4", "--write"]) == 0  # the data names its target
    report = json.loads([line for line in capsys.readouterr().out.splitlines() if line.startswith("{")][0])
    assert report["scale"] in calibrate.SCALES and report["positions"] > 0
    assert recorded_temperature_scale(d) == report["scale"]
    assert json.loads((d / "config.json").read_text())[TEMPERATURE_SCALE_KEY] == report["scale"]


def test_a_block_drafter_is_fitted_on_a_block_at_every_anchor(data):
    """Every held-out position with room for the block's K labels anchors one first draft, read
    with the target's distribution of the token after the anchor."""
    from specpath_train.trainer import load_target_parts

    target, out = data
    head = ROOT / "builtin_methods/dspark/specpath_dspark/checkpoints/dspark-byte-llama"
    config, emb_w, norm_w, head_w = load_target_parts(str(target))
    draft, ids, target_logits = calibrate.block_first_draft_logits(head, config, emb_w, norm_w, head_w, out, 2, chunk=1)
    k = json.loads((head / "config.json").read_text())["num_draft_tokens"]
    assert draft.shape == (2 * (32 - 1 - k), ids.shape[0]) and target_logits.shape == (draft.shape[0], config["vocab_size"])
    assert torch.isfinite(draft).all() and torch.isfinite(target_logits).all()
    # better than chance: the shipped drafter agrees with the target's greedy token well above 1/V
    agree = (ids[draft.argmax(-1)] == target_logits.argmax(-1)).float().mean()
    assert agree > 0.2


def test_an_unknown_drafter_kind_is_one_line(data, tmp_path):
    target, out = data
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError, match="model_type 'llama'; calibrate fits") as e:
        calibrate.first_draft_logits(tmp_path, target, out, 2)
    assert "\n" not in str(e.value)


def test_bad_input_is_one_line(data, tmp_path, capsys):
    """A missing head or data directory, a target the data was not made with, a run without a
    run.json to name its target: one line each, exit 2, nothing written."""
    target, out = data
    head = ROOT / "builtin_methods/mtp/specpath_mtp/checkpoints/mtp1"
    (tmp_path / "bare").mkdir()  # a data directory whose features.json names no target, and no run.json beside it
    meta = json.loads((out / "features.json").read_text())
    meta.pop("target_path")
    (tmp_path / "bare" / "features.json").write_text(json.dumps(meta))
    cases = [(["--head", str(tmp_path / "none"), "--data", str(out), "--target", str(target)], "not a drafter checkpoint"),
             (["--head", str(head), "--data", str(tmp_path), "--target", str(target)], "not a finished data directory"),
             (["--head", str(head), "--data", str(tmp_path / "bare")], "names the target; give --target"),
             (["--head", str(head), "--data", str(out), "--target", "smollm2-135m"], "made with other target weights"),
             (["--head", str(head), "--data", str(out), "--target", str(target), "--windows", "0"], "--windows 0")]
    for argv, expected in cases:
        with pytest.raises(SystemExit) as e:
            calibrate.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
