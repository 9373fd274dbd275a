"""The adaptive draft-length policy: what it chooses for a batch at given costs, how it follows
measured costs, and that it never changes the output."""

import itertools
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from specpath_engine.drafting_guard import BATCH_GAIN, BURST, FIRST_GAP
from specpath_engine.draft_governor import (EXPLORE_EVERY, FIRST_WAIT, MAX_FIRST_WAIT, MAX_WAIT, QUIET_EVERY, DraftGovernor,
                                            allocate,
                                            slowest_progress, step_rate)
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.step_costs import StepCosts

from engine_helpers import ScriptedGovernor


def one(rates, *, per_pass, per_row=0.02, call=0.03, one_pass=False):
    """The draft length of one request at the static model's costs (in plain steps)."""
    reach, acc = [], 1.0
    for c in rates:
        acc *= c
        reach.append(acc)
    return allocate([reach], 1.0, 1.0, call=call, per_request=[0.0], per_token=per_row, per_pass=per_pass,
                    one_pass=one_pass)[0]


def test_the_docstrings_worked_example():
    assert one([0.8] * 4, per_pass=0.10) == 4
    assert one([0.3] * 4, per_pass=0.10) == 1
    assert one([0.1] * 4, per_pass=0.10) == 0
    assert one([0.1] * 4, per_pass=0.0) == 1  # a free drafter still pays at low acceptance
    assert one([0.5] * 4, per_pass=0.25, one_pass=True) == 4  # one pass: K costs what 1 does
    assert one([0.5] * 4, per_pass=0.25) == 1


# ----------------------------------------------------------------------- the allocation, exhaustively
def reaches(draw_rates):
    out = []
    for rates in draw_rates:
        acc, r = 1.0, []
        for c in rates:
            acc *= c
            r.append(acc)
        out.append(r)
    return out


costs = st.floats(0, 2)
batches = st.lists(st.lists(st.floats(0, 1), min_size=0, max_size=8), min_size=1, max_size=12)


def rate_of(ks, reach, base_tokens, base_cost, c):
    return step_rate(ks, reach, base_tokens, base_cost, **c)


@settings(max_examples=300, deadline=None)
@given(batches, st.floats(0.05, 5), costs, costs, costs, costs, st.booleans(), st.lists(costs, min_size=12, max_size=12))
def test_no_chosen_draft_is_worth_less_than_it_costs(rates, base_cost, call, per_token, per_pass, _, one_pass, reqs):
    """No single draft more or fewer for any request raises the step's tokens per unit time:
    every chosen draft's marginal expected tokens are worth its marginal cost at the chosen rate,
    and every draft left out is not."""
    reach = reaches(rates)
    c = dict(call=call, per_request=reqs[: len(reach)], per_token=per_token, per_pass=per_pass, one_pass=one_pass)
    base_tokens = float(len(reach))
    ks = allocate(reach, base_tokens, base_cost, **c)
    assert all(0 <= k <= len(r) for k, r in zip(ks, reach))
    best = rate_of(ks, reach, base_tokens, base_cost, c)
    assert best >= base_tokens / base_cost * (1 - 1e-9)  # never worse than plain decoding
    for i in range(len(ks)):
        for step in (-1, 1):
            other = list(ks)
            other[i] += step
            if 0 <= other[i] <= len(reach[i]):
                assert rate_of(other, reach, base_tokens, base_cost, c) <= best * (1 + 1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1), min_size=0, max_size=3), min_size=1, max_size=3), st.floats(0.05, 5),
       costs, costs, costs, st.booleans(), st.lists(costs, min_size=3, max_size=3), st.integers(1, 4))
def test_the_allocation_is_the_best_there_is(rates, base_cost, call, per_token, per_pass, one_pass, reqs, base_tokens):
    """Against every allocation of a small batch (Dinkelbach's method is exact for this model)."""
    reach = reaches(rates)
    c = dict(call=call, per_request=reqs[: len(reach)], per_token=per_token, per_pass=per_pass, one_pass=one_pass)
    base = float(len(reach) + base_tokens - 1)  # requests that sample without drafting too
    ks = allocate(reach, base, base_cost, **c)
    best = max(rate_of(list(o), reach, base, base_cost, c)
               for o in itertools.product(*[range(len(r) + 1) for r in reach]))
    assert rate_of(ks, reach, base, base_cost, c) >= best * (1 - 1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1), min_size=0, max_size=3), min_size=1, max_size=3), st.floats(0.05, 5),
       costs, costs, costs, st.booleans(), st.lists(costs, min_size=3, max_size=3), st.floats(0, 0.5),
       st.sampled_from([0, 4, 16]), st.integers(0, 20))
def test_a_gain_drafts_the_best_allocation_or_nothing(rates, base_cost, call, per_token, per_pass, one_pass, reqs,
                                                      gain, row_block, rows):
    """With a gain the allocation is the gain-free one's rate where that beats plain by the gain,
    and no drafts where it does not: the bar only gates, it never picks a worse allocation."""
    reach = reaches(rates)
    c = dict(call=call, per_request=reqs[: len(reach)], per_token=per_token, per_pass=per_pass, one_pass=one_pass)
    base = float(len(reach))
    blocks = dict(rows=rows or len(reach), row_block=row_block, per_block=0.3 * base_cost)
    free = allocate(reach, base, base_cost, **c, **blocks)
    gated = allocate(reach, base, base_cost, **c, **blocks, gain=gain)
    plain = base / base_cost

    def rate(ks):  # with the row blocks the drafts open
        return blocked_rate(ks, reach, blocks["rows"], row_block, blocks["per_block"], base=base, base_cost=base_cost,
                            **c) if row_block else rate_of(ks, reach, base, base_cost, c)

    if not any(gated):
        assert rate(free) <= (1 + gain) * plain * (1 + 1e-9)
    else:
        assert rate(gated) > (1 + gain) * plain
        assert rate(gated) >= rate(free) * (1 - 1e-9)


# ------------------------------------------------------------------------- the governor, simulated
class Simulated:
    """Decoding steps of ``batch`` requests against simulated costs (seconds): the target's step
    ``step + per_request * B + per_row * draft rows``, the drafter's call ``call + per_pass *
    passes + per_token * drafts + per_position * positions handed over``; each draft at depth j is accepted with ``accept`` (seeded).
    ``guarded``: the steps' tokens reach the governor too (its engine-wide guard judges them, and
    its arms); ``arms_from``: the governor's (default None: the allocation alone, which most tests
    here examine)."""

    def __init__(self, *, batch=1, k=4, step=0.010, per_request=0.0, per_row=0.0002, call=0.0003, per_pass=0.001,
                 per_token=0.0, per_position=0.0, accept=0.8, one_pass=False, pinned=None, seed=0, guarded=False,
                 arms_from=None):
        self.guarded = guarded
        self.batch, self.k = batch, k
        self.step, self.per_request, self.per_row = step, per_request, per_row
        self.call, self.per_pass, self.per_token, self.per_position = call, per_pass, per_token, per_position
        self.accept = accept
        self.rng = random.Random(seed)
        pass_cost = 0.1 if pinned is None else pinned
        self.governor = DraftGovernor(k, costs=StepCosts(pass_cost, one_pass=one_pass, pinned=pinned is not None),
                                      arms_from=arms_from)
        self.positions = [100] * batch
        self.pending = [1] * batch
        self.stall_next = 1.0
        self.prefix = "r"
        """Request ids are prefix + index (a new prefix: new requests arrive)."""

    def run(self, steps):
        """Each step's draft lengths."""
        g, history = self.governor, []
        ids = [f"{self.prefix}{i}" for i in range(self.batch)]
        for _ in range(steps):
            ks = g.allocate(ids, [self.k] * self.batch, self.positions, self.pending, num_requests=self.batch,
                            num_sampling=self.batch)
            drafting = [k for k in ks if k]
            passes = (1 if g.one_pass else max(drafting)) if drafting else 0
            features = (1.0, len(drafting), passes, sum(drafting), sum(p for p, k in zip(self.pending, ks) if k))
            drafter = self.call + self.per_pass * passes + self.per_token * sum(drafting) + self.per_position * features[4]
            target = self.step + self.per_request * self.batch + self.per_row * sum(ks)
            accepted = []
            for k in ks:
                a = 0
                while a < k and self.rng.random() < self.accept:
                    a += 1
                accepted.append(a)
            g.observe_step(features if drafting else None, drafter * self.stall_next, (1.0, self.batch, sum(ks), 0),
                           target * self.stall_next, sum(accepted) + self.batch if self.guarded else None)
            self.stall_next = 1.0
            for i, (k, a) in enumerate(zip(ks, accepted)):
                if k:
                    g.observe(ids[i], k, a)
                self.positions[i] += a + 1
                self.pending[i] = a + 1 if k else self.pending[i] + a + 1
            history.append(ks)
        return history


def drafted(history):
    return sum(map(sum, history))


def test_cheap_drafting_at_high_acceptance_drafts_k():
    history = Simulated(accept=0.9).run(64)
    explored = [ks for ks in history[5:] if ks != [4]]  # half or none, now and then: rows stay measured
    assert all(ks in ([2], [0]) for ks in explored) and len(explored) <= 64 / EXPLORE_EVERY + 2


def test_drafting_that_never_pays_backs_off_and_probes_a_bounded_fraction_of_steps():
    # a drafter pass costing 3 plain steps: no acceptance pays for it, not even a probe's
    # (a probe at the longest wait drafts one token all the same: the drafter's cost is measured again)
    sim = Simulated(per_pass=0.030, accept=0.9)
    history = sim.run(600)
    assert all(ks in ([0], [1]) for ks in history[10:])
    assert sum(1 for ks in history[10:] if ks[0]) <= 600 / MAX_WAIT
    assert sim.governor.num_declined_probes >= 3
    # cheap drafting that nothing is ever accepted from: probed, with doubling waits
    sim = Simulated(accept=0.0)
    history = sim.run(600)
    assert sum(1 for ks in history[15:] if ks[0]) <= 4 + 600 / MAX_WAIT  # waits 4, 8, ..., 64 positions
    assert sum(1 for ks in history[300:] if ks[0]) <= 300 / MAX_WAIT + 1


@pytest.mark.parametrize("batch,accept,per_row", [(1, 0.0, 0.0002), (6, 0.3, 0.002), (8, 0.6, 0.004)])
def test_a_backed_off_batch_skips_the_allocation_and_chooses_what_it_would_have(batch, accept, per_row, monkeypatch):
    """Where every request is backed off, nothing due and nothing the choice reads has changed,
    the governor chooses nothing again without allocating: step for step what it chooses
    allocating every time (the memo cleared before each step)."""
    import specpath_engine.draft_governor as dg

    calls = []
    real = dg.allocate
    monkeypatch.setattr(dg, "allocate", lambda *a, **k: calls.append(1) or real(*a, **k))
    remembering = Simulated(batch=batch, accept=accept, per_row=per_row, seed=3)
    history = remembering.run(300)
    skipped = 300 - len(calls)
    forgetting = Simulated(batch=batch, accept=accept, per_row=per_row, seed=3)
    allocate = forgetting.governor.allocate

    def afresh(*a, **k):
        forgetting.governor._idle = None
        return allocate(*a, **k)

    forgetting.governor.allocate = afresh
    assert forgetting.run(300) == history
    assert skipped > 50 and sum(map(sum, history)) < 300 * batch


def test_the_guard_judges_a_step_without_the_drafters_catch_up_on_backlogs():
    """A request handing the drafter a backlog (a prompt, a back-off's positions) pays its ingest
    once: the guard is told that part of the step's time (positions beyond a step's worth at the
    drafter's fitted cost per position, at most the drafter's call), and nothing where every
    drafting request hands over a step's worth."""
    sim = Simulated(accept=0.9, per_position=0.0002, guarded=True)
    sim.run(200)  # (the costs timed: positions vary a little with acceptance)
    g, seen = sim.governor, []
    observe = g.guard.observe
    # (what the fit says as the step reaches the guard: the step itself has moved it)
    g.guard.observe = lambda *a, **kw: seen.append((kw["catch_up"], g.costs.drafter_coefficients[4],
                                                    g.costs.plain_step(1))) or observe(*a, **kw)
    for backlog, drafter_s in ((3, 0.002), (60, 0.02), (60, 0.001)):
        assert g.allocate(["r0"], [4], [1000], [backlog], num_requests=1, num_sampling=1) == [4]
        features = (1.0, 1, 4, 4, backlog)
        g.observe_step(features, drafter_s, (1.0, 1, 4, 0), 0.010, 3)
    assert seen[0][0] == 0.0
    catch_up, per_position, plain = seen[1]
    assert per_position > 0 and catch_up == pytest.approx(per_position * (60 - 5) / plain)
    catch_up, per_position, plain = seen[2]
    assert per_position * 55 > 0.001 and catch_up == pytest.approx(0.001 / plain)  # at most the drafter's call


def test_a_forced_probe_drafts_for_the_request_with_the_shortest_catch_up():
    """Where a probe is forced (the drafter has not drafted for the longest wait) and several
    priced-out probes are due, the one with the fewest positions to hand the drafter drafts."""
    sim = Simulated(batch=3, per_pass=0.030, accept=0.9)
    sim.run(300)  # backed off: every probe priced out
    g = sim.governor
    ids = [f"r{i}" for i in range(3)]
    pending = [50, 5, 30]
    probes = []
    for step in range(4 * MAX_WAIT):
        ks = g.allocate(ids, [4] * 3, [10_000 + step] * 3, pending, num_requests=3, num_sampling=3)
        if any(ks):
            probes.append(ks)
            for rid, k in zip(ids, ks):
                g.observe(rid, k, 0)
    # the first forced probe finds all three due alike (they backed off together): the cheapest drafts,
    # not the first in the batch; each later one drafts one token for one request
    assert probes and probes[0] == [0, 1, 0] and all(sorted(ks) == [0, 0, 1] for ks in probes)


def test_steps_that_could_draft_nothing_reach_the_fit_and_guard_one_in_quiet_every():
    """A backed-off request's plain steps, once the costs are timed, are sampled for the cost fit
    and the guard (they are alike; their bookkeeping is what a backed-off engine pays beyond plain
    decoding), and a change of the target's step time is still followed within a few samples."""
    sim = Simulated(accept=0.0, guarded=True)
    sim.run(300)
    seen = []
    observe = sim.governor.guard.observe
    sim.governor.guard.observe = lambda *a, **kw: seen.append(a) or observe(*a, **kw)
    history = sim.run(400)
    plain = sum(1 for ks in history if not any(ks))
    assert plain > 380 and plain / QUIET_EVERY - 5 <= len(seen) <= plain / QUIET_EVERY + 25
    before = sim.governor.costs.plain_step(1)
    sim.step *= 2  # the machine got busy
    sim.run(40 * QUIET_EVERY)
    assert sim.governor.costs.plain_step(1) == pytest.approx(2 * before, rel=0.1)


def test_a_backed_off_request_is_probed_and_comes_back():
    sim = Simulated(accept=0.0)
    sim.run(200)
    sim.accept = 0.95  # the text becomes predictable: a probe finds it
    history = sim.run(MAX_WAIT + 30)
    assert history[-1] == [4]


def test_probes_are_weighed_at_the_engines_recent_acceptance_not_the_optimistic_prior():
    """Rows that cost 0.19 of a step (an int4 target) and drafts accepted 30% of the time: one
    token at the optimistic prior (0.7) pays on paper, at the acceptance the engine has seen it
    does not, so once that is known new replies' probes are priced out (a probe at the longest
    wait aside) instead of each reply probing its way down the doubling waits."""
    sim = Simulated(step=0.010, per_row=0.0019, call=0.0006, per_pass=0.0005, accept=0.3, seed=3)
    replies = []
    for reply in range(16):
        sim.prefix = f"reply{reply}-"
        sim.positions, sim.pending = [100], [1]
        replies.append(sim.run(64))
    late = sum(1 for history in replies[8:] for ks in history if ks[0])
    # one probe per longest wait engine-wide (the drafter's costs measured again), and where one is
    # accepted the few steps it resumes drafting for
    assert late <= 2 * 8 * 64 / MAX_WAIT + 2
    assert sum(1 for history in replies[8:] if sum(map(sum, history)) > 2) <= 2
    assert sim.governor.num_declined_probes >= 1 and sim.governor.probe_wait > FIRST_WAIT


def test_where_probes_keep_failing_new_replies_start_with_the_engines_longer_wait():
    """Cheap drafts that nothing is accepted from: every reply used to probe its way down the
    doubling waits (4, 8, 16, 32 positions: ~4 probes in 64); once the engine's probes have failed,
    a new reply starts from the engine's longer first wait (16: two probes in 64). When the text
    turns predictable a probe is accepted within the reply and drafting comes back."""
    sim = Simulated(accept=0.0, seed=5)
    replies = []
    for reply in range(12):
        sim.prefix = f"reply{reply}-"
        sim.positions, sim.pending = [100], [1]
        replies.append(sim.run(64))
    drafted = [sum(1 for ks in history if ks[0]) for history in replies]
    assert sum(drafted[:2]) >= 6  # the first replies probe down the doubling waits
    assert sum(drafted[6:]) <= 2 * len(drafted[6:]) + 1  # later ones about twice a reply
    assert sim.governor.probe_wait == MAX_FIRST_WAIT
    sim.accept = 0.95
    sim.prefix = "predictable-"
    sim.positions, sim.pending = [100], [1]
    history = sim.run(64)
    assert sum(1 for ks in history[MAX_FIRST_WAIT + 8:] if ks[0]) >= 8  # drafting again within the reply
    assert sim.governor.probe_wait < MAX_FIRST_WAIT


def test_a_high_cost_per_row_drafts_less_at_batch_8_than_at_batch_1():
    costly_rows = dict(step=0.010, per_request=0.001, per_row=0.002, accept=0.8)
    one = Simulated(batch=1, **costly_rows).run(120)
    eight = Simulated(batch=8, **costly_rows).run(120)
    assert drafted(one) / 1 > 1.2 * drafted(eight) / 8
    assert drafted(one[-40:]) >= 2 * 40  # at batch 1 it pays
    assert drafted(eight[-40:]) <= 8 * 4  # at batch 8 it does not (probes and exploration aside)


def test_the_guard_keeps_drafting_where_it_pays_and_stops_probes_where_it_does_not():
    """Fed the steps' tokens, the guard changes nothing where drafting pays (batch 1, cheap
    drafter, high acceptance); at batch 8, where drafting steps are slower per token than plain
    ones, it backs off but for rare bursts."""
    wins = Simulated(accept=0.9, guarded=True)
    history = wins.run(200)
    assert drafted(history[-100:]) >= 4 * 90 and wins.governor.guard.num_backoffs == 0
    costly = dict(batch=8, step=0.010, per_request=0.001, per_row=0.002, call=0.003, per_pass=0.002, accept=0.3)
    unguarded = Simulated(**costly).run(800)
    guarded_sim = Simulated(**costly, guarded=True)
    guarded = guarded_sim.run(800)  # (probes are sparse here: the guard's few drafting steps take a while)
    # left alone, once the cost model prices every probe out (the drafter timed from the start),
    # one request drafts one token per longest wait (the drafter's costs measured again), not each
    # of the eight
    assert 1 <= drafted(unguarded[400:]) <= 400 // MAX_WAIT + 1
    assert 1 <= drafted(unguarded[600:]) <= 200 // MAX_WAIT + 1
    assert sum(1 for ks in guarded[400:] if any(ks)) <= BURST * (400 // FIRST_GAP) and guarded_sim.governor.guard.backing_off
    summary = guarded_sim.governor.summary()
    assert summary["guard_backing_off"] is True and summary["guard_drafting_vs_plain"] < 1


def test_new_requests_are_explored_by_the_guard_within_a_few_replies():
    """Backed off on requests whose drafts do not pay (the gap grown long), the engine tries
    the next ones within a few replies (their text may be predictable: each batch of arrivals
    halves the gap) and drafts again where they accept well."""
    resumed = []
    for seed in range(10):  # (when a burst first wins depends on the draws: a property over seeds)
        sim = Simulated(batch=8, per_row=0.003, call=0.002, per_pass=0.002, accept=0.3, guarded=True, seed=seed)
        sim.run(2000)
        guard = sim.governor.guard
        assert guard.backing_off and guard.summary()["guard_gap_steps"] > FIRST_GAP
        sim.accept, sim.per_row, sim.call, sim.per_pass = 0.95, 0.0002, 0.0003, 0.0005
        resumed.append(99)
        for reply in range(16):  # batches of new requests, 64 steps each (the costs are relearnt by probes)
            sim.prefix = f"next{seed}-{reply}-"
            history = sim.run(64)
            if not guard.backing_off and drafted(history[-20:]) >= 8 * 20:
                resumed[-1] = reply
                break
    # seen: 5-12 replies, one seed beyond 16 (its bursts' single drafts never lifted the estimates);
    # 6-14 with batch 1's exploring share at batch 8 too
    assert sum(r < 16 for r in resumed) >= 8 and sorted(resumed)[4] <= 11


@settings(max_examples=200, deadline=None)
@given(batches, st.floats(0.05, 5), costs, costs, costs, st.booleans(), st.lists(costs, min_size=12, max_size=12),
       st.lists(st.booleans(), min_size=12, max_size=12), st.data())
def test_slowest_progress_is_the_least_counted_requests_tokens_per_plain_step(rates, base_cost, call, per_token,
                                                                             per_pass, one_pass, reqs, among, data):
    """The least of ``(1 + E_i) * plain cost / step cost`` over the requests counted: 1 without
    drafts, and a request that does not draft beside drafting ones is slowed (below 1)."""
    reach = reaches(rates)
    ks = [data.draw(st.integers(0, len(r))) for r in reach]
    among = among[: len(reach)]
    c = dict(call=call, per_request=reqs[: len(reach)], per_token=per_token, per_pass=per_pass, one_pass=one_pass)
    got = slowest_progress(ks, reach, base_cost, **c, among=among)
    if not any(ks):
        assert got == 1.0
        return
    tokens = len(reach) + sum(sum(r[:k]) for k, r in zip(ks, reach))
    cost = tokens / rate_of(ks, reach, float(len(reach)), base_cost, c)
    counted = [1 + sum(r[:k]) for k, r, a in zip(ks, reach, among) if a] or [math.inf]
    assert got == pytest.approx(min(counted) * base_cost / cost)
    idle = [i for i, (k, a) in enumerate(zip(ks, among)) if a and not k]
    if idle and cost > base_cost * (1 + 1e-9):
        assert got < 1.0


def test_at_batch_8_a_small_expected_gain_does_not_draft_and_at_batch_1_it_does():
    """Costs where drafting is expected to beat a plain step by 3%: below the bar above batch 1
    (a closed batch's tail and misjudged costs turn that into a loss), drafted at batch 1."""
    for batch in (8, 1):
        g = DraftGovernor(1, costs=StepCosts(0.0), arms_from=None)  # the allocation alone
        ids = [f"r{i}" for i in range(batch)]
        for rid in ids:
            g.observe(rid, 1, 0)  # conditional acceptance about 0.5 (from the prior 0.7)
            g.observe(rid, 1, 1)
        reach = g._requests[ids[0]].rates[0]
        assert 0.4 < reach < 0.7
        plain, call = 0.010, 0.0005
        drafting = batch * (1 + reach) / (1.03 * batch / plain) - call  # the target step with one draft each
        costs = g.costs_for(batch)  # (each band of batch sizes fits its own)
        for _ in range(40):  # the fit learns the costs: plain steps and one-draft-a-request steps
            costs.observe_target((1.0, batch, 0, 0), plain)
            costs.observe_target((1.0, batch, batch, 0), drafting)
            costs.observe_drafter((1.0, batch, 1, batch, batch), call)
        ks = g.allocate(ids, [1] * batch, [100] * batch, [1] * batch, num_requests=batch, num_sampling=batch)
        assert ks == ([0] * 8 if batch == 8 else [1])
        per_row = (drafting - plain) / batch
        free = allocate([[reach]] * batch, float(batch), plain, call=call, per_request=[0.0] * batch, per_token=per_row,
                        per_pass=0.0)
        assert free == [1] * batch  # without the bar it drafts
    assert BATCH_GAIN > 0.03


def blocked_rate(ks, reach, rows, row_block, per_block, base=8.0, base_cost=1.0, **costs):
    """The step's expected tokens per unit cost with the row blocks the drafts open."""
    tokens = base + sum(sum(r[:k]) for k, r in zip(ks, reach))
    plain = step_rate(ks, reach, base, base_cost, **costs)
    opened = (rows + sum(ks) - 1) // row_block - (rows - 1) // row_block
    return tokens / (tokens / plain + opened * per_block)


def test_drafts_stay_in_the_row_block_a_batch_has_open_where_another_costs_a_pass():
    """Batch 8 on 16-row tiles: eight drafts ride in the open block; a ninth would cost a pass
    (SmolLM2 bf16: 8 and 16 rows about alike, 24 rows 1.45 times the step)."""
    reach = [[0.6, 0.36, 0.22, 0.13]] * 8
    costs = dict(call=0.02, per_request=[0.005] * 8, per_token=0.01, per_pass=0.02)
    free = allocate(reach, 8.0, 1.0, **costs)
    assert sum(free) > 8  # without blocks every request drafts deep
    capped = allocate(reach, 8.0, 1.0, **costs, rows=8, row_block=16, per_block=0.45)
    assert 0 < sum(capped) <= 8
    cheap = allocate(reach, 8.0, 1.0, **costs, rows=8, row_block=16, per_block=0.001)
    assert cheap == free  # a cheap block is worth opening
    likely = [[0.95, 0.9, 0.86, 0.81]] * 8  # drafts worth a block, not two: they fill the one they open
    assert sum(allocate(likely, 8.0, 1.0, **costs, rows=8, row_block=16, per_block=0.45)) == 24
    assert sum(allocate(likely, 8.0, 1.0, **costs, rows=8, row_block=16, per_block=0.1)) == 32
    assert allocate([[0.9, 0.8]], 1.0, 1.0, call=0.02, per_request=[0.0], per_token=0.01, per_pass=0.02, rows=1,
                    row_block=16, per_block=0.5) == [2]  # batch 1: the first block has room for K


def test_a_drafter_that_proposes_a_share_of_its_drafts_is_priced_for_the_rows_it_fills():
    """A match-based drafter (suffix) proposes nothing where nothing matches: the governor learns
    the share it fills, and the blocks a step opens are priced on the rows it is expected to hold."""
    reach = [[0.6, 0.36, 0.22, 0.13]] * 8
    costs = dict(call=0.02, per_request=[0.005] * 8, per_token=0.01, per_pass=0.02, rows=8, row_block=16,
                 per_block=0.45)
    assert sum(allocate(reach, 8.0, 1.0, **costs, fill=0.25)) > sum(allocate(reach, 8.0, 1.0, **costs)) == 8
    g = DraftGovernor(4, pass_cost=0.05)
    assert g.fill == 1.0
    for _ in range(40):
        ks = g.allocate([f"r{i}" for i in range(8)], [4] * 8, [100] * 8, [1] * 8, num_requests=8, num_sampling=8)
        g.observe_step((1.0, 2, 4, sum(ks) // 4, 2), 0.001, (1.0, 8, sum(ks) // 4, 0), 0.03)
    assert g.fill == pytest.approx(0.25, abs=0.05)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4), min_size=1, max_size=10),
       st.integers(1, 40), st.sampled_from([8, 16]), st.floats(0.0, 1.0), st.floats(0.0, 0.05), st.floats(0.0, 0.1))
def test_with_row_blocks_the_choice_never_loses_to_plain_decoding_or_to_ignoring_them(rates, rows, block, per_block,
                                                                                        per_token, per_pass):
    reach = reaches(rates)
    costs = dict(call=0.02, per_request=[0.005] * len(reach), per_token=per_token, per_pass=per_pass)
    chosen = allocate(reach, 8.0, 1.0, **costs, rows=rows, row_block=block, per_block=per_block)
    ignoring = allocate(reach, 8.0, 1.0, **costs)
    rate = blocked_rate(chosen, reach, rows, block, per_block, **costs)
    assert rate >= 8.0 - 1e-9
    assert rate >= blocked_rate(ignoring, reach, rows, block, per_block, **costs) - 1e-9


def test_a_long_catch_up_does_not_keep_drafting_from_starting():
    """A request handed over lazily catches up on every position since (its prompt, a back-off)
    when it first drafts: that is priced at most a step's worth (``limits + 1`` positions), so a
    request a thousand positions behind starts drafting where one position behind would."""
    g = DraftGovernor(4, pass_cost=0.3)
    assert g.costs.drafter_coefficients[4] > 0  # positions handed over are priced
    far = g.allocate(["a"], [4], [1000], [1000], num_requests=1, num_sampling=1)
    near = g.allocate(["b"], [4], [1000], [5], num_requests=1, num_sampling=1)
    assert far == near and far[0] > 0
    assert 1000 * g.costs.drafter_coefficients[4] > 1  # uncapped, the catch-up alone would cost a plain step


def test_a_fast_target_drafts_less():
    bf16 = Simulated(step=0.010, per_pass=0.0015, accept=0.6).run(80)[20:]
    int4 = Simulated(step=0.004, per_pass=0.0015, accept=0.6).run(80)[20:]
    assert drafted(int4) < drafted(bf16)


def test_a_change_in_costs_is_followed_within_a_few_steps():
    sim = Simulated(accept=0.8)
    assert sim.run(60)[-1] == [4]
    sim.per_pass = 0.040  # the drafter gets slow (the machine is busy)
    history = sim.run(10)
    assert history[-1] == [0] and sum(1 for ks in history if ks[0]) <= 4
    # a target that gets fast makes drafting dearer: at batch 8 it stops within a few steps
    sim = Simulated(batch=8, step=0.030, per_pass=0.002, accept=0.8)
    assert all(sim.run(60)[-1])
    sim.step = 0.002
    assert sim.run(8)[-1] == [0] * 8


def test_one_stalled_step_does_not_change_the_choice():
    sim = Simulated(accept=0.8)
    sim.run(60)
    sim.stall_next = 20.0  # a busy machine stalls one step twentyfold
    history = sim.run(5)
    assert sum(ks != [4] for ks in history) <= 1  # (one may be a halved step: EXPLORE_EVERY)


def test_a_configured_pass_cost_pins_the_drafter():
    sim = Simulated(per_pass=0.0001, accept=0.9, pinned=5.0)  # really cheap, configured dear
    assert all(ks == [0] for ks in sim.run(100)[5:])
    assert sim.governor.costs.drafter.count == 0


def test_before_any_timing_it_chooses_what_the_static_model_chose():
    g = DraftGovernor(4, pass_cost=0.1)
    assert g.allocate(["r"], [4], [10], [1], num_requests=1, num_sampling=1) == [4]  # the optimistic prior
    for _ in range(20):
        g.observe("r", 4, 0)
    assert g.allocate(["r"], [4], [11], [1], num_requests=1, num_sampling=1) == [0]
    # the probe is weighed at the engine's recent acceptance (all failures here): priced out, it
    # drafts one token all the same while the drafter is untimed
    assert g.allocate(["r"], [4], [11 + FIRST_WAIT], [1], num_requests=1, num_sampling=1) == [1]


def test_requests_are_independent():
    g = DraftGovernor(4, pass_cost=0.1)
    for _ in range(20):
        g.observe("bad", 4, 0)
        g.observe("good", 4, 4)
    assert g.allocate(["bad"], [4], [10], [1], num_requests=1, num_sampling=1) == [0]
    good, bad = g.allocate(["good", "bad"], [4, 4], [10, 10], [1, 1], num_requests=2, num_sampling=2)
    assert good == 4 and bad > 0  # beside good's passes bad's drafts cost only their rows
    g.remove("bad")
    assert g.allocate(["bad"], [4], [10], [1], num_requests=1, num_sampling=1) == [4]  # from the engine's prior
    assert g.allocate(["good", "x"], [2, 0], [10, 5], [1, 0], num_requests=3, num_sampling=2) == [2, 0]


def test_drafts_that_would_slow_the_batchs_laggard_are_not_made():
    """Beside a request that accepts nothing, another's drafts slow it (the step costs more);
    where it has generated fewest tokens (a batch that arrived together ends with it) nobody
    drafts, and where it is ahead the other drafts as if it were alone."""
    def fresh():
        g = DraftGovernor(4, pass_cost=0.1)
        for _ in range(20):
            g.observe("bad", 4, 0)
            g.observe("good", 4, 4)
        return g

    args = (["good", "bad"], [4, 4], [10, 10], [1, 1])
    free = fresh().allocate(*args, num_requests=2, num_sampling=2)
    assert free[0] == 4
    assert fresh().allocate(*args, num_requests=2, num_sampling=2, generated=[5, 3]) == [0, 0]
    assert fresh().allocate(*args, num_requests=2, num_sampling=2, generated=[3, 5]) == free
    assert fresh().allocate(["good"], [4], [10], [1], num_requests=1, num_sampling=1, generated=[3]) == [4]


def test_where_deep_drafts_would_slow_the_laggards_shorter_ones_are_made():
    """Four requests at 0.9 a depth and four laggards (a batch that arrived together) at 0.5,
    each draft row 0.04 of a plain step: the best rate drafts four for the first and nothing for
    the laggards, which slows them to 0.57 of plain decoding; one draft each speeds every request
    up, so the rule caps the drafts instead of dropping them all."""
    good, lagging = [0.9, 0.81, 0.729, 0.6561], [0.5, 0.25, 0.125, 0.0625]
    reach, laggards = [good] * 4 + [lagging] * 4, [False] * 4 + [True] * 4
    shape = dict(call=0.03, per_request=[0.005] * 8, per_token=0.04, per_pass=0.02, one_pass=False)
    full = allocate(reach, 8.0, 1.0, **shape, gain=BATCH_GAIN)
    assert full == [4] * 4 + [0] * 4 and slowest_progress(full, reach, 1.0, **shape, among=laggards) < 0.6
    got = DraftGovernor._spare_laggards(full, reach, 1.0, 8.0, shape, laggards)
    assert got == [1] * 8 and slowest_progress(got, reach, 1.0, **shape, among=laggards) > 1.0
    assert step_rate(got, reach, 8.0, 1.0, **shape) >= 1.2 * 8.0
    shape["per_token"] = 0.05  # dearer rows: one draft each no longer spares them either
    assert DraftGovernor._spare_laggards(full, reach, 1.0, 8.0, shape, laggards) == [0] * 8


@settings(max_examples=200, deadline=None)
@given(batches, st.floats(0.05, 5), costs, costs, costs, st.lists(costs, min_size=12, max_size=12),
       st.lists(st.booleans(), min_size=12, max_size=12))
def test_sparing_the_laggards_keeps_them_at_plain_speed_or_drafts_nothing(rates, base_cost, call, per_token,
                                                                         per_pass, reqs, among):
    """Whatever the costs and chances: the allocation kept (as chosen, or capped) leaves every
    laggard at least its plain speed, never drafts deeper than chosen, and a choice that already
    does is kept as it is."""
    reach = reaches(rates)
    shape = dict(call=call, per_request=reqs[: len(reach)], per_token=per_token, per_pass=per_pass, one_pass=False)
    among = among[: len(reach)]
    chosen = allocate(reach, float(len(reach)), base_cost, **shape, gain=BATCH_GAIN)
    got = DraftGovernor._spare_laggards(chosen, reach, base_cost, float(len(reach)), shape, among)
    assert len(got) == len(chosen) and all(0 <= g <= len(r) for g, r in zip(got, reach))
    if not any(chosen):
        return
    if slowest_progress(chosen, reach, base_cost, **shape, among=among) >= 1.0:
        assert got == chosen
    elif any(got):
        assert max(got) < max(chosen)
        assert slowest_progress(got, reach, base_cost, **shape, among=among) >= 1.0


def test_a_new_request_starts_from_the_engines_recent_acceptance():
    g = DraftGovernor(4, pass_cost=0.1)
    fresh = g.prior_rates()
    for i in range(40):  # every request so far accepted nothing
        g.observe(f"old{i}", 4, 0)
    assert g.prior_rates()[0] < 0.2 < fresh[0]
    assert g.allocate(["new"], [4], [10], [1], num_requests=1, num_sampling=1) == [0]


def test_greedy_and_sampled_requests_start_from_their_own_kinds_acceptance():
    """Sampled requests accept less than greedy ones with the same drafter: a run of sampled
    requests that accepted nothing leaves a new greedy request the prior of greedy ones (here
    untouched, the optimistic one: it drafts), and a new sampled one theirs (priced out)."""
    g = DraftGovernor(4, pass_cost=0.1)
    fresh = g.prior_rates()
    g.allocate([f"s{i}" for i in range(40)], [4] * 40, [10] * 40, [1] * 40, num_requests=40, num_sampling=40,
               sampled=[True] * 40)
    for i in range(40):
        g.observe(f"s{i}", 4, 0)
    assert g.prior_rates(sampled=True)[0] < 0.2 and g.prior_rates() == fresh
    assert g.allocate(["greedy"], [4], [10], [1], num_requests=1, num_sampling=1, sampled=[False]) == [4]
    assert g.allocate(["sampled"], [4], [10], [1], num_requests=1, num_sampling=1, sampled=[True]) == [0]
    for _ in range(20):  # greedy verifications feed the greedy prior only
        g.observe("greedy", 4, 4)
    assert g.prior_rates()[0] > fresh[0] and g.prior_rates(sampled=True)[0] < 0.2


# --------------------------------------------------------------------------------- in the engine
PROMPTS = ["def fibonacci(n):\n", "class Stack:\n    def __init__(self):\n"]
FIXED = {"draft_length_policy": "fixed"}


@pytest.fixture(scope="module")
def plain_output():
    llm = LLM(None, None, dtype="float32")
    return [o.token_ids for o in llm.generate(PROMPTS, SamplingParams(max_tokens=32, ignore_eos=True))]


class EveryOtherStretch(ScriptedGovernor):
    """A governor that backs every request off on decoding steps 3-8 and 12-20."""

    def __init__(self):
        super().__init__()
        self.steps = {}

    def allocate(self, req_ids, limits, positions, pending, **_):
        out = []
        for req_id, limit in zip(req_ids, limits):
            n = self.steps[req_id] = self.steps.get(req_id, 0) + 1
            out.append(0 if 3 <= n <= 8 or 12 <= n <= 20 else limit)
        return out

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
    cheap = LLM(None, {**EMBEDDED_CONFIGS["eagle"], "draft_pass_cost": 0.0}, dtype="float32").generate(PROMPTS, params)
    costly = LLM(None, {**EMBEDDED_CONFIGS["eagle"], "draft_pass_cost": 5.0}, dtype="float32").generate(PROMPTS, params)
    assert [o.token_ids for o in cheap] == [o.token_ids for o in costly] == plain_output
    assert sum(o.metrics.num_backoff_steps for o in costly) > sum(o.metrics.num_backoff_steps for o in cheap)
    assert sum(o.metrics.num_draft_tokens for o in costly) < sum(o.metrics.num_draft_tokens for o in cheap)


def test_the_engine_times_its_steps_and_reports_the_fitted_costs():
    llm = LLM(None, EMBEDDED_CONFIGS["eagle3"], dtype="float32")
    llm.generate(PROMPTS, SamplingParams(max_tokens=16, ignore_eos=True))
    costs = llm.metrics.step_costs
    governor = llm.engine.runner.governor
    main = governor.main_costs  # the band of batch sizes most steps ran at (the last few may run at fewer)
    assert costs["target_steps"] == main.target.count > 0  # (drafter calls: only while it drafts)
    assert costs["drafter_calls"] == main.drafter.count
    assert costs["plain_step_ms"] > 0 and costs["per_row"] >= 0 and costs["per_drafting_request"] >= 0
    assert llm.metrics.as_dict()["step_costs"] == costs
    fixed = LLM(None, {**EMBEDDED_CONFIGS["eagle3"], **FIXED}, dtype="float32")
    fixed.generate(PROMPTS, SamplingParams(max_tokens=4))
    assert fixed.metrics.step_costs is None and "step_costs" not in fixed.metrics.as_dict()


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
    assert g is not None and 0.03 <= g.pass_cost < 1 and not g.costs.pinned
    assert LLM(None, EMBEDDED_CONFIGS["ngram"]).engine.runner.governor.pass_cost == 0.0
    assert LLM(None, {**EMBEDDED_CONFIGS["eagle"], "draft_pass_cost": 0.5}).engine.runner.governor.costs.pinned


def test_an_aborted_request_is_forgotten_by_the_governor():
    llm = LLM(None, EMBEDDED_CONFIGS["eagle"], dtype="float32")
    engine = llm.engine
    r = engine.add_request([1, 2, 3, 4], SamplingParams(max_tokens=16, ignore_eos=True))
    for _ in range(3):
        engine.step()
    assert r.req_id in engine.runner.governor._requests
    engine.abort_request(r)
    assert r.req_id not in engine.runner.governor._requests


def test_probes_priced_out_at_the_longest_wait_draft_one_request_per_wait():
    """At batch 8, with a drafter no acceptance pays for, the eight requests' probes reach the
    longest wait together: one of them drafts one token (the drafter's costs, engine-wide, are
    measured again), the others wait another longest wait; and none is forced while the drafter
    drafted within the wait."""
    sim = Simulated(batch=8, per_pass=0.030, accept=0.9)
    history = sim.run(600)
    late = history[200:]
    assert all(sum(ks) <= 1 for ks in late)
    assert 1 <= sum(map(sum, late)) <= len(late) // MAX_WAIT + 1
    drafting_steps = [i for i, ks in enumerate(late) if any(ks)]
    assert all(b - a >= MAX_WAIT for a, b in zip(drafting_steps, drafting_steps[1:]))


def test_a_drafter_priced_out_by_two_stalled_calls_is_timed_again_and_drafts_again():
    """Two drafter calls in a row stalled by the machine (50x their cost) read as a change of
    costs: the fit follows them and prices every draft out, so the drafter would never be timed
    again. Replies of 64 tokens never wait a request's longest wait; an engine-wide wait does: a
    probe drafts one token once the drafter has not drafted for MAX_WAIT steps, the measurements
    bring the fit back, and drafting resumes. (SmolLM2 EAGLE-3, bench chat after code: 372 of 384
    steps backed off for the rest of the engine's life, 1.01x where its twin drafted at 1.25x.)"""
    sim = Simulated(accept=0.8)
    assert drafted(sim.run(100)) > 200
    normal = sim.call
    sim.call = 50 * (normal + sim.per_pass * sim.k)
    stalled = []
    while len(stalled) < 2:  # two drafting steps' calls stall
        ks = sim.run(1)[0]
        stalled += [ks] if any(ks) else []
    sim.call = normal
    replies = []
    for reply in range(6):  # new 64-token replies, one after another
        sim.prefix = f"r{reply}-"
        replies.append(sim.run(64))
    assert drafted(replies[0]) < 64  # priced out for a while: the stalls read as a change of costs
    assert drafted(replies[-1]) > 150 and drafted(replies[-2]) > 150  # measured again: drafting pays again


def test_a_drafter_priced_out_by_its_byte_prior_is_timed_by_a_probe_and_then_drafts():
    """A pass-cost prior many times too dear (the bytes of the target's whole LM head for a drafter
    that reads a twelfth of it, over an int4 target) prices every draft out, the acceptance prior's
    included, so the drafter would never be timed; while it is untimed a probe drafts one token all
    the same, the measurement replaces the guess, and a drafter that pays then drafts."""
    sim = Simulated(per_pass=0.0005, accept=0.9)
    sim.governor = DraftGovernor(4, costs=StepCosts(8.0), arms_from=None)
    replies = []
    for reply in range(4):  # replies of 64 tokens: a probe at the longest wait would never come
        sim.prefix = f"r{reply}-"
        replies.append(sim.run(64))
    assert all(ks == [0] for ks in replies[0][:FIRST_WAIT])  # priced out, then probed: one token at a time
    assert sim.governor.costs.drafter_timed and sim.governor.num_probes >= 1
    assert drafted(replies[0]) >= 100 and all(drafted(r) >= 200 for r in replies[1:])  # (before: none at all)
    pinned = Simulated(per_pass=0.0005, accept=0.9, pinned=8.0)  # a configured cost is not second-guessed
    assert drafted(pinned.run(100)) == 0 and not pinned.governor.num_probes


def test_the_byte_prior_counts_the_lent_head_rows_a_drafter_reads():
    """A drafter through the target's LM head is priced by the rows it multiplies
    (``lent_head_rows``: a head restricted to its trained ids), else by the whole head."""
    from types import SimpleNamespace

    import torch

    from specpath_engine.llm_engine import draft_pass_cost

    class Target(torch.nn.Module):
        config = SimpleNamespace(vocab_size=1000, hidden_size=16)

        def __init__(self) -> None:
            super().__init__()
            self.weights = torch.nn.Parameter(torch.zeros(20_000))  # 80,000 bytes

        def lm_head(self, h):
            return h

    class Head(torch.nn.Module):
        def __init__(self, target, rows=None) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(16, 16, bias=False)  # 1,024 bytes of its own
            self.borrowed = target.lm_head
            if rows is not None:
                self.lent_head_rows = rows

    target = Target()
    spec = SimpleNamespace(draft_pass_cost=None, speculator_config=SimpleNamespace(model_free=False))
    whole = draft_pass_cost(spec, SimpleNamespace(head=Head(target)), target)
    kept = draft_pass_cost(spec, SimpleNamespace(head=Head(target, rows=100)), target)
    assert whole == pytest.approx((1024 + 1000 * 16 * 4) / 80_000)
    assert kept == pytest.approx((1024 + 100 * 16 * 4) / 80_000)


def test_each_band_of_batch_sizes_fits_its_own_costs():
    """Rows cost a fifth of a plain step at batch 8 and nearly nothing at batch 1: learnt at batch
    8, that row cost must not price batch 1's drafts out (one fit shared by both did, and batch 1,
    drafting nothing, never learnt otherwise)."""
    sim = Simulated(batch=8, per_row=0.004, accept=0.5)
    sim.run(300)
    dear = sim.governor.costs.summary()["per_row"]
    assert dear > 0.1
    alone = Simulated(batch=1, per_row=0.0002, accept=0.5)
    alone.governor = sim.governor  # the same engine, now serving one request at a time
    history = alone.run(200)
    assert drafted(history[-100:]) >= 100  # it drafts at batch 1 (with one fit for both: nothing at all)
    assert sim.governor.costs_for(1) is not sim.governor.costs_for(8)
    assert sim.governor.costs_for(1).summary()["per_row"] < 0.1 and sim.governor.costs_for(8).summary()["per_row"] == dear


# ------------------------------------------------------------------ arms (batch_arms), through the governor
def test_a_batch_whose_rows_are_dear_runs_one_draft_each_where_that_pays():
    """Batch 8, a draft row at 5% of a plain step, 70% of drafts accepted: one draft each yields
    1.7 tokens a request for ~1.45 plain steps' time, so the arms settle on a drafting arm; a
    ``one`` step drafts exactly one token a request."""
    sim = Simulated(batch=8, k=4, step=0.010, per_row=0.0005, call=0.0003, per_pass=0.0005, accept=0.7,
                    guarded=True, arms_from=4)
    history = sim.run(400)
    summary = sim.governor.summary()["batch_arms"]["8"]
    assert summary["best"] in ("one", "chosen")
    assert summary["one"][0] > summary["plain"][0]
    late = history[200:]
    assert sum(1 for ks in late if any(ks)) > 0.8 * len(late)
    assert [1] * 8 in history


def test_a_batch_where_drafts_do_not_pay_runs_plain_steps():
    """Batch 8, rows at 10% of a step, 15% of first drafts accepted: the arms settle on plain
    steps (the losing arms tried now and then, at the longest wait)."""
    sim = Simulated(batch=8, k=4, step=0.010, per_row=0.001, call=0.0005, per_pass=0.0005, accept=0.15,
                    guarded=True, arms_from=4)
    history = sim.run(600)
    late = history[300:]
    assert sum(1 for ks in late if any(ks)) <= 0.06 * len(late)
    assert sim.governor.summary()["batch_arms"]["8"]["plain"][0] >= sim.governor.summary()["batch_arms"]["8"]["one"][0]


def test_batch_1_runs_no_arms():
    sim = Simulated(batch=1, accept=0.9, guarded=True, arms_from=4)
    sim.run(100)
    assert sim.governor.summary()["batch_arms"] == {}


def test_an_armed_step_that_drafted_nothing_is_timed_as_a_plain_step():
    """The allocation's arm often drafts nothing (every request backed off): such a step is a
    plain step's sample, not the allocation's."""
    sim = Simulated(batch=8, k=4, step=0.010, per_row=0.002, call=0.001, per_pass=0.001, accept=0.05,
                    guarded=True, arms_from=4)
    history = sim.run(300)
    summary = sim.governor.summary()["batch_arms"]["8"]
    chosen_steps = summary["chosen"][1]
    assert summary["best"] == "plain"
    # the allocation's record holds only steps that drafted: its rate is below plain's
    assert summary["chosen"][0] < summary["plain"][0]
    assert sum(1 for ks in history if any(ks)) <= chosen_steps + summary["one"][1]


@pytest.mark.parametrize("generated, want", [
    ([40, 41, 40, 43, 40, 42, 40, 40], [1, 1, 1, 0, 1, 0, 1, 1]),  # arrived together: none for those ahead by > 1
    ([40] * 8, [1] * 8),
    ([3, 90, 120, 40, 60, 7, 200, 15], [1] * 8),  # arrived apart (a server's traffic): all draft
])
def test_one_draft_each_spares_the_rows_of_requests_ahead_of_a_batch_that_arrived_together(generated, want):
    """The ``one`` arm's rows: a batch that arrived together ends with its slowest request, so those
    ahead of it by more than ONE_AHEAD tokens draft nothing (they stay in step); requests that
    arrived apart each draft one."""
    from specpath_engine.batch_arms import Arm
    from specpath_engine.draft_governor import COHORT, ONE_AHEAD

    assert ONE_AHEAD == 1 and COHORT < 90
    g = DraftGovernor(4, costs=StepCosts(0.1), arms_from=4)
    g.arms.pick = lambda n: Arm.ONE
    ids = [f"r{i}" for i in range(8)]
    ks = g.allocate(ids, [4] * 8, [200 + n for n in generated], [1] * 8, num_requests=8, num_sampling=8,
                    generated=generated)
    assert ks == want
