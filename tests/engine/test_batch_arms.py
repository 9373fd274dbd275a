"""The arms a batch's decode steps run (no drafts, one draft each, the allocation's), chosen from
what each delivered."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.batch_arms import EXPLORE_SHARE, FIRST_WAIT, GAIN, MAX_WAIT, MIN_TRIES, ORDER, Arm, BatchArms


def run(arms, steps, rates, *, batch=8, noise=0.0, seed=0, costs=None):
    """Pick and observe ``steps`` steps where arm ``a`` delivers ``rates[a]`` tokens a request per
    plain step (times 1 +- ``noise``) at ``costs[a]`` plain steps a step (default 1); the arms
    picked, in order."""
    rng = random.Random(seed)
    picked = []
    for _ in range(steps):
        arm = arms.pick(batch)
        picked.append(arm)
        rate = rates[arm] * (1 + rng.uniform(-noise, noise))
        cost = (costs or {}).get(arm, 1.0)
        arms.observe(batch, arm, tokens=rate * cost * batch, cost=cost)
    return picked


def test_each_arm_is_tried_in_turn_before_the_rates_choose():
    arms = BatchArms()
    picked = run(arms, 3 * MIN_TRIES, {Arm.ONE: 1.0, Arm.CHOSEN: 1.0, Arm.PLAIN: 1.0})
    assert picked == list(ORDER) * MIN_TRIES


def test_an_arm_whose_first_try_lost_waits_out_its_cost_before_its_second():
    """``one``'s first try delivers 1.6 tokens a request at 2.5 plain steps, 0.9 of a plain step
    lost: its second first try comes no sooner than 0.9 / EXPLORE_SHARE steps later (the others
    run meanwhile)."""
    arms = BatchArms()
    picked = run(arms, 250, {Arm.ONE: 1.6 / 2.5, Arm.CHOSEN: 1.0, Arm.PLAIN: 1.0}, costs={Arm.ONE: 2.5})
    assert picked[0] is Arm.ONE
    again = picked.index(Arm.ONE, 1)
    assert again >= math.ceil(0.9 / EXPLORE_SHARE)
    assert set(picked[1:again]) == {Arm.CHOSEN, Arm.PLAIN}


@pytest.mark.parametrize("seed", range(5))
def test_first_tries_that_lose_cost_no_more_than_one_each_and_the_explore_share(seed):
    """A fresh engine at batch 8 whose drafting arms lose about a third of a plain step a try
    (+-10%): over a batch's 125 steps, one first try of each and then each losing arm's share."""
    picked = run(BatchArms(), 125, {Arm.ONE: 0.7, Arm.CHOSEN: 0.75, Arm.PLAIN: 1.0}, noise=0.1, seed=seed)
    lost = sum(1 - (0.7 if a is Arm.ONE else 0.75) for a in picked if a is not Arm.PLAIN)
    assert lost <= 2 * (1 - 0.7) * 1.1 + 2 * EXPLORE_SHARE * 125


@pytest.mark.parametrize("best", list(Arm))
def test_the_best_arm_runs_nearly_every_step_and_the_others_now_and_then(best):
    rates = {a: (1.15 if a is best else 0.97) for a in Arm}
    arms = BatchArms()
    picked = run(arms, 600, rates, noise=0.05)
    tail = picked[100:]
    assert tail.count(best) / len(tail) > 0.95
    for other in set(Arm) - {best}:
        assert 0 < tail.count(other) <= len(tail) / MAX_WAIT + 2  # tried, at the longest wait
    assert arms.summary()["8"]["best"] == best.value


def test_a_change_of_which_arm_pays_is_followed():
    arms = BatchArms()
    run(arms, 300, {Arm.ONE: 1.15, Arm.CHOSEN: 1.0, Arm.PLAIN: 1.0})
    assert arms.summary()["8"]["best"] == "one"
    picked = run(arms, 400, {Arm.ONE: 0.8, Arm.CHOSEN: 0.95, Arm.PLAIN: 1.0})
    assert picked[-100:].count(Arm.PLAIN) > 90  # (the losing arms waited at most MAX_WAIT steps)


def test_new_requests_have_the_other_arms_tried_again_soon():
    arms = BatchArms()
    run(arms, 400, {Arm.ONE: 1.15, Arm.CHOSEN: 1.0, Arm.PLAIN: 1.0})
    arms.admitted()
    picked = run(arms, FIRST_WAIT + 2, {Arm.ONE: 1.15, Arm.CHOSEN: 1.0, Arm.PLAIN: 1.0})
    assert Arm.CHOSEN in picked and Arm.PLAIN in picked


def test_untimed_arms_leave_the_choice_to_the_allocation():
    arms = BatchArms()
    picked = [arms.pick(8) for _ in range(40)]
    assert picked[3 * MIN_TRIES:] == [Arm.CHOSEN] * (40 - 3 * MIN_TRIES)


def test_bands_of_batch_sizes_keep_their_own_arms():
    arms = BatchArms()
    run(arms, 200, {Arm.ONE: 1.15, Arm.CHOSEN: 1.0, Arm.PLAIN: 1.0}, batch=8)
    run(arms, 200, {Arm.ONE: 0.9, Arm.CHOSEN: 1.3, Arm.PLAIN: 1.0}, batch=4)
    summary = arms.summary()
    assert summary["8"]["best"] == "one" and summary["4"]["best"] == "chosen"


@settings(max_examples=60, deadline=None)
@given(rates=st.lists(st.floats(0.5, 2.0), min_size=3, max_size=3), seed=st.integers(0, 1000))
def test_the_share_of_steps_off_the_best_arm_is_small(rates, seed):
    """Whatever the rates (the best ahead by more than the noise), each other arm runs after waits
    of 8, 16, 32, 64 steps, then every MAX_WAIT: about 800 / MAX_WAIT + 5 times in 800 steps."""
    by_arm = dict(zip(ORDER, rates))
    best = max(by_arm, key=by_arm.get)
    if sorted(rates)[-1] < 1.05 * sorted(rates)[-2]:  # (a leader within the noise or GAIN: either may lead)
        return
    picked = run(BatchArms(), 800, by_arm, noise=0.01, seed=seed)
    assert sum(a is not best for a in picked[3 * MIN_TRIES:]) <= 2 * (800 // MAX_WAIT + 6)


def test_a_losing_arm_whose_tries_pay_a_catch_up_is_tried_within_the_explore_share():
    """Each try of ``one`` first ingests 3 plain steps' worth of skipped positions and its steps
    lose anyway: however often requests arrive, its tries (their catch-up included) cost at most
    about EXPLORE_SHARE of the steps."""
    arms = BatchArms()
    tries = 0
    for step in range(2000):
        if step % 50 == 0:
            arms.admitted()
        arm = arms.pick(8)
        if arm is Arm.ONE:
            tries += 1
            arms.observe(8, arm, tokens=8 * 1.4, cost=1.5, catch_up=3.0)
        else:
            arms.observe(8, arm, tokens=8.0, cost=1.0)
    spent = tries * (1.5 + 3.0 - 1.4)
    assert tries >= 3 and spent <= EXPLORE_SHARE * 2000 + 3 * (1.5 + 3.0)


@pytest.mark.parametrize("drafting", [Arm.ONE, Arm.CHOSEN])
def test_a_drafting_arm_within_the_gain_of_plain_steps_does_not_lead(drafting):
    rates = {a: 1.0 for a in Arm}
    rates[drafting] = 1.0 + GAIN / 2
    arms = BatchArms()
    picked = run(arms, 400, rates)
    assert arms.summary()["8"]["best"] == "plain"
    assert picked[100:].count(Arm.PLAIN) > 0.9 * 300
    rates[drafting] = 1.0 + 2 * GAIN
    picked = run(arms, 400, rates)
    assert arms.summary()["8"]["best"] == drafting.value


def test_a_first_tries_catch_up_does_not_keep_it_from_its_second():
    """The first try of one draft each ingests the batch's prompts (3 plain steps' worth, paid
    once whichever arm drafts) and its step reads a little under plain (noise; later steps pay):
    it is tried again within a few steps, not after the prompts' cost over EXPLORE_SHARE."""
    arms = BatchArms()
    picked = []
    for step in range(40):
        arm = arms.pick(8)
        picked.append(arm)
        first = arm is Arm.ONE and Arm.ONE not in picked[:-1]
        rate = (0.97 if first else 1.2) if arm is Arm.ONE else 1.0
        arms.observe(8, arm, tokens=8 * rate, cost=1.0, catch_up=3.0 if first else 0.0)
    assert picked.count(Arm.ONE) >= 20  # (tried again, it leads)


def run_drifting(arms, steps, rates, *, seed=0, slow=0.7):
    """As :func:`run`, on a machine whose speed drifts in stretches of 4-12 steps (each at 1 or
    down to ``slow`` of it: every arm's steps then cost more plain steps of the cost fit's unit)."""
    rng = random.Random(seed)
    picked, speed, left = [], 1.0, 0
    for _ in range(steps):
        if left == 0:
            speed, left = rng.uniform(slow, 1.0), rng.randint(4, 12)
        left -= 1
        arm = arms.pick(8)
        picked.append(arm)
        arms.observe(8, arm, tokens=rates[arm] * 8, cost=1.0 / speed)
    return picked


@pytest.mark.parametrize("seed", range(6))
def test_a_drifting_machine_speed_does_not_hand_the_lead_to_a_losing_arm(seed):
    """Plain steps deliver the most (one draft each 0.92, the allocation 0.95 of them) while the
    machine runs 0.7-1.0 of its speed in stretches of a few steps (as a shared 2-vCPU VM did, one
    quiet batch: 21-39 ms a plain step). Each try is judged against the leader's steps beside it,
    so the stretches cancel: after the first tries plain leads nearly every step."""
    picked = run_drifting(BatchArms(), 600, {Arm.ONE: 0.92, Arm.CHOSEN: 0.95, Arm.PLAIN: 1.0}, seed=seed)
    tail = picked[50:]
    assert tail.count(Arm.PLAIN) / len(tail) > 0.95


@pytest.mark.parametrize("seed", range(6))
def test_a_drifting_machine_speed_does_not_keep_a_winning_arm_out(seed):
    picked = run_drifting(BatchArms(), 600, {Arm.ONE: 1.15, Arm.CHOSEN: 1.0, Arm.PLAIN: 1.0}, seed=seed)
    tail = picked[50:]
    assert tail.count(Arm.ONE) / len(tail) > 0.9


def test_tries_are_judged_against_the_leaders_steps_beside_them():
    """The leader (plain) at 1.0 a step, then a slow stretch: its steps at 0.5 around a try of one
    draft each at 0.6. Against the leader's running rate (~0.9) the try lost; beside it, it won."""
    arms = BatchArms()
    run(arms, 40, {Arm.ONE: 0.8, Arm.CHOSEN: 0.8, Arm.PLAIN: 1.0})
    band = arms._band(8)
    assert band.best is Arm.PLAIN
    band.pair(Arm.PLAIN, 0.5)
    band.pair(Arm.ONE, 0.6)
    band.pair(Arm.PLAIN, 0.5)
    versus = band.records[Arm.ONE].versus
    assert versus.weight > 0 and band.scores()[Arm.ONE] > 0.8 and band.scores()[Arm.PLAIN] == 1.0


def test_a_change_of_leader_restates_the_others_against_the_new_one():
    """Scores are multiples of the leader's rate: when one draft each takes the lead, plain and the
    allocation are restated against it (their later tries then pull them to their true ratios)."""
    arms = BatchArms()
    run(arms, 300, {Arm.ONE: 0.8, Arm.CHOSEN: 0.9, Arm.PLAIN: 1.0})
    before = arms._band(8).scores()
    assert before[Arm.PLAIN] == 1.0 and before[Arm.ONE] == pytest.approx(0.8, rel=0.02)
    run(arms, 300, {Arm.ONE: 1.6, Arm.CHOSEN: 0.9, Arm.PLAIN: 1.0})
    after = arms._band(8).scores()
    assert arms.summary()["8"]["best"] == "one" and after[Arm.ONE] == 1.0
    assert after[Arm.PLAIN] < 1 / (1 + GAIN) and after[Arm.CHOSEN] < 1 / (1 + GAIN)
    run(arms, 1500, {Arm.ONE: 1.6, Arm.CHOSEN: 0.9, Arm.PLAIN: 1.0})
    later = arms._band(8).scores()
    assert later[Arm.PLAIN] == pytest.approx(1 / 1.6, rel=0.03) and later[Arm.CHOSEN] == pytest.approx(0.9 / 1.6, rel=0.03)
