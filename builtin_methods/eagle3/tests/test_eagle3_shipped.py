"""The EAGLE-3 and P-EAGLE heads shipped in the package, on the embedded default target."""

import json
from pathlib import Path

import pytest
import torch

from specpath_engine.harness import DEMO_PROMPTS
from specpath_engine.llm import LLM
from specpath_engine.model import default_model_path
from specpath_engine.request import SamplingParams
from specpath.demo import demo_for
from specpath.errors import SpeculativeConfigError
from specpath_drafting.testing import resolve, drafting_target
from specpath_eagle3.config import EAGLE3_HEAD, PEAGLE_HEAD, Eagle3SpeculatorConfig


def test_shipped_heads_and_demo_config(tmp_path):
    assert EAGLE3_HEAD.is_dir() and PEAGLE_HEAD.is_dir(), "a shipped head is missing from the package"
    chain = resolve({"method": "eagle3", "num_speculative_tokens": 4}, default_model_path())
    assert chain.model == str(EAGLE3_HEAD) and chain.speculator_config.max_num_new_slots_for_drafting == 0
    assert chain.eagle_aux_hidden_state_layer_ids == (2, 3, 5)  # the states entering layers 2, 3, 5
    spec = resolve({"method": "eagle3", "num_speculative_tokens": 4, "parallel_drafting": True})
    assert spec.model == str(PEAGLE_HEAD) and spec.speculator_config.max_num_new_slots_for_drafting == 3
    drafting_target(tmp_path / "other")
    with pytest.raises(SpeculativeConfigError, match="speculative_config.model"):  # another target: no default
        resolve({"method": "eagle3", "num_speculative_tokens": 4}, tmp_path / "other")
    demo = demo_for("eagle3", Eagle3SpeculatorConfig)  # the plugin's specpath_demo hook
    assert demo.config == {"model": str(EAGLE3_HEAD), "num_speculative_tokens": 4}
    assert resolve({**demo.config, "method": "eagle3"}).method == "eagle3"


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [False, True])
def test_shipped_heads_on_the_default_model(parallel):
    torch.set_num_threads(1)
    prompts = list(DEMO_PROMPTS[:3])
    params = SamplingParams(max_tokens=48, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, None, num_threads=1).generate(prompts, params)]
    llm = LLM(None, {"method": "eagle3", "num_speculative_tokens": 4, "parallel_drafting": parallel,
                     "draft_length_policy": "fixed"}, num_threads=1)  # the recorded drafts drafted K every step
    assert [o.token_ids for o in llm.generate(prompts, params)] == plain
    assert llm.metrics.mean_acceptance_length > 1.3


DRAFTS_BEFORE = Path(__file__).parent / "data" / "shipped_drafts_before.json"
"""Every draft the shipped heads proposed (2 demo prompts, 24 tokens, K=4) when their
config.json still named taps by layer *output* ([1, 2, 4]); recorded before the remap to the
vLLM/SGLang convention (the state *entering* layer i: [2, 3, 5])."""


@pytest.mark.parametrize("parallel", [False, True])
def test_remapped_layer_ids_give_the_same_drafts(parallel):
    torch.set_num_threads(1)
    llm = LLM(None, {"method": "eagle3", "num_speculative_tokens": 4, "parallel_drafting": parallel,
                     "draft_length_policy": "fixed"}, num_threads=1)  # the recorded drafts drafted K every step
    speculator = llm.engine.runner.speculator
    assert speculator.hidden_state_layers == (1, 2, 4)  # engine capture points: unchanged
    drafts, propose = [], speculator.propose

    def recording(batch):
        proposal = propose(batch)
        drafts.append([int(t) for t in proposal.token_ids.tolist()])
        return proposal

    speculator.propose = recording
    outputs = llm.generate(list(DEMO_PROMPTS[:2]), SamplingParams(max_tokens=24, ignore_eos=True))
    before = json.loads(DRAFTS_BEFORE.read_text())["peagle" if parallel else "eagle3"]
    # (calls that only ingested, drafting nothing, were recorded too; lazy ingest no longer makes them)
    assert [d for d in drafts if d] == [d for d in before["drafts"] if d]
    assert [list(o.token_ids) for o in outputs] == before["outputs"]


def test_the_smollm2_head_is_the_default_for_smollm2(tmp_path):
    from specpath_drafting.testing import smollm2_config_dir
    from specpath_eagle3.config import EAGLE3_SMOLLM2_HEAD

    target = smollm2_config_dir(tmp_path / "smollm2")
    spec = resolve({"method": "eagle3", "num_speculative_tokens": 4}, target)
    assert spec.model == str(EAGLE3_SMOLLM2_HEAD)
    assert spec.eagle_aux_hidden_state_layer_ids == (2, 15, 27)  # trained on the outputs of layers 1, 14, 26
    assert spec.draft_model_config.hf_config["draft_vocab_size"] == 4096
    with pytest.raises(SpeculativeConfigError, match="speculative_config.model"):  # no P-EAGLE head for it
        resolve({"method": "eagle3", "num_speculative_tokens": 4, "parallel_drafting": True}, target)


@pytest.mark.parametrize(("quantization", "seed"), [("none", None), ("int8", None), ("none", 77)])
def test_the_native_propose_drafts_what_the_per_op_path_drafts(quantization, seed):
    """In bf16 a one-request propose (ingest + chain) is one native call, greedy or a seeded
    request's race (``seed``); every draft is the per-op path's (the kernel-level property test:
    tests/modeling/test_native_draft_chain.py)."""
    from specpath_drafting.testing import native_propose_matches_per_op
    from specpath_engine.modeling.native import kernels

    torch.set_num_threads(1)
    natively = native_propose_matches_per_op({"method": "eagle3", "num_speculative_tokens": 4,
                                              "draft_length_policy": "fixed", "quantization": quantization},
                                             list(DEMO_PROMPTS[:2]), seed=seed)
    assert natively > 0 if kernels() is not None else natively == 0


@pytest.mark.parametrize("k", [1, 3])
def test_a_batched_native_propose_keeps_plain_greedy_output(k):
    """Four requests at once with fixed K: their proposes run as one native call
    (``draft_propose_batch``; the kernel-level property test: tests/modeling/test_native_draft_chain.py),
    and the output is plain decoding's."""
    from specpath_drafting.testing import batched_native_propose_keeps_greedy_output
    from specpath_engine.modeling.native import kernels

    torch.set_num_threads(1)
    batched = batched_native_propose_keeps_greedy_output(
        {"method": "eagle3", "num_speculative_tokens": k, "draft_length_policy": "fixed"}, list(DEMO_PROMPTS[:4]))
    assert batched > 0 if kernels() is not None else batched == 0


def test_the_int8_head_drafts_a_batch_on_its_tile_copies():
    """The shipped head runs int8 (its shipped default). Where the CPU has AMX tiles, the weights
    its native propose reads keep a tile copy too (dual weights): a batch's propose passes take
    the copies, a lone request's chain the int8 kernel; the output is plain decoding's either way.
    Without tiles no copy is kept and every pass is int8."""
    from specpath_drafting.testing import dual_weight_drafting
    from specpath_engine.modeling.native import kernels

    torch.set_num_threads(1)
    seen = dual_weight_drafting({"method": "eagle3", "num_speculative_tokens": 3, "draft_length_policy": "fixed"},
                                list(DEMO_PROMPTS[:4]))
    if kernels() is not None and kernels().tiles:
        assert seen.tile_bytes > 0 and seen.batch_passes[1] > 0 and seen.lone_passes[0] > 0
    else:
        assert seen.tile_bytes == 0 and seen.batch_passes[1] == seen.lone_passes[1] == 0
