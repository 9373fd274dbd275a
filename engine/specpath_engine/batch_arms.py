"""Which way of drafting a batch of several requests runs, chosen from what each way delivered.

A batch-8 step on a CPU reads the weights once for eight rows; every draft is one more row, and
past the first few rows a row is compute (SmolLM2-135M bf16 on an AVX512-BF16 EPYC: ~21 us a
layer a row at 2 threads, near ``vdpbf16ps``'s peak; a drafting step with one draft a request
cost ~1.5x a plain step for 1.6 tokens a request). So at batch 8 drafting pays only where first
drafts are accepted more than about half the time, by a few to twenty percent, and the per-request
allocation (:mod:`specpath_engine.draft_governor`), which prices each request's drafts from a
handful of its own verifications, misjudged it both ways: with some requests' estimates dipping
below the break-even, it drafted for a few of them, which slowed the batch's laggards, then for
none, its back-offs and probes out of step across the batch. Measured side by side under
competing load (EAGLE-3, 8 requests, 128 tokens each): one draft for every request 1.10-1.20x of
plain decoding on code, code-writing chat and edits, where the allocation ran at 0.97-1.05x.

So from :data:`ARMS_FROM` requests each decode step runs one of three arms, and the realised
rate of each (tokens a request per plain step of its batch, the guard's unit: the cost fit's
plain step, which follows load and context growth, if slowly) picks the next:

- ``plain``: no request drafts;
- ``one``: every request that may draft drafts one token (the requests stay in step, so a closed
  batch does not end on a tail of laggards);
- ``chosen``: the governor's per-request allocation (long drafts where they pay: a match-based
  drafter on repeated text, or a shrinking batch whose rows are nearly free).

Once an arm leads, another arm's try is judged against the leader's steps on either side of it
(:meth:`BandArms.pair`), not against the leader's running rate: a shared VM's speed drifts in
stretches of several steps (SmolLM2 bf16 at batch 8, plain decoding on a quiet 2-vCPU EPYC:
21-39 ms a step within one batch, runs of 22s then of 30s, and the cost fit's plain step lags the
context's growth), so a try's rate set beside a leader's rate taken at another stretch misjudged
them both ways: plain steps read at 0.88 of the unit kept an allocation that drafted in 5 steps
of 126 in the lead, and one draft each led an EAGLE-3 chat batch at 0.94x of plain decoding.

Each arm is tried :data:`MIN_TRIES` times in turn; then the best runs, and each other arm runs
once after a wait in steps (:data:`FIRST_WAIT`) that doubles while it stays behind (at most
:data:`MAX_WAIT`) and never sooner than its last try's cost allows (:data:`EXPLORE_SHARE`: the
first tries too, priced against the best other arm timed: MTP over an int4 target at batch 8 lost
0.4-1.2 plain steps a try of one draft each, and its second first try and a wait of 8 steps cost a
round 3% of its time); the
old leader's wait starts over when the leader changes, and every arm's when new requests arrive
(other text may favour another arm: the past then counts at half its weight). Where arms run
they stand in for the engine-wide guard (:mod:`specpath_engine.drafting_guard`): the ``plain``
arm is its reference and its back-off (the guard, gating the arms, had kept a batch of edits from
drafting at all after a batch of everyday chat had lost: 1.00x where one draft each ran at
1.14x); it still judges smaller batches.

Worked example: after the first six steps the rates read ``one`` 1.14, ``chosen`` 1.02, ``plain``
1.00 (tokens a request per plain step); ``one`` runs, ``chosen`` runs again 8 steps later and
``plain`` 9 (or later, where a try's cost so requires); still behind, each waits 16 steps more,
then 32, 64, and 96 at most.
"""

from __future__ import annotations

import enum
import math

import attrs

from specpath_engine.drafting_guard import Side, band


class Arm(enum.Enum):
    PLAIN = "plain"
    ONE = "one"
    CHOSEN = "chosen"


ORDER = (Arm.ONE, Arm.CHOSEN, Arm.PLAIN)
"""The order of the first tries (and of ties)."""

ARMS_FROM = 4
"""Batch sizes from which steps run arms (below, a draft row is nearly free and the per-request
allocation alone decides)."""

MIN_TRIES = 2
"""Steps each arm runs, in turn, before the rates choose (one step of a batch is noisy; each losing
try of a fresh engine costs up to a plain step)."""

GAIN = 0.03
"""A drafting arm leads only where its rate beats plain steps' by this share: the rates are a few
decayed steps each, timed at different moments of a batch (its context growing, other arms'
catch-ups between), so a drafting arm within a few percent of plain is a coin toss whose tries
cost (SmolLM2, DFlash on 8 code completions, where one draft each delivers about plain steps'
rate: led by the noise's winner, 0.96x of plain decoding)."""

DECAY = 0.85
"""Weight of an arm's past steps after each new one of that arm (about the last seven count)."""

FIRST_WAIT, MAX_WAIT = 8, 96
"""Steps a non-best arm waits before it runs again; doubled each time it stays behind."""

EXPLORE_SHARE = 0.005
"""The most a losing arm's tries may cost, as a share of the steps between them: a try's cost
beyond the best arm's rate, the drafter's catch-up on the positions it skipped included, keeps the
next try at least 1 / EXPLORE_SHARE times that many steps away (the guard's share above batch 1,
:data:`~specpath_engine.drafting_guard.BATCH_EXPLORE_SHARE`). 8 everyday-chat requests sampled at
T=0.8, EAGLE-3: one draft each delivered ~0.9 of a plain step's rate, its tries after a stretch of
plain steps first ingesting every request's skipped positions (up to a plain step's time); tried
4-12 times a batch, they held it at 0.97-0.98x of plain decoding."""

CARRIED = 0.25
"""The weight, in paired steps, an arm's score keeps when the leader changes (restated against the
new one): the first choice rests on unpaired first tries, each timed against a cost fit still
settling (one draft each read 1.55 plain steps' rate at a fresh batch's third step, then 1.0 beside
plain steps), so carried at a whole step's weight it held the lead through three paired tries
that read otherwise."""

ARRIVAL_AGE = 0.5
"""The weight an arm's past keeps when new requests arrive (new text: the arms judge it afresh
within a few steps, yet one odd step of it does not decide)."""


@attrs.define(kw_only=True, slots=True)
class ArmRecord(Side):
    """One arm's decayed realised tokens and cost (``seconds``: in plain steps), and when it runs
    again."""

    decay: float = DECAY
    tries: int = 0
    """Steps it was picked for (the first tries go by it)."""
    wait: int = FIRST_WAIT
    """Steps it waits, while not the best, before it runs again."""
    due: int = 0
    """The band's step from which it runs again (while not the best)."""
    budget: int = 0
    """The band's step before which it does not run again as a try, whatever new requests arrive:
    its last try's cost beyond the best arm's rate (catch-up included) over :data:`EXPLORE_SHARE`."""
    versus: Side = attrs.field(factory=lambda: Side(decay=DECAY))
    """Its steps' rates over the leader's beside them (:meth:`BandArms.pair`): its ``rate`` is this arm's
    rate as a multiple of the leader's (empty for the leader itself)."""


@attrs.define(kw_only=True, slots=True)
class BandArms:
    """The arms of one band of batch sizes."""

    records: dict[Arm, ArmRecord] = attrs.field(factory=lambda: {a: ArmRecord() for a in ORDER})
    steps: int = 0
    best: Arm | None = None
    aged: int = -1
    """The step arrivals last aged the records at (-1: never)."""
    before: float = 0.0
    """The leader's rate in the band's last observed step (0: that step was not the leader's)."""
    pending: tuple[Arm, float, float] | None = None
    """A try waiting for the leader's next step: its arm, its rate and the leader's rate before it."""

    def scores(self) -> dict[Arm, float]:
        """Each timed arm's rate as a multiple of the leader's: the leader 1, another arm its paired
        record (its own rate over the leader's where it has none yet); before a leader, the rates."""
        records = self.records
        lead = self.best
        if lead is None or records[lead].weight <= 0 or records[lead].rate <= 0:
            return {a: records[a].rate for a in ORDER if records[a].weight > 0}
        out = {lead: 1.0}
        for a in ORDER:
            rec = records[a]
            if a is not lead and rec.weight > 0:
                out[a] = rec.versus.rate if rec.versus.weight > 0 else rec.rate / records[lead].rate
        return out

    def choose_best(self) -> Arm:
        """The drafting arm of the best score where it beats plain steps' by :data:`GAIN`, else
        ``plain`` (none timed: ``chosen``, the allocation); ties to the leader."""
        records = self.records
        score = self.scores()
        order = ([self.best] if self.best in score else []) + [a for a in ORDER if a in score and a is not self.best]
        best = max(order, key=lambda a: score[a]) if order else Arm.CHOSEN
        plain = score.get(Arm.PLAIN)
        if best is not Arm.PLAIN and plain is not None and score[best] < (1 + GAIN) * plain:
            best = Arm.PLAIN
        if best is not self.best:
            if self.best is None:  # the first choice: the others wait their first wait
                for arm in ORDER:
                    self.records[arm].due = self.steps + FIRST_WAIT + ORDER.index(arm)
            else:  # the old leader is tried again soon; the others keep their waits
                old = self.records[self.best]
                old.wait, old.due = FIRST_WAIT, self.steps + FIRST_WAIT
            self._rebase(best, score)
            self.best = best
        return best

    def _rebase(self, lead: Arm, score: dict[Arm, float]) -> None:
        """The paired records as multiples of the new leader ``lead``'s rate (``score``: as
        multiples of the old leader's, or the rates before any leader)."""
        self.pending, self.before = None, 0.0
        base = score.get(lead, 0.0)
        for arm in ORDER:
            rec = self.records[arm]
            if arm is lead or base <= 0 or arm not in score:
                rec.versus = Side(decay=DECAY)
                continue
            rec.versus = Side(tokens=CARRIED * score[arm] / base, seconds=CARRIED, weight=CARRIED, decay=DECAY)

    def pair(self, arm: Arm, rate: float) -> None:
        """A step of ``arm`` at ``rate`` (tokens a request per plain step): a try is set against
        the leader's steps on either side of it (the one before alone where another try follows)."""
        lead = self.best
        if lead is None:
            return
        if arm is lead:
            if self.pending is not None:
                other, tried, before = self.pending
                reference = (before + rate) / 2 if before > 0 else rate
                self.records[other].versus.add(tried, reference)
                self.pending = None
            self.before = rate
            return
        if self.pending is not None:  # two tries in a row: the first against the leader's step before it
            other, tried, before = self.pending
            if before > 0:
                self.records[other].versus.add(tried, before)
        self.pending = (arm, rate, self.before)
        self.before = 0.0


class BatchArms:
    """Per band of batch sizes, the arm each decode step runs (:meth:`pick`) and what it
    delivered (:meth:`observe`)."""

    def __init__(self) -> None:
        self._bands: dict[int, BandArms] = {}

    def _band(self, num_requests: int) -> BandArms:
        key = band(num_requests)
        arms = self._bands.get(key)
        if arms is None:
            arms = self._bands[key] = BandArms()
        return arms

    def pick(self, num_requests: int) -> Arm:
        """The arm of this decode step of ``num_requests`` (counts the step)."""
        arms = self._band(num_requests)
        arms.steps += 1
        records = arms.records
        first = [a for a in ORDER if records[a].tries < MIN_TRIES and records[a].budget <= arms.steps]
        if first:  # (an arm whose first try lost waits out that try's cost like any other)
            fewest = min(first, key=lambda a: records[a].tries)
            records[fewest].tries += 1
            return fewest
        best = arms.choose_best()
        due = [a for a in ORDER if a is not best and max(records[a].due, records[a].budget) <= arms.steps]
        if not due or not any(records[a].weight for a in ORDER):  # (nothing timed: nothing to learn)
            return best
        arm = min(due, key=lambda a: records[a].due)
        rec = records[arm]
        rec.tries += 1
        rec.wait = min(MAX_WAIT, 2 * rec.wait)
        rec.due = arms.steps + rec.wait
        return arm

    def observe(self, num_requests: int, arm: Arm, tokens: float, cost: float, catch_up: float = 0.0) -> None:
        """A decode step of ``num_requests`` that ran ``arm``: ``tokens`` emitted, ``cost`` its
        time in plain steps of its batch without ``catch_up``, the drafter's ingest of backlogs
        (a prompt, the positions skipped while another arm ran), which the arm's rate leaves out
        as the guard does (a prefill's cost, paid once per request) but its next try pays for
        (:data:`EXPLORE_SHARE`). A step that drafted nothing is a plain step, whatever its arm
        (the caller says so: the allocation often drafts nothing)."""
        if cost <= 0 or tokens <= 0:
            return
        arms = self._band(num_requests)
        rec = arms.records[arm]
        per_request = tokens / num_requests
        rec.add(per_request, cost)
        arms.pair(arm, per_request / cost)
        if arm is arms.best:
            return
        # what the step cost beyond the best arm, in plain steps (before the first choice: beyond
        # the best other arm timed or, plain steps untimed, their rate by the unit: 1)
        records = arms.records
        if arms.best is not None and records[arms.best].weight > 0:
            reference = records[arms.best].rate
        else:
            reference = max([records[a].rate for a in ORDER if a is not arm and records[a].weight > 0]
                            + ([] if records[Arm.PLAIN].weight > 0 else [1.0]), default=1.0)
        # (a first try's catch-up is mostly the requests' prompts, paid once whichever arm drafts:
        # charged, it kept one draft each from its second first try on code at batch 8)
        catch = max(catch_up, 0.0) if rec.tries >= MIN_TRIES else 0.0
        spent = cost + catch - per_request / reference if reference > 0 else 0.0
        if spent > 0:
            rec.budget = arms.steps + math.ceil(spent / EXPLORE_SHARE)

    def admitted(self) -> None:
        """A new request arrived: other text may favour another arm, so every band's past counts
        at :data:`ARRIVAL_AGE` of its weight and each arm is tried again soon (a batch arriving at
        once, or arrivals closer than :data:`FIRST_WAIT` steps, age it once)."""
        for arms in self._bands.values():
            if arms.steps - arms.aged < FIRST_WAIT and arms.aged >= 0:
                continue
            arms.aged = arms.steps
            for arm in ORDER:
                rec = arms.records[arm]
                rec.age(ARRIVAL_AGE)
                rec.versus.age(ARRIVAL_AGE)
                if arm is not arms.best:
                    rec.wait = FIRST_WAIT
                    rec.due = min(rec.due, arms.steps + FIRST_WAIT + ORDER.index(arm))

    def summary(self) -> dict:
        """Per band with steps (its smallest batch size), the best arm and each arm's rate and steps."""
        out = {}
        for key, arms in sorted(self._bands.items()):
            score = arms.scores()
            out[str(1 << (key - 1))] = {
                "best": arms.best.value if arms.best else None,
                **{a.value: [round(arms.records[a].rate, 3), arms.records[a].tries] for a in ORDER},
                "versus_best": {a.value: round(v, 3) for a, v in score.items()}}
        return out
