"""Greedy output with speculation equals greedy output without it, token for token."""

import attrs
import pytest
import torch

from engine_helpers import JitteryClock, OracleSpeculator, baseline, make_engine, random_prompts
from lookup_methods import LOOKUP, test_methods  # noqa: F401 - fixture
from specpath_engine.llm_engine import RequestFailedError
from specpath_engine.request import SamplingParams

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def workload(model):
    prompts = random_prompts(6, seed=3, lo=1, hi=37)
    return prompts, baseline(model, prompts, MAX_TOKENS)


@torch.inference_mode()
def test_baseline_matches_full_recompute(model, workload):
    prompts, outputs = workload
    for prompt, out in zip(prompts[:3], outputs[:3]):
        ids = list(prompt)
        for _ in range(MAX_TOKENS):
            logits = model(torch.tensor(ids), torch.arange(len(ids))).logits[-1]
            ids.append(int(logits.argmax()))
        assert ids[len(prompt):] == out


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_partially_correct_drafts(model, workload, k, prefix_caching):
    prompts, outputs = workload
    references = [p + o for p, o in zip(prompts, outputs)]
    speculator = OracleSpeculator(references, corrupt=0.35, seed=k)
    engine = make_engine(model, speculator=speculator, k=k, prefix_caching=prefix_caching, max_num_batched_tokens=40)
    # Ragged batch; repeated prompts exercise prefix-cache hits.
    requests, metrics = engine.generate(prompts + prompts[:3], SamplingParams(max_tokens=MAX_TOKENS))
    assert [r.output_token_ids for r in requests] == outputs + outputs[:3]
    assert metrics.num_draft_tokens > 0 and 0 < metrics.num_accepted_tokens < metrics.num_draft_tokens
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
    assert sorted(speculator.removed) == sorted(r.req_id for r in requests)
    if prefix_caching:
        assert metrics.num_cached_tokens > 0


def decode_as_without_speculation(model, workload, speculator, *, k):
    """Greedy-decode the workload's prompts speculating with ``speculator`` at K = ``k``: the
    outputs must be the plain ones; returns the run's metrics."""
    prompts, outputs = workload
    engine = make_engine(model, speculator=speculator, k=k)
    requests, metrics = engine.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS))
    assert [r.output_token_ids for r in requests] == outputs
    return metrics


@pytest.mark.parametrize("k", [1, 3, 8])
def test_random_drafts(model, workload, k):
    speculator = OracleSpeculator([], seed=k)  # no reference: every draft is a random token
    metrics = decode_as_without_speculation(model, workload, speculator, k=k)
    assert metrics.num_draft_tokens > 0


def test_perfect_drafts_accept_everything(model, workload):
    prompts, outputs = workload
    speculator = OracleSpeculator([p + o for p, o in zip(prompts, outputs)], corrupt=0.0)
    metrics = decode_as_without_speculation(model, workload, speculator, k=4)
    assert metrics.num_accepted_tokens == metrics.num_draft_tokens
    assert metrics.acceptance_rate_by_position == [1.0] * len(metrics.acceptance_rate_by_position)
    # Each verification step emits its drafts plus the bonus token.
    assert metrics.mean_acceptance_length == pytest.approx(1 + metrics.num_draft_tokens / metrics.num_drafts)


class OverDrafter(OracleSpeculator):
    """Ignores the step's budget and drafts K + 3 tokens: the runner trims them (v2 runner)."""

    def propose(self, batch):
        requests = tuple(
            attrs.evolve(r, max_draft_tokens=r.max_draft_tokens + 3) if r.max_draft_tokens else r
            for r in batch.requests
        )
        return super().propose(attrs.evolve(batch, requests=requests))


def test_runner_trims_drafts_to_the_step_budget(model, workload):
    prompts, outputs = workload
    speculator = OverDrafter([p + o for p, o in zip(prompts, outputs)], corrupt=0.2)
    metrics = decode_as_without_speculation(model, workload, speculator, k=2)
    assert len(metrics.drafted_by_position) <= 2


def test_inconsistent_proposal_is_a_clear_error(model):
    class Broken(OracleSpeculator):
        def propose(self, batch):
            p = super().propose(batch)
            return type(p)(token_ids=p.token_ids, num_draft_tokens=list(p.num_draft_tokens) + [1])

    engine = make_engine(model, speculator=Broken([]), k=2)
    with pytest.raises(RequestFailedError, match="Broken.propose") as failure:
        engine.generate([[1, 2, 3]], SamplingParams(max_tokens=5))
    assert isinstance(failure.value.__cause__, ValueError)
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks


def test_abort_frees_blocks_and_tells_the_speculator(model, workload):
    prompts, outputs = workload
    speculator = OracleSpeculator([p + o for p, o in zip(prompts, outputs)], corrupt=0.3)
    engine = make_engine(model, speculator=speculator, k=3, max_num_seqs=2)
    requests = [engine.add_request(p, SamplingParams(max_tokens=MAX_TOKENS)) for p in prompts]
    for _ in range(3):
        engine.step()
    running, waiting = engine.scheduler.running[0], engine.scheduler.waiting[-1]
    engine.abort_request(running)
    engine.abort_request(waiting)
    while engine.has_unfinished:
        engine.step()
    assert running.finish_reason == waiting.finish_reason == "abort"
    assert {running.req_id, waiting.req_id} <= set(speculator.removed)
    kept = [(r, o) for r, o in zip(requests, outputs) if r.finish_reason != "abort"]
    assert [r.output_token_ids for r, _ in kept] == [o for _, o in kept]
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks


@pytest.mark.parametrize("quantization", [None, "int8", "int4"])
def test_bf16_speculation_is_exact_on_the_native_kernels(quantization, test_methods):
    """The native kernels are row-invariant (matmuls, norms, attention of one request), so in bf16
    too a verified token gets the logits a one-token step gives it: greedy speculation equals
    greedy plain decoding, weight-only quantised or not."""
    from specpath_engine.llm import LLM
    from specpath_engine.modeling.native import kernels

    if kernels() is None:
        pytest.skip("native kernels unavailable here")
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    plain = LLM(None, dtype="bfloat16", quantization=quantization, num_threads=1)
    spec = LLM(None, {"method": LOOKUP, "num_speculative_tokens": 4}, dtype="bfloat16", quantization=quantization,
               num_threads=1)
    accepted = 0
    for prompt in ["def main():\n    ", "import os\nimport sys\n", "the 12 the 12 the 12"]:  # one request at a time
        out = spec.generate([prompt], params)[0]
        assert out.token_ids == plain.generate([prompt], params)[0].token_ids
        accepted += out.metrics.num_accepted_tokens
    assert accepted > 0
    assert all(layer.native_linears() for layer in spec.model.model.layers)


@pytest.mark.parametrize("quantization", [None, "int4"])
def test_bf16_speculation_in_a_batch_is_exact_on_the_native_kernels(quantization, test_methods, monkeypatch):
    """Several requests at once: a batched step's attention is one native call whose rows get the
    bits of their request alone, so in bf16 a batch's greedy speculation equals plain decoding of
    each prompt alone (on torch's padded SDPA, SmolLM2's EAGLE-3 at batch 8 differed from plain in
    6 of 8 chat replies: docs/benchmarks-history.md, 2026-12-03)."""
    from specpath_engine.llm import LLM
    from specpath_engine.modeling import native

    if native.kernels() is None:
        pytest.skip("native kernels unavailable here")
    calls, original = [0], type(native.kernels()).attention_batch

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(type(native.kernels()), "attention_batch", counted)
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    prompts = ["def main():\n    ", "import os\nimport sys\n", "the 12 the 12 the 12", "class A:\n    def"]
    plain = LLM(None, dtype="bfloat16", quantization=quantization, num_threads=1)
    alone = [plain.generate([p], params)[0].token_ids for p in prompts]
    spec = LLM(None, {"method": LOOKUP, "num_speculative_tokens": 4}, dtype="bfloat16", quantization=quantization,
               num_threads=1)
    outs = spec.generate(prompts, params)
    assert calls[0] > 0
    assert [o.token_ids for o in outs] == alone
    assert [o.token_ids for o in plain.generate(prompts, params)] == alone
    assert sum(o.metrics.num_accepted_tokens for o in outs) > 0


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("clock", ["real", "jittery"])
def test_greedy_identity_with_the_measured_draft_governor(model, batch, clock):
    """Draft lengths chosen for the whole batch from measured (here: real, or wildly varying)
    step costs: the output is the plain one, token for token."""
    from specpath_engine.draft_governor import DraftGovernor

    prompts = random_prompts(batch, seed=11, lo=1, hi=37)
    outputs = baseline(model, prompts, MAX_TOKENS)
    speculator = OracleSpeculator([p + o for p, o in zip(prompts, outputs)], corrupt=0.3, seed=batch)
    governor = DraftGovernor(4, 0.1) if clock == "real" else DraftGovernor(4, 0.1, clock=JitteryClock(batch))
    engine = make_engine(model, speculator=speculator, k=4, max_num_seqs=16, max_num_batched_tokens=128,
                         governor=governor, skips_backed_off=True)
    requests, metrics = engine.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS))
    assert [r.output_token_ids for r in requests] == outputs
    assert metrics.num_draft_tokens > 0 and metrics.step_costs["target_steps"] > 0
    if clock == "jittery":
        assert metrics.num_backoff_steps > 0
