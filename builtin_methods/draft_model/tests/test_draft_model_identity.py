"""Greedy output with draft_model speculation equals plain greedy output, token for token,
through ``specpath_engine.LLM`` (chunked prefill, several requests per batch), for K = 1..8."""

import pytest
import torch

import tiny_drafts
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.testing.native import native_kernels_missing

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


@pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))
@pytest.mark.parametrize("reduced", [False, True])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_one_requests_chain_in_one_native_call_is_the_per_op_chain(tmp_path, reduced, temperature):
    """bf16 on a CPU with the native kernels: a lone request's drafts come from one native call
    (``model_draft.c``: its catch-up pass and one pass per further draft), the per-op passes'
    drafts and draft KV to the bit, greedy or (seeded, T = 0.8) raced on its sampling noise, with
    the whole head or a reduced draft vocabulary's kept rows."""
    from specpath_drafting.testing import with_train_vocab
    from specpath_engine.testing.engine import random_llama, save_with_byte_tokenizer

    target, draft = tmp_path / "target", tmp_path / "draft"
    save_with_byte_tokenizer(random_llama(0, hidden_size=128, num_layers=3, num_heads=4, num_kv_heads=2,
                                          head_scale=6.0), target)  # head_dim 32: what the kernels take
    random_llama(1, hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, head_scale=6.0).save_pretrained(draft)
    if reduced:
        draft = with_train_vocab(draft, tmp_path / "reduced", range(0, 256, 2))  # 128 rows: a multiple of 16
    spec = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": 4, "draft_length_policy": "fixed"}
    engines = [LLM(str(target), spec, dtype="bfloat16", num_threads=1, max_num_seqs=1) for _ in range(2)]
    native_calls, inner = [0], engines[0].speculator._native_chain

    def counted(*args):
        out = inner(*args)
        native_calls[0] += out is not None
        return out

    engines[0].speculator._native_chain = counted
    engines[1].speculator._native_chain = lambda *args: None  # the per-op passes
    proposals = [[], []]
    for engine, seen in zip(engines, proposals):
        propose = engine.speculator.propose

        def recorded(batch, propose=propose, seen=seen):
            out = propose(batch)
            seen.append((out.token_ids.tolist(), list(out.num_draft_tokens)))
            return out

        engine.speculator.propose = recorded
    params = [SamplingParams(temperature=temperature, max_tokens=40, ignore_eos=True, seed=7 + i) for i in range(3)]
    outputs = [[o.token_ids for o in engine.generate(PROMPTS[:3], params)] for engine in engines]
    assert outputs[0] == outputs[1]
    assert proposals[0] == proposals[1] and native_calls[0] > 10
    kv = [engine.speculator.kv for engine in engines]
    assert torch.equal(kv[0].keys, kv[1].keys) and torch.equal(kv[0].values, kv[1].values)
