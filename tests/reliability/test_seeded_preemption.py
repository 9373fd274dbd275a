"""A seeded request's tokens do not depend on KV-cache preemption: 16 seeded requests through a
pool that holds about one give exactly the tokens of a roomy run, for every drafting method.

Both the drafter's and the verifier's random numbers are functions of (seed, position) only, and
a preempted request resumes with the same step (last token decoded with drafts) it would have run.
"""

from __future__ import annotations

import pytest

from reliability_helpers import installed_methods
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.scheduler import Scheduler

METHODS = [m for m in installed_methods() if m[0] in {"ngram", "eagle", "draft_model", "dflash", "dspark", "mtp", "eagle3"}]
PROMPTS = [f"def f{i}(x):\n    " if i % 2 else f"import m{i}\n" for i in range(16)]
PARAMS = [SamplingParams(temperature=0.9, max_tokens=24, seed=100 + i) for i in range(16)]


def _count_preemptions(monkeypatch) -> list[int]:
    count = [0]
    original = Scheduler._preempt

    def counting(self, request):
        count[0] += 1
        original(self, request)

    monkeypatch.setattr(Scheduler, "_preempt", counting)
    return count


def test_all_seven_methods_are_covered():
    assert len(METHODS) == 7


@pytest.mark.parametrize(("name", "config"), METHODS, ids=[m[0] for m in METHODS])
def test_seeded_outputs_survive_preemption(name, config, monkeypatch):
    roomy = [o.token_ids for o in LLM(None, config, max_num_seqs=16).generate(PROMPTS, PARAMS)]
    preemptions = _count_preemptions(monkeypatch)
    tight = LLM(None, config, max_num_seqs=16, num_kv_blocks=6, block_size=16, max_model_len=80)
    got = [o.token_ids for o in tight.generate(PROMPTS, PARAMS)]
    assert preemptions[0] > 0, "the small pool must preempt for this test to mean anything"
    assert sum(a == b for a, b in zip(roomy, got)) == 16
    assert tight.engine.blocks.num_free_blocks == tight.engine.blocks.num_blocks


def _scheduler(prefix_caching: bool):
    from specpath_engine.block_manager import BlockManager
    from specpath_engine.scheduler import SchedulerSettings

    settings = SchedulerSettings(max_num_seqs=4, max_num_batched_tokens=64, max_model_len=64, speculative=True)
    return Scheduler(settings, BlockManager(16, 4, enable_prefix_caching=prefix_caching), lambda n: 3)


@pytest.mark.parametrize("prefix_caching", [False, True])
def test_a_preempted_decoding_request_resumes_with_a_drafting_decode_step(prefix_caching):
    from specpath_engine.request import Request

    scheduler = _scheduler(prefix_caching)
    r = Request(req_id="0", prompt_token_ids=list(range(1, 10)), params=SamplingParams(max_tokens=20))
    scheduler.add_request(r)
    scheduler.schedule()  # the prompt's prefill
    r.num_computed_tokens = 9
    r.token_ids += [11, 12, 13, 14]  # four tokens decoded; the last one is not in the cache yet
    r.num_computed_tokens = 12  # three full blocks of 4
    if prefix_caching:
        scheduler.blocks.register_computed(r.table, r.token_ids, r.num_computed_tokens)
    scheduler._preempt(scheduler.running.pop())
    out = scheduler.schedule()
    (s,) = out.scheduled
    if prefix_caching:  # the cache holds all but the last token: it decodes, with drafts, at once
        assert (r.num_computed_tokens, s.num_new_tokens, s.max_draft_tokens) == (12, 1, 3) and s.samples
    else:
        assert s.max_draft_tokens == 0 and r.num_computed_tokens + s.num_new_tokens == len(r.token_ids) - 1
        assert not s.samples  # the recompute never samples: the last token's step does, with drafts
        r.num_computed_tokens += s.num_new_tokens
        (s,) = scheduler.schedule().scheduled
        assert (s.num_new_tokens, s.max_draft_tokens) == (1, 3) and s.samples
