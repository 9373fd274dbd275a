"""The adaptive draft-length policy: what it chooses, and that it never changes the output."""

import pytest
from hypothesis import given, strategies as st

from specpath_engine.draft_governor import FIRST_WAIT, MAX_WAIT, DraftGovernor, best_length
from specpath_engine.llm import LLM, SamplingParams


def test_the_docstrings_worked_example():
    assert best_length([0.8] * 4, 4, 0.10) == 4
    assert best_length([0.3] * 4, 4, 0.10) == 1
    assert best_length([0.1] * 4, 4, 0.10) == 0
    assert best_length([0.1] * 4, 4, 0.0) == 1  # a free drafter still pays at low acceptance
    assert best_length([0.5] * 4, 4, 0.25, one_pass=True) == 4  # one pass: K costs what 1 does
    assert best_length([0.5] * 4, 4, 0.25) == 1


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8), st.floats(0, 10), st.integers(0, 8))
def test_length_is_within_budget_and_monotone_in_cost(rates, cost, budget):
    budget = min(budget, len(rates))
    k = best_length(rates, budget, cost)
    assert 0 <= k <= budget
    assert best_length(rates, budget, cost + 0.5) <= k or k == 0


def test_backs_off_probes_and_returns():
    g = DraftGovernor(4, pass_cost=0.1)
    pos = 100
    assert g.choose("r", 4, pos) == 4  # the optimistic prior tries drafting
    for _ in range(30):  # nothing is ever accepted
        pos += 1
        k = g.choose("r", 4, pos)
        g.observe("r", k, 0)
    waits, run = [], 0
    for _ in range(400):  # plain steps emit one token: one position each
        pos += 1
        k = g.choose("r", 4, pos)
        if k:
            waits.append(run)
            run = 0
            g.observe("r", k, 0)
        else:
            run += 1
    assert waits[0] >= FIRST_WAIT - 1 and waits == sorted(waits) and max(waits) <= MAX_WAIT
    for _ in range(MAX_WAIT + 1):  # the text becomes predictable: probes now succeed
        pos += 1
        k = g.choose("r", 4, pos)
        if k:
            g.observe("r", k, k)
            pos += k
    assert g.choose("r", 4, pos) == 4
    assert g.choose("r", 2, pos) <= 2 and g.choose("r", 0, pos) == 0


def test_asking_again_at_a_position_gets_the_same_answer():
    """A preempted request is re-asked at the position it had: the answer must not move."""
    g = DraftGovernor(4, pass_cost=0.1)
    for _ in range(20):
        g.observe("r", 4, 0)
    first = g.choose("r", 4, 50)
    assert first == 0 and all(g.choose("r", 4, 50) == 0 for _ in range(10))
    assert g.choose("r", 4, 50 + FIRST_WAIT) == 4  # the probe comes at the same position whatever the calls


def test_requests_are_independent():
    g = DraftGovernor(4, pass_cost=0.1)
    for _ in range(20):
        g.observe("bad", 4, 0)
        g.observe("good", 4, 4)
    assert g.choose("good", 4, 10) == 4 and g.choose("bad", 4, 10) == 0
    g.remove("bad")
    assert g.choose("bad", 4, 10) == 4  # a new request starts from the prior


PROMPTS = ["def fibonacci(n):\n", "class Stack:\n    def __init__(self):\n"]
FIXED = {"draft_length_policy": "fixed"}


@pytest.fixture(scope="module")
def plain_output():
    llm = LLM(None, None, dtype="float32")
    return [o.token_ids for o in llm.generate(PROMPTS, SamplingParams(max_tokens=32, ignore_eos=True))]


class EveryOtherStretch:
    """A governor that backs every request off on decoding steps 3-8 and 12-20."""

    def __init__(self):
        self.steps = {}

    def choose(self, req_id, max_draft_tokens, position):
        if max_draft_tokens <= 0:
            return 0
        n = self.steps[req_id] = self.steps.get(req_id, 0) + 1
        return 0 if 3 <= n <= 8 or 12 <= n <= 20 else max_draft_tokens

    def observe(self, *_):
        pass

    def remove(self, req_id):
        self.steps.pop(req_id, None)


EMBEDDED_CONFIGS = {
    "ngram": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3},
    "suffix": {"method": "suffix", "num_speculative_tokens": 4},
    "eagle": {"method": "eagle", "num_speculative_tokens": 4},
    "eagle3": {"method": "eagle3", "num_speculative_tokens": 4},
    "mtp": {"method": "mtp", "num_speculative_tokens": 3},
    "draft_model": {"method": "draft_model", "num_speculative_tokens": 4},
    "dflash": {"method": "dflash", "num_speculative_tokens": 4},
    "dspark": {"method": "dspark", "num_speculative_tokens": 4},
}


@pytest.mark.parametrize("name", EMBEDDED_CONFIGS)
def test_every_builtin_drafter_catches_up_after_skipped_steps(name, plain_output):
    """Left out of the drafter's steps while backed off, each built-in drafter later takes every
    position since at once, drafts as well as before, and the output is the plain one."""
    llm = LLM(None, {**EMBEDDED_CONFIGS[name], **FIXED}, dtype="float32")
    assert llm.engine.runner.skips_backed_off  # tolerates_skipped_steps
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    fixed = llm.generate(PROMPTS, params)
    llm.engine.runner.governor = EveryOtherStretch()
    skipped = llm.generate(PROMPTS, params)
    assert [o.token_ids for o in fixed] == [o.token_ids for o in skipped] == plain_output
    drafted = sum(o.metrics.num_draft_tokens for o in skipped)
    accepted = sum(o.metrics.num_accepted_tokens for o in skipped)
    assert drafted > 0 and accepted / drafted >= 0.5 * sum(o.metrics.num_accepted_tokens for o in fixed) / max(
        1, sum(o.metrics.num_draft_tokens for o in fixed))


def test_an_expensive_drafter_is_backed_off_losslessly(plain_output):
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    cheap = LLM(None, {**EMBEDDED_CONFIGS["eagle"]}, dtype="float32").generate(PROMPTS, params)
    costly = LLM(None, {**EMBEDDED_CONFIGS["eagle"], "draft_pass_cost": 5.0}, dtype="float32").generate(PROMPTS, params)
    assert [o.token_ids for o in cheap] == [o.token_ids for o in costly] == plain_output
    assert sum(o.metrics.num_backoff_steps for o in costly) > sum(o.metrics.num_backoff_steps for o in cheap)
    assert sum(o.metrics.num_draft_tokens for o in costly) < sum(o.metrics.num_draft_tokens for o in cheap)


def test_seeded_sampling_repeats_exactly_under_the_adaptive_policy():
    params = [SamplingParams(max_tokens=24, temperature=0.8, seed=7 + i, ignore_eos=True) for i in range(2)]
    runs = [[o.token_ids for o in LLM(None, EMBEDDED_CONFIGS["eagle3"], dtype="float32").generate(PROMPTS, params)]
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_fixed_policy_and_synthetic_verification_have_no_governor():
    assert LLM(None, {**EMBEDDED_CONFIGS["ngram"], **FIXED}).engine.runner.governor is None
    synthetic = {**EMBEDDED_CONFIGS["ngram"], "rejection_sample_method": "synthetic",
                 "synthetic_acceptance_rates": [0.5, 0.25, 0.1, 0.05]}
    with pytest.warns(Warning, match="synthetic acceptance"):
        assert LLM(None, synthetic).engine.runner.governor is None
    g = LLM(None, EMBEDDED_CONFIGS["eagle"]).engine.runner.governor
    assert g is not None and 0.03 <= g.pass_cost < 1
    assert LLM(None, EMBEDDED_CONFIGS["ngram"]).engine.runner.governor.pass_cost == 0.0


def test_an_aborted_request_is_forgotten_by_the_governor():
    llm = LLM(None, EMBEDDED_CONFIGS["eagle"], dtype="float32")
    engine = llm.engine
    r = engine.add_request([1, 2, 3, 4], SamplingParams(max_tokens=16, ignore_eos=True))
    for _ in range(3):
        engine.step()
    assert r.req_id in engine.runner.governor._requests
    engine.abort_request(r)
    assert r.req_id not in engine.runner.governor._requests
