"""The EAGLE-3 and P-EAGLE heads shipped in the package, on the embedded default target."""

import pytest
import torch

from specpath.engine.harness import DEMO_PROMPTS
from specpath.engine.llm import LLM
from specpath.engine.model import default_model_path
from specpath.engine.request import SamplingParams
from specpath.errors import SpeculativeConfigError
from specpath_drafting.testing import resolve, tiny_target
from specpath_eagle3.config import EAGLE3_HEAD, PEAGLE_HEAD, Eagle3SpeculatorConfig


def test_shipped_heads_and_demo_config(tmp_path):
    assert EAGLE3_HEAD.is_dir() and PEAGLE_HEAD.is_dir(), "a shipped head is missing from the package"
    chain = resolve({"method": "eagle3", "num_speculative_tokens": 4}, default_model_path())
    assert chain.model == str(EAGLE3_HEAD) and chain.speculator_config.max_num_new_slots_for_drafting == 0
    assert chain.eagle_aux_hidden_state_layer_ids == (1, 2, 4)
    spec = resolve({"method": "eagle3", "num_speculative_tokens": 4, "parallel_drafting": True})
    assert spec.model == str(PEAGLE_HEAD) and spec.speculator_config.max_num_new_slots_for_drafting == 3
    tiny_target(tmp_path / "other")
    with pytest.raises(SpeculativeConfigError, match="speculative_config.model"):  # another target: no default
        resolve({"method": "eagle3", "num_speculative_tokens": 4}, tmp_path / "other")
    assert resolve(Eagle3SpeculatorConfig.demo_config()).method == "eagle3"


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [False, True])
def test_shipped_heads_on_the_default_model(parallel):
    torch.set_num_threads(1)
    prompts = list(DEMO_PROMPTS[:3])
    params = SamplingParams(max_tokens=48, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, None, num_threads=1).generate(prompts, params)]
    llm = LLM(None, {"method": "eagle3", "num_speculative_tokens": 4, "parallel_drafting": parallel}, num_threads=1)
    assert [o.token_ids for o in llm.generate(prompts, params)] == plain
    assert llm.metrics.mean_acceptance_length > 1.3
