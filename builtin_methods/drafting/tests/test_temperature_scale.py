"""A drafter checkpoint's temperature calibration (``specpath_temperature_scale``): sampled
requests draft at their temperature times it (raced or drawn), greedy ones are untouched, the
output stays plain decoding's, and a bad value is one line naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specpath_drafting import coupling
from specpath_drafting.checkpoints import TEMPERATURE_SCALE_KEY, recorded_temperature_scale
from specpath_engine.llm import LLM, SamplingParams

HEADS = Path(__file__).resolve().parents[2]
CHECKPOINTS = {"eagle3": HEADS / "eagle3" / "specpath_eagle3" / "heads" / "eagle3-byte-llama",
               "mtp": HEADS / "mtp" / "specpath_mtp" / "checkpoints" / "mtp1"}
PROMPTS = ["def f(x):\n    ", "import os\n", "class A:\n    def g(self):\n"]
SEEDED = [SamplingParams(temperature=0.8, max_tokens=24, seed=11 + i, ignore_eos=True) for i in range(3)]


def _scaled(tmp_path: Path, method: str, scale) -> Path:
    d = tmp_path / method
    shutil.copytree(CHECKPOINTS[method], d)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, TEMPERATURE_SCALE_KEY: scale}))
    return d


def test_recorded_scale_defaults_to_one_and_refuses_bad_values(tmp_path):
    assert recorded_temperature_scale(None) == 1.0
    assert recorded_temperature_scale(CHECKPOINTS["eagle3"]) == 1.0
    assert recorded_temperature_scale(_scaled(tmp_path, "eagle3", 0.8)) == 0.8
    for bad in (0, -1.0, "0.8", True, None):
        d = _scaled(tmp_path / str(bad), "eagle3", bad)
        with pytest.raises(ValueError, match=f"{TEMPERATURE_SCALE_KEY} must be a positive number") as e:
            recorded_temperature_scale(d)
        assert "\n" not in str(e.value) and str(d) in str(e.value)


@pytest.mark.parametrize("method", sorted(CHECKPOINTS))
def test_sampled_requests_draft_at_the_scaled_temperature_and_keep_plain_tokens(tmp_path, monkeypatch, method):
    plain = [o.token_ids for o in LLM(None, None).generate(PROMPTS, SEEDED)]
    seen: list[float] = []
    original_noise, original_choose = coupling.scaled_noise, coupling.choose

    def noise_spy(noise, temperature, vocab_ids=None):
        seen.extend(temperature)
        return original_noise(noise, temperature, vocab_ids)

    def choose_spy(logits, temperature, *args, **kwargs):
        seen.extend(t for t in temperature if t > 0)
        return original_choose(logits, temperature, *args, **kwargs)

    monkeypatch.setattr(coupling, "scaled_noise", noise_spy)
    monkeypatch.setattr(coupling, "choose", choose_spy)
    llm = LLM(None, {"method": method, "model": str(_scaled(tmp_path, method, 0.5)), "num_speculative_tokens": 4,
                     "draft_length_policy": "fixed"})
    assert [o.token_ids for o in llm.generate(PROMPTS, SEEDED)] == plain
    assert seen and all(t == pytest.approx(0.4) for t in seen)  # 0.8 x 0.5, every sampled draft
    greedy = SamplingParams(max_tokens=16)
    assert [o.token_ids for o in llm.generate(PROMPTS, greedy)] == [o.token_ids for o in LLM(None, None).generate(PROMPTS, greedy)]


BLOCK_CHECKPOINTS = {"dflash": HEADS / "dflash" / "specpath_dflash" / "checkpoints" / "dflash-byte-llama",
                     "dspark": HEADS / "dspark" / "specpath_dspark" / "checkpoints" / "dspark-byte-llama"}


@pytest.mark.parametrize("method", sorted(BLOCK_CHECKPOINTS))
def test_block_drafters_draft_at_the_scaled_temperature_and_keep_plain_tokens(tmp_path, monkeypatch, method):
    """DFlash and DSpark read the same key: every sampled block is chosen at T x scale."""
    plain = [o.token_ids for o in LLM(None, None).generate(PROMPTS, SEEDED)]
    d = tmp_path / method
    shutil.copytree(BLOCK_CHECKPOINTS[method], d)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, TEMPERATURE_SCALE_KEY: 0.5}))
    llm = LLM(None, {"method": method, "model": str(d), "num_speculative_tokens": 4, "draft_length_policy": "fixed"})
    speculator = llm.speculator
    assert speculator.temperature_scale == 0.5
    seen: list[float] = []
    original = speculator.choose

    def choose_spy(hidden, anchors, temps, gens, noise):
        seen.extend(temps)
        return original(hidden, anchors, temps, gens, noise)

    monkeypatch.setattr(speculator, "choose", choose_spy)
    assert [o.token_ids for o in llm.generate(PROMPTS, SEEDED)] == plain
    assert seen and all(t == pytest.approx(0.4) for t in seen)  # 0.8 x 0.5, every sampled block
    seen.clear()
    greedy = SamplingParams(max_tokens=16)
    assert [o.token_ids for o in llm.generate(PROMPTS, greedy)] == [o.token_ids for o in LLM(None, None).generate(PROMPTS, greedy)]
    assert seen and all(t == 0 for t in seen)  # greedy stays greedy
