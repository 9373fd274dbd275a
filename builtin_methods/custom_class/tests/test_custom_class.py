"""custom_class: trust_remote_code gating, detection from model, the vLLM adapter, and
greedy identity through LLM for K 1..8 with prefix caching on and off."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from specpath.config.model import ModelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath_engine.testing.engine import tiny_checkpoint


def trusted():
    return ModelConfig(model=tiny_checkpoint(), trust_remote_code=True)


@pytest.mark.parametrize("target", [None, "untrusted"])
def test_refused_without_trust_remote_code_in_one_line_and_nothing_is_imported(target, tmp_path, monkeypatch):
    (tmp_path / "side_effect_proposer.py").write_text("import builtins\nbuiltins.SIDE_EFFECT_RAN = True\n"
                                                      "class P:\n    def propose(self, *a): return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    target_config = ModelConfig(model=tiny_checkpoint()) if target else None
    with pytest.raises(SpeculativeConfigError) as info:
        SpeculativeConfig.from_dict({"method": "custom_class", "model": "side_effect_proposer.P",
                                     "num_speculative_tokens": 3}, target_model_config=target_config)
    message = str(info.value)
    assert "only allowed with trust_remote_code=True" in message and "\n" not in message
    assert "side_effect_proposer" not in sys.modules
    import builtins

    assert not hasattr(builtins, "SIDE_EFFECT_RAN")


@pytest.mark.parametrize("model", ["proposers.LastTokenProposer", "proposers:LastTokenProposer"])
def test_a_dotted_path_as_model_is_detected_as_custom_class(model):
    spec = SpeculativeConfig.from_dict({"model": model, "num_speculative_tokens": 3}, target_model_config=trusted())
    assert spec.method == "custom_class" and spec.speculator_config.proposer_path == model
    with pytest.raises(SpeculativeConfigError, match="trust_remote_code"):
        SpeculativeConfig.from_dict({"model": model, "num_speculative_tokens": 3})


def test_k_is_required():
    with pytest.raises(SpeculativeConfigError, match="num_speculative_tokens"):
        SpeculativeConfig.from_dict({"method": "custom_class", "model": "proposers.LastTokenProposer"},
                                    target_model_config=trusted())


def make(model, k=4, **context):
    from specpath.factory import create_speculator
    from specpath.speculator import SpeculatorContext

    spec = SpeculativeConfig.from_dict({"method": "custom_class", "model": model, "num_speculative_tokens": k},
                                       target_model_config=trusted())
    options = {"vocab_size": 16, "max_model_len": 32, "max_num_seqs": 2, **context}
    return create_speculator(spec, SpeculatorContext(**options))


def request(req_id, tokens, budget=4):
    from specpath.speculator import DraftRequest

    return DraftRequest(req_id=req_id, token_ids=tuple(tokens), num_new_positions=1, max_draft_tokens=budget)


@pytest.mark.parametrize("model", ["proposers.LastTokenProposer", "proposers.NoSlotMappingsProposer",
                                   "proposers.CopySpeculator"])
def test_both_contracts_draft_the_same(model):
    from specpath.speculator import DraftBatch

    speculator = make(model)
    batch = DraftBatch(requests=(request("a", [1, 2, 3, 1]), request("b", [5, 6, 7]), request("c", [4, 9, 4], 1),
                                 request("d", [2, 3, 2], 0)))
    proposal = speculator.propose(batch)
    assert list(proposal.num_draft_tokens) == [3, 0, 1, 0]
    assert proposal.token_ids.dtype == torch.int32 and proposal.token_ids.tolist() == [2, 3, 1, 9]
    # the next step: only new tokens are written; batch order changed
    batch = DraftBatch(requests=(request("c", [4, 9, 4, 9]), request("a", [1, 2, 3, 1, 2, 3])))
    assert speculator.propose(batch).token_ids.tolist() == [4, 9, 1, 2, 3]
    speculator.remove_request("a")


def test_the_adapter_passes_what_vllm_passes():
    from specpath.speculator import DraftBatch

    seen = []
    speculator = make("proposers.LastTokenProposer")
    proposer = speculator.inner.proposer

    def spy(sampled, counts, buffer, slot_mappings=None):
        seen.append((sampled, counts.tolist(), [buffer[i, :n].tolist() for i, n in enumerate(counts)], slot_mappings))
        return [[] for _ in sampled]

    proposer.propose = spy
    speculator.inner._pass_slot_mappings = True
    speculator.propose(DraftBatch(requests=(request("a", [1, 2, 3]), request("b", [4, 5], 0))))
    speculator.propose(DraftBatch(requests=(request("a", [1, 2, 3, 7, 8]),)))
    assert seen == [([[3], []], [3, 2], [[1, 2, 3], [4, 5]], None), ([[7, 8]], [5], [[1, 2, 3, 7, 8]], None)]


def test_a_bad_answer_is_a_one_line_error():
    from specpath.speculator import DraftBatch

    speculator = make("proposers.BadAnswerProposer")
    with pytest.raises(ValueError, match="outside") as info:
        speculator.propose(DraftBatch(requests=(request("a", [1, 2, 1]),)))
    assert "\n" not in str(info.value)


PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    "the cat sat on the mat. the cat sat on the mat. the",
    "the cat sat on the mat. the cat sat on the mat. the",
]


def generate(config, prefix_caching):
    from specpath_engine.llm import LLM, SamplingParams

    threads = torch.get_num_threads()
    try:
        llm = LLM(speculative_config=config, max_num_batched_tokens=24, num_threads=1, max_num_seqs=2,
                  enable_prefix_caching=prefix_caching, trust_remote_code=True)
        outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=32))
    finally:
        torch.set_num_threads(threads)
    return [o.token_ids for o in outputs], sum(o.metrics.num_draft_tokens for o in outputs)


@pytest.mark.slow  # ~0.5 s per K on the embedded model
@pytest.mark.parametrize("prefix_caching", [False, True])
@pytest.mark.parametrize("model", ["proposers.LastTokenProposer", "proposers:CopySpeculator"])
def test_greedy_output_is_identical_for_every_k(model, prefix_caching):
    plain, _ = generate(None, prefix_caching)
    for k in range(1, 9):
        tokens, drafted = generate({"method": "custom_class", "model": model, "num_speculative_tokens": k},
                                   prefix_caching)
        assert drafted > 0, k
        assert tokens == plain, k


def test_the_llm_refuses_without_trust():
    from specpath_engine.llm import LLM

    with pytest.raises(SpeculativeConfigError, match="trust_remote_code=True"):
        LLM(speculative_config={"model": "proposers.LastTokenProposer", "num_speculative_tokens": 2})


@pytest.mark.parametrize("command", ["validate", "explain"])
def test_cli_flag(command, tmp_path):
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}
    config = '{"method": "custom_class", "model": "proposers.LastTokenProposer", "num_speculative_tokens": 2}'
    base = [sys.executable, "-m", "specpath", command, "--speculative-config", config]
    refused = subprocess.run(base, capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 1 and "trust_remote_code=True" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    allowed = subprocess.run(base + ["--trust-remote-code"], capture_output=True, text=True, env=env, timeout=120)
    assert allowed.returncode == 0, allowed.stderr


def test_cli_run_flag():
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}
    config = '{"method": "custom_class", "model": "proposers.LastTokenProposer", "num_speculative_tokens": 2}'
    base = [sys.executable, "-m", "specpath", "run", "--prompt", "ab ab ab", "--max-tokens", "4",
            "--speculative-config", config]
    refused = subprocess.run(base, capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 1 and "trust_remote_code=True" in refused.stderr
    allowed = subprocess.run(base + ["--trust-remote-code"], capture_output=True, text=True, env=env, timeout=120)
    assert allowed.returncode == 0, allowed.stderr
