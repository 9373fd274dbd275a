"""Greedy output with draft_model speculation equals plain greedy output, token for token,
through ``specpath_engine.LLM`` (chunked prefill, several requests per batch), for K = 1..8."""

import pytest
import torch

import tiny_drafts
from specpath_engine.llm import LLM, SamplingParams

PROMPTS = [
    "the cat sat on the mat. the cat sat on the mat. the cat",
    "1, 2, 3, 1, 2, 3, 1, 2",
    "def main(argv):\n    return 0\n" * 3,
    "x",
]
PARAMS = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in (40, 33, 27, 40)]
SHAPES = {
    "self": {"model": "self"},  # the target as its own draft: every draft accepted
    "random": {"model": "random", "draft_sample_method": "random"},  # greedy requests draft greedily
    "pard": {"model": "pard", "parallel_drafting": True},
    "bpe": {"model": "bpe", "use_heterogeneous_vocab": True},
}


def run(spec):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        llm = LLM(tiny_drafts.target(), spec, max_num_seqs=4, max_num_batched_tokens=48)
        outputs = llm.generate(PROMPTS, PARAMS)
    finally:
        torch.set_num_threads(threads)
    return [o.token_ids for o in outputs], llm.metrics


@pytest.fixture(scope="module")
def plain():
    return run(None)[0]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("k", range(1, 9))
def test_greedy_identity(plain, shape, k):
    options = dict(SHAPES[shape])
    options["model"] = tiny_drafts.path(options["model"])
    tokens, metrics = run({"method": "draft_model", "num_speculative_tokens": k, **options})
    assert tokens == plain
    assert metrics.num_draft_tokens > 0
    if shape == "self":
        assert metrics.num_accepted_tokens == metrics.num_draft_tokens


@pytest.mark.parametrize("method", ["int8", "int4"])
def test_a_weight_only_quantized_draft_keeps_the_output(plain, method):
    """``quantization`` in the speculative config: the draft's matrices are held weight-only
    quantised by the engine; greedy output stays the plain one."""
    from specpath_engine.quantization import Int4Linear, Int8Linear

    spec = {"method": "draft_model", "model": tiny_drafts.path("random"), "num_speculative_tokens": 4,
            "quantization": method}
    outputs, metrics = run(spec)
    assert outputs == plain and metrics.num_draft_tokens > 0
    llm = LLM(tiny_drafts.target(), spec, max_num_seqs=4)  # the model it drafts with (run's LLM is gone)
    kinds = {type(m) for m in llm.speculator.model.modules()}
    assert (Int8Linear if method == "int8" else Int4Linear) in kinds and torch.nn.Linear not in kinds
