"""Lazy ingest: a drafter that tolerates skipped steps is handed a request only in steps where it
drafts (prefill included), then every position since in one call; the output never changes,
through back-offs, probes and the guard's bursts, and a failing call poisons nothing."""

import pytest

from engine_helpers import JitteryClock
from specpath_engine.llm import LLM, SamplingParams

PROMPTS = ["def fibonacci(n):\n", "class Stack:\n    def __init__(self):\n", "import os\nimport sys\n",
           "for i in range(10):\n    print("]
CONFIGS = {
    "eagle3": {"method": "eagle3", "num_speculative_tokens": 4},
    "mtp": {"method": "mtp", "num_speculative_tokens": 3},
    "dflash": {"method": "dflash", "num_speculative_tokens": 4},
    "dspark": {"method": "dspark", "num_speculative_tokens": 4},
    "draft_model": {"method": "draft_model", "num_speculative_tokens": 4},
}
PARAMS = SamplingParams(max_tokens=40, ignore_eos=True)


@pytest.fixture(scope="module")
def plain_output():
    llm = LLM(None, None, dtype="float32")
    return [o.token_ids for o in llm.generate(PROMPTS, PARAMS)]


def recording(llm):
    """Wrap the speculator's ``propose``: every call's (request id, first position handed over,
    positions handed over, draft budget) and hidden-state rows."""
    speculator = llm.engine.runner.speculator
    calls = []
    inner = speculator.propose

    def propose(batch):
        hidden = None if batch.hidden_states is None else batch.hidden_states.shape[0]
        calls.append(([(r.req_id, len(r.token_ids) - 1 - r.num_new_positions, r.num_new_positions, r.max_draft_tokens)
                       for r in batch.requests], hidden))
        return inner(batch)

    speculator.propose = propose
    return calls


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("name", CONFIGS)
def test_the_drafter_is_handed_exactly_the_positions_it_needs(name, batch, plain_output):
    """(The drafter priced free, so the tiny model's requests draft at all; the jittery clock
    makes the governor and the guard back off and come back all the same.)"""
    llm = LLM(None, {**CONFIGS[name], "draft_pass_cost": 0.0}, dtype="float32")
    runner = llm.engine.runner
    assert runner.skips_backed_off and runner.governor is not None
    runner.governor.clock = JitteryClock(batch)
    calls = recording(llm)
    outputs = [o.token_ids for o in llm.generate(PROMPTS[:batch], PARAMS)]
    assert outputs == plain_output[:batch]
    delivered = {}
    for entries, hidden in calls:
        assert all(k > 0 for *_, k in entries)  # only requests that draft are handed over
        for req_id, first, n, _ in entries:
            assert first == delivered.get(req_id, 0)  # from where the last call left off (0: the prompt)
            delivered[req_id] = first + n
        if hidden is not None:
            assert hidden == sum(n for _, _, n, _ in entries)
    assert delivered and llm.metrics.num_draft_tokens > 0
    assert llm.metrics.num_backoff_steps > 0  # back-offs (and catch-ups after them) were exercised


@pytest.mark.parametrize("arms", [False, True], ids=["guard", "arms"])
@pytest.mark.parametrize("name", ["eagle3", "dflash"])
def test_the_guards_back_off_and_bursts_keep_the_output(name, arms, plain_output):
    """Drafting steps timed as far slower than plain ones: the guard backs the engine off (or, at
    this batch of 4, the batch arms settle on plain steps), tries catch up on long stretches of
    skipped positions, and the output stays plain decoding's. (The drafter is priced free, pinned:
    the cost model keeps drafting, only the realised rates show it losing.)"""
    llm = LLM(None, {**CONFIGS[name], "draft_pass_cost": 0.0}, dtype="float32")
    governor = llm.engine.runner.governor
    if not arms:
        governor.arms_from = None  # the guard alone
    state = {"now": 0.0}
    governor.clock = lambda: state["now"]
    inner = llm.engine.runner.speculator.propose

    def slow(batch):
        state["now"] += 1.0  # a drafter call that costs a hundred plain steps
        return inner(batch)

    llm.engine.runner.speculator.propose = slow
    target = llm.engine.runner.model.forward

    def forward(*a, **k):
        state["now"] += 0.01
        return target(*a, **k)

    llm.engine.runner.model.forward = forward
    drafts = []
    for _ in range(3):
        assert [o.token_ids for o in llm.generate(PROMPTS, PARAMS)] == plain_output
        drafts.append(llm.metrics.num_draft_tokens)
    assert drafts[-1] < drafts[0] / 2
    if arms:
        assert llm.metrics.step_costs["batch_arms"]["4"]["best"] == "plain"
    else:
        assert governor.guard.num_backoffs >= 1 and governor.guard.num_explorations >= 1
        assert llm.metrics.step_costs["guard_backoffs"] == governor.guard.num_backoffs


def test_a_failing_drafter_call_poisons_nothing(plain_output):
    """A drafter call that fails mid-run (after some requests were handed their positions) fails
    that generate; the next one, on the same engine, drafts and matches plain decoding."""
    llm = LLM(None, {**CONFIGS["eagle3"], "draft_pass_cost": 0.0}, dtype="float32")
    speculator = llm.engine.runner.speculator
    inner = speculator.propose
    calls = {"n": 0}

    def failing(batch):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("drafter failed")
        return inner(batch)

    speculator.propose = failing
    with pytest.raises(Exception, match="drafter failed"):
        llm.generate(PROMPTS, PARAMS)
    speculator.propose = inner
    assert [o.token_ids for o in llm.generate(PROMPTS, PARAMS)] == plain_output
    assert llm.metrics.num_accepted_tokens > 0


def scripted_run(name, *, lazy, every):
    """Four prompts on ``name``'s engine with the governor replaced by a script (a request drafts
    K where its length is a multiple of ``every``, else backs off): every drafting call's drafts
    per (request, length), the drafter calls and the requests handed over (and whether the
    runner feeds it target features), and the outputs."""
    llm = LLM(None, CONFIGS[name], dtype="float32")
    runner = llm.engine.runner
    runner.skips_backed_off = lazy
    runner.governor.allocate = lambda ids, limits, positions, *a, **k: [
        limit if pos % every == 0 else 0 for limit, pos in zip(limits, positions)]
    speculator = runner.speculator
    inner = speculator.propose
    drafts, calls = {}, {"calls": 0, "handed": 0}

    def propose(batch):
        calls["calls"] += 1
        calls["handed"] += len(batch.requests)
        proposal = inner(batch)
        flat, at = proposal.token_ids.tolist(), 0
        for r, n in zip(batch.requests, proposal.num_draft_tokens):
            if r.max_draft_tokens:
                drafts[(r.req_id, len(r.token_ids))] = flat[at: at + n]
            at += n
        return proposal

    speculator.propose = propose
    outputs = [o.token_ids for o in llm.generate(PROMPTS, PARAMS)]
    calls["fed"] = runner.features is not None
    return drafts, calls, outputs


@pytest.mark.parametrize("every", [3, 7])
@pytest.mark.parametrize("name", ["dflash", "dspark", "draft_model"])
def test_catching_up_in_one_call_drafts_what_ingesting_every_step_drafts(name, every, plain_output):
    """The lazy path (a backed-off request is not handed over; its skipped positions reach the
    drafter in one call when it drafts again) proposes exactly the eager path's drafts (every
    request handed over every step, drafting 0 while backed off), and backed-off steps never
    call the drafter: it is called once per step with a drafting request, and handed only those."""
    eager, eager_calls, eager_out = scripted_run(name, lazy=False, every=every)
    lazy, lazy_calls, lazy_out = scripted_run(name, lazy=True, every=every)
    assert eager_out == lazy_out == plain_output
    assert lazy == eager and lazy  # drafts, bit for bit, at every (request, length) that drafted
    if eager_calls["fed"]:  # (a drafter of its own tokens is handed nothing on a backed-off step either way)
        assert lazy_calls["calls"] < eager_calls["calls"]
    assert lazy_calls["handed"] == len(lazy)  # only drafting requests (a prompt reaches it with its first draft)


@pytest.mark.parametrize("name", ["eagle3", "mtp", "dflash", "draft_model"])
def test_a_catch_up_window_caps_every_catch_up_and_keeps_the_output(name, plain_output):
    """``catch_up_window`` 3: the drafter behind the window catches up on at most 3 positions at
    once (a longer catch-up restarts the request there; a prompt is handed over whole), the cost
    model counts what it got, and the output stays plain decoding's."""
    llm = LLM(None, {**CONFIGS[name], "draft_pass_cost": 0.0, "catch_up_window": 3}, dtype="float32")
    runner = llm.engine.runner
    runner.governor.clock = JitteryClock(4)
    window = runner.speculator
    assert runner.catch_up_window == 3 and window.window == 3
    calls = []  # per drafter call: (what the engine handed over, what the drafter behind the window got)
    outer, inner = window.propose, window.inner.propose

    def propose(batch):
        calls.append(([(r.num_new_positions, len(r.token_ids) - 1) for r in batch.requests], []))
        return outer(batch)

    def behind(batch):
        calls[-1][1].extend((r.num_new_positions, len(r.token_ids) - 1) for r in batch.requests)
        return inner(batch)

    window.propose, window.inner.propose = propose, behind
    execute, priced = runner._propose, []

    def counted(scheduled):
        out = execute(scheduled)
        priced.append(runner._drafter_features[4] if runner.step_drafted and runner._drafter_features else None)
        return out

    runner._propose = counted
    outputs = [o.token_ids for o in llm.generate(PROMPTS, PARAMS)]
    assert outputs == plain_output
    cut = 0
    for handed, got in calls:
        for (n, length), (m, _) in zip(handed, got):
            assert m == (n if n == length else min(n, 3))  # a prompt whole, a catch-up cut to 3
            cut += n != m
    assert cut > 0 and window.num_restarts == cut
    expected = [sum(m for m, _ in got) for _, got in calls]
    assert [p for p in priced if p is not None] == expected  # the cost model prices what was handed on


def test_the_window_is_the_default_for_drafters_with_weights_and_none_for_model_free_ones():
    from specpath.config.speculative import DEFAULT_CATCH_UP_WINDOW

    assert LLM(None, {"method": "eagle3"}, dtype="float32").engine.runner.catch_up_window == DEFAULT_CATCH_UP_WINDOW
    assert LLM(None, {"method": "eagle3", "catch_up_window": 0}, dtype="float32").engine.runner.catch_up_window == 0
    assert LLM(None, {"method": "suffix"}, dtype="float32").engine.runner.catch_up_window == 0
    with pytest.raises(Exception, match="catch_up_window"):
        LLM(None, {"method": "ngram", "catch_up_window": 8}, dtype="float32")
