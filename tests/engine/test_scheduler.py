"""Scheduler budgets, chunked prefill, dynamic K and KV rollback under random workloads."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_helpers import OracleSpeculator, baseline, make_engine, random_prompts
from specpath_engine.request import SamplingParams
from specpath_engine.scheduler import SchedulerSettings


def _audit(engine, k_table=None, log=None):
    """Wrap ``schedule`` so every step's budgets are checked against the config."""
    sched = engine.scheduler
    inner = sched.schedule
    c = sched.config

    def schedule():
        out = inner()
        rows = 0
        for s in out.scheduled:
            r = s.request
            assert s.num_new_tokens >= 1
            assert r.num_computed_tokens + s.num_new_tokens <= len(r.token_ids)
            if not s.samples:  # a non-final prefill chunk leaves the drafter's lookahead tokens
                assert len(r.token_ids) - (r.num_computed_tokens + s.num_new_tokens) >= c.num_prefill_lookahead_tokens
                assert s.max_draft_tokens == 0
            assert s.max_draft_tokens <= out.num_speculative_tokens
            assert r.num_computed_tokens + s.num_new_tokens + s.max_draft_tokens <= c.max_model_len
            need = r.num_computed_tokens + s.num_new_tokens + s.max_draft_tokens + c.num_lookahead_tokens
            assert len(r.table.block_ids) * sched.blocks.block_size >= need
            rows += s.num_new_tokens + s.max_draft_tokens + (c.num_extra_draft_slots if s.max_draft_tokens else 0)
        assert len(out.scheduled) <= c.max_num_seqs
        assert rows == out.num_batched_tokens <= c.max_num_batched_tokens
        if k_table is not None:
            assert out.num_speculative_tokens in {k for _, _, k in k_table}
        if log is not None:
            log.append(out)
        return out

    sched.schedule = schedule


def _k_of(table):
    def k_for(n):
        for lo, hi, k in table:
            if lo <= n <= hi:
                return k
        return table[-1][2]
    return k_for


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(1, 8),
    block_size=st.sampled_from([1, 2, 4, 16]),
    tight_cache=st.booleans(),
    prefix_caching=st.booleans(),
    max_num_seqs=st.integers(1, 5),
    budget=st.integers(10, 48),
    corrupt=st.floats(0.0, 1.0),
    hidden=st.booleans(),
    lookahead=st.integers(0, 3),
    extra_slots=st.integers(0, 2),
)
def test_random_accept_reject_keeps_output_and_blocks_exact(
    model, seed, k, block_size, tight_cache, prefix_caching, max_num_seqs, budget, corrupt, hidden,
    lookahead, extra_slots,
):
    rng = random.Random(seed)
    prompts = random_prompts(rng.randint(1, 6), seed=seed, lo=1, hi=30)
    prompts += prompts[: rng.randint(0, 2)]
    max_tokens = rng.randint(1, 20)
    outputs = baseline(model, prompts, max_tokens)
    references = [p + o for p, o in zip(prompts, outputs)]
    speculator = OracleSpeculator(references, corrupt=corrupt, seed=seed, layers=(0,) if hidden else ())
    per_request = -(-(64 + lookahead) // block_size)  # the smallest pool that fits one request
    table = ((1, 2, k), (3, 100, max(1, k // 2)))
    engine = make_engine(
        model, speculator=speculator, k=k, block_size=block_size, prefix_caching=prefix_caching,
        num_blocks=per_request if tight_cache else None, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget, hidden=hidden, k_table=_k_of(table),
        num_lookahead_tokens=lookahead, num_extra_draft_slots=extra_slots, max_model_len=64,
    )
    _audit(engine, k_table=table)
    requests, metrics = engine.generate(prompts, SamplingParams(max_tokens=max_tokens))
    assert [r.output_token_ids for r in requests] == outputs
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
    assert all(c == 0 for c in engine.blocks.ref_counts)
    assert sum(metrics.accepted_by_position) == metrics.num_accepted_tokens <= metrics.num_draft_tokens


def test_dynamic_k_follows_batch_size(model):
    prompts = random_prompts(6, seed=5, lo=3, hi=10)
    outputs = baseline(model, prompts, 12)
    speculator = OracleSpeculator([p + o for p, o in zip(prompts, outputs)], corrupt=0.0)
    table = ((1, 1, 7), (2, 3, 3), (4, 64, 1))
    engine = make_engine(model, speculator=speculator, k=7, k_table=_k_of(table), max_num_seqs=8,
                         max_num_batched_tokens=256)
    log = []
    _audit(engine, log=log)
    lengths = [2, 4, 6, 8, 10, 12]  # requests finish one after another: the batch shrinks
    requests, _ = engine.generate(prompts, [SamplingParams(max_tokens=n) for n in lengths])
    assert [r.output_token_ids for r in requests] == [o[:n] for o, n in zip(outputs, lengths)]
    ks = [out.num_speculative_tokens for out in log]
    assert ks[0] == 1  # six active requests
    assert 3 in ks and ks[-1] == 7
    asked = [max((r.max_draft_tokens for r in b.requests), default=0) for b in speculator.calls]
    assert max(asked) <= 7


def test_chunked_prefill_respects_budget_and_prefill_lookahead(model):
    prompt = random_prompts(1, seed=9, lo=30, hi=30)[0]
    outputs = baseline(model, [prompt], 5)
    speculator = OracleSpeculator([prompt + outputs[0]], corrupt=0.0, layers=(1,))
    engine = make_engine(model, speculator=speculator, k=2, hidden=True, max_num_batched_tokens=8)
    log = []
    _audit(engine, log=log)
    requests, _ = engine.generate([prompt], SamplingParams(max_tokens=5))
    assert requests[0].output_token_ids == outputs[0]
    chunks = [s.num_new_tokens for s in log[0].scheduled] + [s.num_new_tokens for s in log[1].scheduled]
    assert chunks == [8, 8]


def test_chunked_prefill_disabled_needs_full_prompt_budget():
    with pytest.raises(ValueError, match="chunked prefill"):
        SchedulerSettings(max_num_batched_tokens=16, max_model_len=64, enable_chunked_prefill=False)
    with pytest.raises(ValueError, match="num_prefill_lookahead_tokens"):
        SchedulerSettings(max_num_batched_tokens=2, num_prefill_lookahead_tokens=2)


def test_prompt_longer_than_context_is_a_clear_error(model):
    engine = make_engine(model)
    with pytest.raises(ValueError, match="max_model_len"):
        engine.add_request([1] * model.config.max_position_embeddings, SamplingParams())


def test_preemption_under_a_small_cache_keeps_output(model):
    prompts = random_prompts(5, seed=2, lo=20, hi=30)
    outputs = baseline(model, prompts, 20)
    speculator = OracleSpeculator([p + o for p, o in zip(prompts, outputs)], corrupt=0.3, layers=(0,))
    engine = make_engine(model, speculator=speculator, k=4, block_size=4, num_blocks=17, max_model_len=64,
                         prefix_caching=True, hidden=True)
    _audit(engine)
    requests, _ = engine.generate(prompts, SamplingParams(max_tokens=20))
    assert [r.output_token_ids for r in requests] == outputs
    assert sum(r.num_preemptions for r in requests) > 0
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks


def test_a_cache_too_small_for_one_request_is_refused_at_start(model):
    with pytest.raises(ValueError, match="cannot hold one request"):
        make_engine(model, block_size=4, num_blocks=3, max_model_len=64)

