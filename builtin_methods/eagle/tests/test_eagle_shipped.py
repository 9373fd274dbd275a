"""The EAGLE-1 head shipped in the package, on the embedded default target: it resolves by
default, its drafts match a from-scratch computation, output equals the baseline, and drafts
are accepted."""

import pytest
import torch

from specpath_engine.harness import DEMO_PROMPTS
from specpath_engine.llm import LLM
from specpath_engine.model import LlamaModel, default_model_path
from specpath_engine.request import SamplingParams
from specpath.config.model import ModelConfig
from specpath.errors import SpeculativeConfigError
from specpath_eagle.config import EAGLE_HEAD, EagleSpeculatorConfig
from specpath_drafting.testing import check_every_proposal, make_engine, reference_drafts, resolve, drafting_target


def test_default_model_is_the_shipped_head_only_for_the_embedded_target(tmp_path):
    assert EAGLE_HEAD.is_dir(), "the shipped EAGLE head is missing from the package"
    assert resolve({"method": "eagle", "num_speculative_tokens": 2}).model == str(EAGLE_HEAD)
    assert resolve({"method": "eagle", "num_speculative_tokens": 2}, default_model_path()).model == str(EAGLE_HEAD)
    drafting_target(tmp_path / "other")
    with pytest.raises(SpeculativeConfigError, match="speculative_config.model"):
        resolve({"method": "eagle", "num_speculative_tokens": 2}, tmp_path / "other")
    from specpath.demo import demo_for

    demo = demo_for("eagle", EagleSpeculatorConfig).config  # the plugin's specpath_demo hook
    assert demo["model"] == str(EAGLE_HEAD) and resolve({**demo, "method": "eagle"}).method == "eagle"
    assert demo_for("eagle", EagleSpeculatorConfig, ModelConfig(model=str(tmp_path / "other"))).config == {}


@pytest.mark.slow
def test_shipped_head_on_the_default_model():
    torch.set_num_threads(1)
    prompts = list(DEMO_PROMPTS[:3])
    params = SamplingParams(max_tokens=48, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, None, num_threads=1).generate(prompts, params)]
    llm = LLM(None, {"method": "eagle", "num_speculative_tokens": 4}, num_threads=1, enable_prefix_caching=True)
    assert [o.token_ids for o in llm.generate(prompts, params)] == plain
    assert llm.metrics.mean_acceptance_length > 1.5  # measured ~2.4 on these prompts

    target = LlamaModel.from_pretrained(default_model_path())
    engine = make_engine(target, resolve({"method": "eagle", "num_speculative_tokens": 4}, default_model_path()),
                         max_num_seqs=2, max_num_batched_tokens=64)
    speculator = engine.runner.speculator
    checked = check_every_proposal(speculator, lambda r, n: reference_drafts(
        speculator.head, target, r.token_ids, speculator.hidden_state_layers, n))
    tokens = [list(p.encode()) for p in prompts[:2]]
    requests, metrics = engine.generate(tokens, SamplingParams(max_tokens=24, ignore_eos=True))
    assert [r.output_token_ids for r in requests] == [p[:24] for p in plain[:2]]
    assert checked and metrics.num_accepted_tokens > 0
