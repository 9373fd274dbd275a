"""Whether drafting pays at all, judged from what steps delivered: the engine-wide back-off.

The draft governor (:mod:`specpath_engine.draft_governor`) chooses draft lengths from a cost
model and acceptance estimates; where its model is off, or where only its probes and exploration
draft (a batch of 8 on a CPU, where the weights are read once for eight rows), drafting can cost
more than it returns while every single choice looked fair. This guard keeps the outcome: the
decayed realised throughput (tokens emitted over the wall time of the target step plus the
drafter's call) of steps that drafted and of steps that did not, per band of batch sizes, decode
steps only (a prefill chunk is another kind of step). The governor hands each step's time over
in plain steps of its batch as the target's cost fit has them at that moment, so the batch
sizes of a band compare like with like (tokens per request per plain step: a batch that shrinks
as its requests finish still gathers a verdict), and the load of a shared machine and the
growth of the context, which slow both kinds of step alike, do not tilt a comparison with plain
steps timed a while ago (at batch 1, where drafting pays, plain steps are rare). When drafting
steps are measurably slower than plain ones (:data:`MARGIN`; above batch 1, not measurably
faster) the engine backs off for that band
of batch sizes: no drafts, no probes, no exploration, except a short burst of drafting (what the
costs choose: what would run) every ``gap`` steps, the gap doubling while the bursts keep losing (at most
:data:`MAX_GAP`), so a change of workload (a batch that shrinks, a predictable text) is still
noticed; a new request is new traffic, so its arrival halves the gap (and the wait), no more
often than every :data:`FIRST_GAP` steps: a verdict reached on one kind of text must not keep a
long-lived engine from drafting on the next for long, nor may steady arrivals keep a losing
drafter bursting. A burst's first step pays the catch-up of the positions skipped meanwhile, so
its other steps are what is judged against plain steps; one that gains (half :data:`MARGIN` over
plain steps; above batch 1, over the bar) resumes drafting. That catch-up grows with the
requests, not with the gap, so whatever the gap, the wait after a losing burst is at least what
keeps the burst's whole measured cost under :data:`EXPLORE_SHARE` of it.

From :data:`~specpath_engine.batch_arms.ARMS_FROM` requests the governor's batch arms decide
instead (:mod:`specpath_engine.batch_arms`: their plain arm is the reference and the back-off);
the guard still sees every decode step there (its verdict is reported) but gates only smaller
batches.

At batch sizes above 1 drafting must pay, not merely not lose (:data:`BATCH_GAIN`): a batch's
requests accept differently, so they finish at different steps and a closed batch ends on a tail
of steps at a smaller batch, which the per-step rates do not see; and a batch-8 drafting step
costs 10-25% more than a plain one, so a few percent of misjudged acceptance or cost is a loss
(SmolLM2-135M bf16, 8 chat requests, EAGLE-3: drafting steps of 1.28 tokens a request at 1.2x a
plain step's time; the guard read them at 1.11-1.36x its plain steps while the replies ran at
0.83-0.94x of plain decoding end to end). The plain steps compared with age while such a band
drafts (:data:`PLAIN_AGE`): the reference is the last few plain steps, not the first ones after
a prefill (in that run 38-40 ms, against 32 later and 31 for the plain engine's steps), so the
guard asks for a fresh one when the band has drafted a while.

Learning is quick (a fresh engine's first replies may be 64 tokens): a few steps of each kind
decide (:data:`MIN_DRAFTING`, :data:`MIN_PLAIN`), and where the governor drafts every step the
guard asks for the plain steps it compares with. Where drafting pays it never backs off and
costs nothing but a couple of plain reference steps. Per step: a dict look-up and a few floats.
"""

from __future__ import annotations

import math

import attrs

DECAY = 0.95
"""Weight of a side's past steps after each new one of that side and batch (about twenty count:
a comparison repeated every step must not be swung by a few noisy steps, nor by a stretch of
text the drafter cannot predict, which the governor's per-request back-off already handles:
the guard is for a loss that lasts)."""

MIN_DRAFTING, MIN_PLAIN = 6.0, 2.8
"""Decayed weights (seven drafting steps, three plain ones) before a comparison counts: a
shared machine's step times swing by more than a few percent, and a back-off where drafting
pays costs far more than a few more steps of drafting where it does not."""

MARGIN = 0.05
"""Drafting steps must be this much slower per token than plain ones to back the engine off;
a burst resumes drafting where it is half the margin faster. (Where the governor itself mostly backs off, only
a fraction of the steps draft: a loss within the margin on them is a smaller loss overall.)"""

BATCH_GAIN = 0.06
"""At batch sizes above 1 drafting steps must deliver this much more per token and second than
plain ones to go on drafting (a burst, half :data:`MARGIN` more to resume): a closed batch's tail
and a drafting step's cost make a smaller per-step gain a loss (see the module docstring)."""

PLAIN_AGE = 0.99
"""Above batch 1, the weight a band's plain steps keep per drafting step of that band (about the
last hundred drafting steps' plain steps count): where the governor times a plain step every
``2 * EXPLORE_EVERY`` drafting steps the weight stays above :data:`MIN_PLAIN` without more, and
otherwise the guard asks for a fresh one about every 27 drafting steps. At batch 1, where
drafting either pays by far or not at all and a plain step costs most, they do not age."""

STALL = 3.0
"""A step longer than this many times the mean of its kind (drafting or plain, same band) is a
stall: counted at that length."""

FIRST_GAP, MAX_GAP = 24, 384
"""Steps between exploration bursts while backed off: doubled per losing burst, at most MAX_GAP."""

EXPLORE_SHARE = 0.02
"""The most a backed-off band's bursts may cost, as a share of the steps between them: a losing
burst's measured cost beyond plain steps (its first step's catch-up included), over this share,
is the least wait before the next one, however many requests arrive meanwhile. A burst's cost
does not shrink with the gap: its first step ingests every position skipped since the last one
(at batch 8, 2-4 plain steps' time for SmolLM2 drafters), so gaps that arrivals keep halving
spend a fixed share of the time on catching up (SmolLM2-135M, EAGLE-3, closed batches of 8
every 64 steps: two bursts a batch, ~3 plain steps each)."""

BATCH_EXPLORE_SHARE = 0.005
""":data:`EXPLORE_SHARE` above batch 1, where what drafting can win is small (a batch-8 step on a
CPU reads the weights once for eight requests: 1.1-1.2x where the drafts are good) and a burst's
rows cost most (its first step ingests every request's skipped positions: 2-4 plain steps at
batch 8); measured step by step beside plain decoding, bursts at 2% held the backed-off batch-8
rows at 0.96-0.99x. With this share and :attr:`DraftingGuard.batch_resume_margin`, against both
at batch 1's values, engines side by side (SmolLM2 bf16, AMD EPYC, 8 held-out requests, three
rounds): EAGLE-3 / MTP / DFlash / suffix where drafting does not pay (completion at T=0.8, chat)
11 of 14 rows faster by 0.1-1.9%, one equal, two slower (suffix on chat at T=0, 0.956 vs
0.975x); where it pays, completion at T=0, 1.14 vs 1.09x, 1.15 vs 0.99x, 1.09 vs 1.08x."""

MAX_BUDGET_WAIT = 4 * MAX_GAP
"""The longest wait the budget imposes (a burst that stalled is not allowed to switch exploring off)."""

BURST = 4
"""Drafting steps an exploration burst takes; all but the first are judged (it catches up)."""

SHORT_RUN = 8
"""A resume that backs off again within this many drafting steps was a fluke: the gap keeps doubling."""


@attrs.define(kw_only=True, slots=True)
class Side:
    """Decayed tokens, seconds and weight of one kind of step at one batch size (the seconds in
    any unit every step uses: the governor hands over plain steps)."""

    tokens: float = 0.0
    seconds: float = 0.0
    weight: float = 0.0
    decay: float = DECAY
    """Weight of the past after each new step (the batch arms keep a shorter memory)."""

    def add(self, tokens: float, seconds: float) -> None:
        decay = self.decay
        self.tokens = decay * self.tokens + tokens
        self.seconds = decay * self.seconds + seconds
        self.weight = decay * self.weight + 1.0

    def age(self, keep: float) -> None:
        """Count the past at ``keep`` of its weight (steps of the other kind went by)."""
        self.tokens *= keep
        self.seconds *= keep
        self.weight *= keep

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@attrs.define(kw_only=True, slots=True)
class Verdict:
    """The guard's state for one band of batch sizes (see :func:`band`)."""

    backing_off: bool = False
    gap: int = FIRST_GAP
    wait: int = 0
    """Steps until the next exploration burst (while backing off)."""
    burst: int = 0
    """Drafting steps of the current burst still to take."""
    judged: Side = attrs.field(factory=Side)
    """The current burst's judged steps (undecayed sums)."""
    spent: float = 0.0
    """The current burst's time beyond plain steps' for its tokens (all its steps, the catch-up included)."""
    budget: int = 0
    """Steps the next burst may not come sooner than (:data:`EXPLORE_SHARE`), counted down with ``wait``."""
    run: int = 0
    """Drafting steps observed since drafting last resumed."""
    resumed: bool = False


def band(num_requests: int) -> int:
    """Batch sizes that share a verdict and its timings: 1, 2-3, 4-7, 8-15, ..."""
    return num_requests.bit_length()


def floor(key: int) -> float:
    """The least ratio of drafting to plain steps' rate band ``key`` goes on drafting at: a loss
    within :data:`MARGIN` at batch 1 (the steps are alike but for the drafts), a gain of
    :data:`BATCH_GAIN` above it."""
    return 1 - MARGIN if key <= 1 else 1 + BATCH_GAIN


class DraftingGuard:
    """The engine-wide back-off from realised throughput (see the module docstring), one verdict
    per band of batch sizes (a batch of 8 backed off leaves batch 1 drafting).

    Per decode step the governor asks :meth:`allows` (may this step draft?) and
    :meth:`wants_plain` (is a plain reference step needed?), and the runner's timings reach
    :meth:`observe`.
    """

    batch_explore_share: float = BATCH_EXPLORE_SHARE
    """:data:`BATCH_EXPLORE_SHARE` (an attribute, so a comparison may run engines side by side)."""
    batch_resume_margin: float = MARGIN
    """Above batch 1 a burst resumes drafting where its judged steps beat the bar by this much (at
    batch 1, half :data:`MARGIN`): three steps of a batch are noisy, and a fluke resume at batch 8
    drafts a verdict's worth of steps at up to twice a plain step's time."""

    def __init__(self) -> None:
        self._plain: dict[int, Side] = {}
        self._drafting: dict[int, Side] = {}
        self._verdicts: dict[int, Verdict] = {}
        self._last: Verdict = Verdict()
        """The verdict of the band last asked (for :meth:`summary`)."""
        self.ratio: float | None = None
        """The last comparison: drafting steps' tokens per second over plain steps' (same batch)."""
        self.num_backoffs = 0
        self.num_explorations = 0
        self.num_resumes = 0

    def _verdict(self, num_requests: int) -> Verdict:
        v = self._verdicts.get(b := band(num_requests))
        if v is None:
            v = self._verdicts[b] = Verdict()
        self._last = v
        return v

    @property
    def backing_off(self) -> bool:
        """Whether the band of the last step backs off."""
        return self._last.backing_off

    # ------------------------------------------------------------------------------ choosing
    def allows(self, num_requests: int) -> bool:
        """Whether this decode step of ``num_requests`` may draft (counts the step while backing off)."""
        v = self._verdict(num_requests)
        if not v.backing_off or v.burst:
            return True
        if v.wait > 0:
            v.wait -= 1
            v.budget = max(0, v.budget - 1)
            return False
        plain = self._plain.get(band(num_requests))
        if plain is None or plain.weight < MIN_PLAIN:  # nothing to judge a burst against yet
            return False
        v.burst, v.judged, v.spent = BURST, Side(), 0.0
        self.num_explorations += 1
        return True

    def exploring(self, num_requests: int) -> bool:
        """This step belongs to an exploration burst: one request drafts, however little pays."""
        v = self._verdict(num_requests)
        return v.backing_off and v.burst > 0

    def wants_plain(self, num_requests: int) -> bool:
        """Drafting at this batch has been timed but plain steps barely: time one plain step."""
        if self._verdict(num_requests).backing_off:
            return False
        d, p = self._drafting.get(b := band(num_requests)), self._plain.get(b)
        return d is not None and d.weight >= MIN_DRAFTING and (p is None or p.weight < MIN_PLAIN)

    def admitted(self) -> None:
        """A request the engine has not drafted for arrived: every band backed off halves its gap
        and waits no longer than that for its next burst (new traffic is judged again within a
        few requests), unless its last burst is fewer than :data:`FIRST_GAP` steps ago (a batch
        arriving at once halves it once), and never sooner than the last burst's cost allows
        (:data:`EXPLORE_SHARE`). A drafter that keeps losing keeps doubling it back."""
        for v in self._verdicts.values():
            if v.backing_off and not v.burst and v.gap - v.wait >= FIRST_GAP:
                v.gap = max(FIRST_GAP, v.gap // 2)
                v.wait = max(v.budget, min(v.wait, v.gap))

    # ---------------------------------------------------------------------------- observing
    def observe(self, num_requests: int, drafted: bool, tokens: int, seconds: float, *, catch_up: float = 0.0) -> None:
        """A decode step of ``num_requests`` that ``drafted`` or not: ``tokens`` emitted in
        ``seconds`` (target step plus drafter call) in plain steps of that batch size (the
        governor's: each from the target's cost fit), so the batch sizes of a band pool their
        steps as tokens per request per plain step (a batch that shrinks as requests finish
        still gathers a verdict); with one batch size, any unit every step uses. ``catch_up``:
        the part of ``seconds`` the drafter spent ingesting backlogs (a new request's prompt, a
        back-off's positions; the drafter's cost fit's estimate), paid once per request and
        stretch, as a prefill is: the step is judged without it (a burst's exploring budget
        counts it all the same)."""
        if seconds <= 0 or tokens <= 0:
            return
        catch_up = min(max(catch_up, 0.0), 0.999 * seconds)
        seconds -= catch_up
        key = band(num_requests)
        tokens = tokens / num_requests
        plain = self._plain.get(key)
        own = self._drafting.get(key) if drafted else plain
        if own is not None and own.weight >= 1.0:  # a stall, against steps of its own kind
            seconds = min(seconds, STALL * own.seconds / own.weight)
        if not drafted:
            if plain is None:
                plain = self._plain[key] = Side()
            plain.add(tokens, seconds)
            return
        v = self._verdict(num_requests)
        if v.backing_off:
            self._observe_burst(v, key, tokens, seconds, plain, seconds + catch_up)
            return
        v.run += 1
        side = self._drafting.get(key)
        if side is None:
            side = self._drafting[key] = Side()
        side.add(tokens, seconds)
        if plain is None:
            return
        ready = plain.weight >= MIN_PLAIN and side.weight >= MIN_DRAFTING
        if ready:
            self.ratio = side.rate / plain.rate
        if key > 1:  # (after the comparison: a fresh plain step is asked for, not waited on)
            plain.age(PLAIN_AGE)
        if ready and self.ratio < floor(key):
            short = v.resumed and v.run < SHORT_RUN
            v.gap = min(MAX_GAP, 2 * v.gap) if short else FIRST_GAP
            v.wait, v.backing_off, v.burst = v.gap, True, 0
            self.num_backoffs += 1

    def _observe_burst(self, v: Verdict, key: int, tokens: float, seconds: float, plain: Side | None,
                       spent: float) -> None:
        if v.burst < BURST:  # the burst's first step catches up: not judged
            v.judged.tokens += tokens
            v.judged.seconds += seconds
        if plain is not None and plain.rate > 0:  # what the step cost beyond plain steps' time for its tokens
            v.spent += spent - tokens / plain.rate
        v.burst = max(0, v.burst - 1)
        if v.burst:
            return
        if plain is None or plain.weight < MIN_PLAIN:  # nothing to compare with: wait, no verdict
            v.wait = v.gap
            return
        self.ratio = v.judged.rate / plain.rate
        # drafting pays again: resume, judged afresh on the steps to come. At batch 1 the bar to
        # resume is a gain, not the back-off's tolerated loss: three judged steps are noisy, and a
        # loser resumed at 0.975x drafts a verdict's worth of steps each time (over int4 SmolLM2,
        # DFlash on chat resumed and backed off 9 times in 12 replies, 0.87-0.96x)
        if self.ratio >= max(1.0, floor(key)) + (MARGIN / 2 if key <= 1 else self.batch_resume_margin):
            v.backing_off, v.resumed, v.run = False, True, 0
            self.num_resumes += 1
            side = self._drafting[key] = Side()
            side.add(v.judged.tokens, v.judged.seconds)
        else:
            v.gap = min(MAX_GAP, 2 * v.gap)
            steps = v.spent / (plain.seconds / plain.weight)  # in plain steps (the time unit may be any)
            share = EXPLORE_SHARE if key <= 1 else self.batch_explore_share
            v.budget = min(MAX_BUDGET_WAIT, math.ceil(max(0.0, steps) / share))
            v.wait = max(v.gap, v.budget)

    def summary(self) -> dict[str, float | int | bool | None]:
        """What the guard chose, for metrics (``SpecMetrics.step_costs``): the last step's band."""
        return {
            "guard_backing_off": self._last.backing_off,
            "guard_drafting_vs_plain": None if self.ratio is None else round(self.ratio, 3),
            "guard_backoffs": self.num_backoffs,
            "guard_explorations": self.num_explorations,
            "guard_gap_steps": self._last.gap,
            "guard_budget_steps": self._last.budget,
        }
