"""The shipped DFlash drafter: it is the default for the embedded target, it resolves and loads
there, its greedy output equals plain decoding, and it gets drafts accepted."""

from specpath.config.model import ModelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.model import default_model_path
from specpath_dflash.config import DFLASH_CHECKPOINT

PROMPTS = ["def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n", "import os\nimport sys\n\n"]


def test_shipped_drafter_is_the_default_for_the_embedded_target():
    spec = SpeculativeConfig.from_dict({"method": "dflash"},
                                       target_model_config=ModelConfig(model=str(default_model_path())))
    assert spec.model == str(DFLASH_CHECKPOINT)
    assert spec.num_speculative_tokens >= 1 and spec.speculator_config.num_lookahead_tokens == spec.num_speculative_tokens + 1


def test_shipped_drafter_keeps_greedy_output_and_gets_drafts_accepted():
    params = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, num_threads=1).generate(PROMPTS, params)]
    llm = LLM(None, {"method": "dflash"}, num_threads=1)
    assert [o.token_ids for o in llm.generate(PROMPTS, params)] == plain
    assert llm.metrics.num_accepted_tokens > 0.25 * llm.metrics.num_draft_tokens


def test_the_smollm2_drafter_is_the_default_for_smollm2(tmp_path):
    from specpath_drafting.testing import smollm2_config_dir
    from specpath_drafting.vocab import checkpoint_train_vocab
    from specpath_dflash.config import DFLASH_SMOLLM2_CHECKPOINT

    target = ModelConfig(model=str(smollm2_config_dir(tmp_path / "smollm2")))
    spec = SpeculativeConfig.from_dict({"method": "dflash", "num_speculative_tokens": 4}, target_model_config=target)
    assert spec.model == str(DFLASH_SMOLLM2_CHECKPOINT) and spec.draft_model_config.hf_config["target_layer_ids"] == [1, 14, 26]
    assert checkpoint_train_vocab(DFLASH_SMOLLM2_CHECKPOINT, 49152).numel() == 4096  # served over its training ids
