"""A step that raises (speculator, sampler, model) aborts its requests, frees their KV blocks and
drafter state, raises one clear error, and leaves the engine usable for the next call."""

from __future__ import annotations

import pytest

from specpath_engine import runner as runner_module
from specpath_engine.llm import LLM, RequestFailedError, SamplingParams
from reliability_helpers import Boom, assert_clean, fail_on_call

PROMPTS = ["def main():\n    return ", "import os\nimport sys\n", "class A:\n    def f(self):\n"]
GREEDY = SamplingParams(max_tokens=24)
SAMPLED = SamplingParams(max_tokens=24, temperature=0.9, seed=5)  # seeded: verified by the race
UNSEEDED = SamplingParams(max_tokens=24, temperature=0.9)  # under random drafts: sample_tokens and rejection_sample


@pytest.fixture(scope="module")
def ngram_llm():
    # fixed: the speculator proposes every step, so "fail on call N" lands mid-generation whatever
    # the machine's speed (the adaptive policy's choices follow measured step costs)
    return LLM(None, {"method": "ngram", "num_speculative_tokens": 4, "draft_length_policy": "fixed"})


@pytest.fixture(scope="module")
def random_drafts_llm():
    # random drafts: an unseeded request is verified by rejection sampling (else it races)
    return LLM(None, {"method": "ngram", "num_speculative_tokens": 4, "draft_length_policy": "fixed",
                      "draft_sample_method": "random"})


@pytest.fixture(scope="module")
def expected(plain_llm):
    return [o.token_ids for o in plain_llm.generate(PROMPTS, GREEDY)]


@pytest.mark.parametrize("call", [1, 3, 7])
def test_speculator_failure_mid_step_aborts_and_recovers(ngram_llm, expected, monkeypatch, call):
    spec = ngram_llm.speculator
    monkeypatch.setattr(spec, "propose", fail_on_call(call, spec.propose))
    with pytest.raises(RequestFailedError, match="injected failure") as failure:
        ngram_llm.generate(PROMPTS, GREEDY)
    assert isinstance(failure.value.__cause__, Boom)
    message = str(failure.value)
    assert "\n" not in message and "engine is still usable" in message
    assert all(r.finish_reason in ("error", "abort") for r in failure.value.all_requests)
    assert any(r.finish_reason == "error" and r.error.startswith("Boom:") for r in failure.value.all_requests)
    assert_clean(ngram_llm)
    monkeypatch.undo()
    assert [o.token_ids for o in ngram_llm.generate(PROMPTS, GREEDY)] == expected
    assert_clean(ngram_llm)


@pytest.mark.parametrize("target", ["sample_tokens", "rejection_sample", "race", "forward"])
def test_sampler_and_model_failures_abort_and_recover(ngram_llm, random_drafts_llm, expected, monkeypatch, target):
    if target in ("sample_tokens", "rejection_sample"):
        ngram_llm = random_drafts_llm
    if target == "sample_tokens":
        monkeypatch.setattr(runner_module, "sample_tokens", fail_on_call(4, runner_module.sample_tokens))
        params = UNSEEDED
    elif target == "rejection_sample":
        import specpath_engine.sample as sample

        monkeypatch.setattr(sample, "rejection_sample", fail_on_call(2, sample.rejection_sample))
        params = UNSEEDED
    elif target == "race":
        import specpath_engine.sample.race as race

        monkeypatch.setattr(race, "verify_chains", fail_on_call(2, race.verify_chains))
        params = SAMPLED
    else:
        model = ngram_llm.engine.runner.model
        monkeypatch.setattr(model, "forward", fail_on_call(5, model.forward))
        params = GREEDY
    with pytest.raises(RequestFailedError, match="injected failure"):
        ngram_llm.generate(PROMPTS, params)
    assert_clean(ngram_llm)
    monkeypatch.undo()
    assert [o.token_ids for o in ngram_llm.generate(PROMPTS, GREEDY)] == expected
    assert_clean(ngram_llm)


def test_drafter_state_is_dropped_for_failed_requests(expected, monkeypatch):
    llm = LLM(None, {"method": "ngram", "num_speculative_tokens": 4})
    spec = llm.speculator
    removed: list[str] = []
    original_remove = spec.remove_request
    monkeypatch.setattr(spec, "remove_request", lambda rid: (removed.append(rid), original_remove(rid)))
    monkeypatch.setattr(spec, "on_verified", fail_on_call(2, spec.on_verified))
    with pytest.raises(RequestFailedError) as failure:
        llm.generate(PROMPTS, GREEDY)
    assert {r.req_id for r in failure.value.all_requests} <= set(removed)
    assert_clean(llm)
    monkeypatch.undo()
    assert [o.token_ids for o in llm.generate(PROMPTS, GREEDY)] == expected


def test_a_bad_request_in_a_call_leaves_nothing_queued(ngram_llm, expected):
    with pytest.raises(ValueError, match="does not fit"):
        ngram_llm.generate([PROMPTS[0], "x" * 10_000], GREEDY)
    assert_clean(ngram_llm)
    assert [o.token_ids for o in ngram_llm.generate(PROMPTS, GREEDY)] == expected


@pytest.mark.parametrize("bad", [dict(stop=[None]), dict(seed="abc", temperature=1.0),
                                 dict(temperature=float("inf")), dict(max_tokens=2.5)])
def test_bad_sampling_params_never_reach_the_engine(ngram_llm, expected, bad):
    with pytest.raises(ValueError) as failure:
        ngram_llm.generate(PROMPTS, SamplingParams(**bad))
    assert str(failure.value).startswith("SamplingParams.") and "\n" not in str(failure.value)
    assert_clean(ngram_llm)
    assert [o.token_ids for o in ngram_llm.generate(PROMPTS, GREEDY)] == expected
