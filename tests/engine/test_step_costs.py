"""The measured cost model: what it learns from step timings, and what it keeps from its prior."""

import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from specpath_engine.step_costs import CALL_COST, COLD_CALLS, ROW_BLOCK_COST, VERIFY_COST, StepCosts


def target_time(x, const=0.008, per_request=0.0005, per_row=0.0004, per_prefill=0.002):
    return const + per_request * x[1] + per_row * x[2] + per_prefill * x[3]


def varied_steps(n, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        batch = rng.randint(1, 8)
        yield (1.0, batch, rng.randint(0, 4 * batch), rng.choice([0, 0, 0, rng.randint(1, 64)]))


def test_before_any_timing_the_costs_are_the_static_model_in_plain_steps():
    c = StepCosts(0.25)
    assert c.target_coefficients == pytest.approx([1 - VERIFY_COST, VERIFY_COST, VERIFY_COST, 0.1, 0.0])
    assert c.drafter_coefficients[:3] == pytest.approx([CALL_COST, 0.0, 0.25])
    assert c.summary()["plain_step_ms"] is None


def test_it_learns_the_target_costs_from_varied_steps():
    c = StepCosts(0.1)
    for x in varied_steps(200):
        c.observe_target(x, target_time(x))
    assert c.target_coefficients[2] == pytest.approx(0.0004, rel=0.05)
    assert c.target_coefficients[3] == pytest.approx(0.002, rel=0.05)
    plain = target_time((1, 1, 0, 0))
    assert c.summary()["plain_step_ms"] == pytest.approx(1000 * plain, rel=0.05)
    assert c.summary()["per_row"] == pytest.approx(0.0004 / plain, rel=0.1)


def test_it_learns_the_drafter_costs_and_leaves_out_cold_and_ingest_only_calls():
    c = StepCosts(0.1)
    for _ in range(COLD_CALLS + 1):
        c.observe_target((1, 1, 0, 0), 0.010)
    rng = random.Random(1)
    for i in range(120):
        n = rng.randint(1, 8)
        passes = rng.randint(1, 4)
        x = (1.0, n, passes, n * passes, n * rng.randint(1, 5))
        seconds = 0.0004 + 0.0001 * n + 0.0015 * passes + 0.0002 * x[3] + 0.00001 * x[4]
        c.observe_drafter(x, 1.0 if i < COLD_CALLS else seconds)  # the cold calls are slow
        c.observe_drafter((1.0, 0, 0, 0, 200), 0.5)  # a prompt ingested, nothing drafted
    d = c.drafter_coefficients
    assert d[2] == pytest.approx(0.0015, rel=0.1) and d[3] == pytest.approx(0.0002, rel=0.2)
    assert c.drafter.count == 120 - COLD_CALLS


def test_one_stall_barely_moves_the_fit_and_a_lasting_change_is_followed():
    c = StepCosts(0.1)
    steps = list(varied_steps(100))
    for x in steps:
        c.observe_target(x, target_time(x))
    probe = (1.0, 4, 8, 0)
    before = c.target_coefficients
    c.observe_target(steps[0], 30 * target_time(steps[0]))  # one stalled step
    after = c.target_coefficients
    assert sum(a * v for a, v in zip(after, probe)) == pytest.approx(sum(b * v for b, v in zip(before, probe)), rel=0.1)
    for x in steps[:3]:  # from now on every step takes three times as long
        c.observe_target(x, 3 * target_time(x))
    predicted = sum(a * v for a, v in zip(c.target_coefficients, probe))
    assert predicted == pytest.approx(3 * target_time(probe), rel=0.25)


def drafter_time(x):
    return 0.0003 + 0.0010 * x[2] + 0.0001 * x[3]


def _timed_drafter(seed=1):
    c = StepCosts(0.1)
    for _ in range(COLD_CALLS + 1):
        c.observe_target((1, 1, 0, 0), 0.010)
    rng = random.Random(seed)
    for _ in range(100):
        k = rng.randint(1, 4)
        x = (1.0, 1, k, k, rng.randint(1, 5))
        c.observe_drafter(x, drafter_time(x))
    return c


def _predicted(c, x):
    return sum(d * v for d, v in zip(c.drafter_coefficients, x))


def test_two_stalled_calls_in_a_row_are_taken_back_by_the_next_one_and_a_change_is_confirmed():
    """Two stalled drafter calls in a row (50x) read as a change of costs; the next call at the
    old cost says they were a longer stall: the fit is back where it was (a drafter priced out by
    the stall would otherwise never be timed again). A third call at the new cost confirms the
    change instead."""
    probe, x = (1.0, 1, 1, 1, 2), (1.0, 1, 4, 4, 2)
    c = _timed_drafter()
    before = _predicted(c, probe)
    for _ in range(2):
        c.observe_drafter(x, 50 * drafter_time(x))
    assert _predicted(c, probe) > 10 * before  # followed: a change of costs, as far as two calls tell
    c.observe_drafter(probe, drafter_time(probe))  # a probe at the old cost
    assert _predicted(c, probe) == pytest.approx(before, rel=0.1)
    assert _predicted(c, x) == pytest.approx(drafter_time(x), rel=0.1)

    changed = _timed_drafter()
    for _ in range(3):  # the third at the new cost too: the costs did change
        changed.observe_drafter(x, 50 * drafter_time(x))
    assert 25 * drafter_time(x) < _predicted(changed, x) < 100 * drafter_time(x)  # kept: not taken back


def test_a_pinned_drafter_is_priced_from_the_measured_plain_step():
    c = StepCosts(0.5, pinned=True)
    for x in varied_steps(50):
        c.observe_target(x, target_time(x))
        c.observe_drafter((1.0, 1, 4, 4, 1), 1.0)  # ignored
    plain = c.target_coefficients[0] + c.target_coefficients[1]
    assert c.drafter_coefficients[2] == pytest.approx(0.5 * plain)
    assert c.drafter.count == 0 and c.summary()["pinned_pass_cost"] == 0.5


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 64), st.integers(0, 256), st.integers(0, 512), st.floats(1e-5, 10)),
                min_size=1, max_size=60))
def test_any_timings_give_finite_nonnegative_costs(steps):
    c = StepCosts(0.2)
    for batch, rows, prefill, seconds in steps:
        c.observe_target((1.0, batch, rows, prefill), seconds)
        c.observe_drafter((1.0, min(batch, 4), 4, rows, batch), seconds / 3)
    for v in c.target_coefficients + c.drafter_coefficients:
        assert math.isfinite(v) and v >= 0


def test_where_the_target_takes_rows_in_blocks_it_learns_what_a_further_block_costs():
    """A tiled target: rows past each 16 cost another pass (SmolLM2 bf16 on AMX: 8 and 16 rows
    cost about alike, 24 a good deal more); the fit takes the step, not a line through the rows."""
    c = StepCosts(0.1, row_block=16)
    assert c.target_coefficients[4] == pytest.approx(ROW_BLOCK_COST)  # the prior, in plain steps
    assert [c.blocks(r) for r in (1, 16, 17, 32, 33)] == [0, 0, 1, 1, 2]
    rng = random.Random(0)
    for _ in range(300):
        batch = rng.choice([1, 4, 8])
        x = (1.0, batch, rng.randint(0, 4 * batch), 0)
        c.observe_target(x, target_time(x) + 0.004 * ((batch + x[2] - 1) // 16))
    assert c.target_coefficients[4] == pytest.approx(0.004, rel=0.15)
    assert c.target_coefficients[2] == pytest.approx(0.0004, rel=0.25)
    assert c.summary()["per_row_block"] > 0
    assert StepCosts(0.1).summary()["per_row_block"] is None and StepCosts(0.1).blocks(100) == 0
