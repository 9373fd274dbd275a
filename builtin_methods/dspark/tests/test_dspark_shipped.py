"""The shipped DSpark drafter: the default for the embedded target in its recorded anchor-first
layout with calibrated confidences; greedy output equals plain decoding, with and without
adaptive verification, and drafts get accepted."""

import json

from specpath.config.model import ModelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.model import default_model_path
from specpath_dspark.config import DSPARK_CHECKPOINT

PROMPTS = ["def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n", "import os\nimport sys\n\n"]


def test_shipped_drafter_is_the_default_for_the_embedded_target():
    spec = SpeculativeConfig.from_dict({"method": "dspark"},
                                       target_model_config=ModelConfig(model=str(default_model_path())))
    assert spec.model == str(DSPARK_CHECKPOINT)
    assert spec.dspark_anchor_sampling is True
    assert spec.speculator_config.num_lookahead_tokens == spec.num_speculative_tokens
    config = json.loads((DSPARK_CHECKPOINT / "config.json").read_text())
    assert config["markov_rank"] > 0 and len(config["confidence_temperatures"]) == config["num_draft_tokens"]


def test_shipped_drafter_keeps_greedy_output_and_gets_drafts_accepted():
    params = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, num_threads=1).generate(PROMPTS, params)]
    for extra in ({}, {"enable_adaptive_verification": True}):
        llm = LLM(None, {"method": "dspark", **extra}, num_threads=1)
        assert [o.token_ids for o in llm.generate(PROMPTS, params)] == plain
        assert llm.metrics.num_accepted_tokens > 0.25 * llm.metrics.num_draft_tokens


def test_the_smollm2_drafter_is_the_default_for_smollm2(tmp_path):
    from specpath.config.model import ModelConfig
    from specpath.config.speculative import SpeculativeConfig
    from specpath_dspark.config import DSPARK_SMOLLM2_CHECKPOINT
    from specpath_drafting.testing import smollm2_config_dir

    target = ModelConfig(model=str(smollm2_config_dir(tmp_path / "smollm2")))
    spec = SpeculativeConfig.from_dict({"method": "dspark", "num_speculative_tokens": 4}, target_model_config=target)
    assert spec.model == str(DSPARK_SMOLLM2_CHECKPOINT) and spec.draft_model_config.hf_config["markov_rank"] == 16
