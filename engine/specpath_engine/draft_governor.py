"""How many tokens each request drafts this step: as many as pay for the whole batch, none where
drafting does not.

Verification is lossless for any draft length, so the engine may choose every request's ``k``
every step without changing what greedy decoding generates. With ``P_i(j)`` the chance that
request ``i``'s first ``j`` drafts are all accepted, drafting ``k_i`` yields on average
``E_i(k_i) = 1 + P_i(1) + ... + P_i(k_i)`` tokens. The step's time is the target's pass over all
its rows plus the drafter's call, both from the measured cost model
(:mod:`specpath_engine.step_costs`): a drafter call, a cost per drafting request (and per
position it catches up on), per pass (the longest draft, or one for ``drafts_in_one_pass``) and
per draft token, and the target's cost per extra query row. The governor chooses all ``k_i``
together to maximise the step's expected tokens per second,
``sum_i E_i(k_i) / (T_target(rows) + T_draft(k))``, rows of prefill chunks and requests that do
not draft included. So at batch 8, where a plain step reads the weights once for eight
requests and every drafted token is another row, it drafts less (often nothing) than at batch 1;
over a fast (int4) target, where a step is cheap, it drafts less too.

Above batch 1 two more conditions hold, for what no step's rate shows: the requests of a batch
that arrived together accept differently, so they finish at different steps, and the batch ends
with its last one on a tail of steps at a smaller batch that cost nearly a full step each
(SmolLM2-135M bf16, EAGLE-3, 8 code requests: 39 full steps, then 9-15 tail steps, a quarter of
the time). A step drafts only where its rate is expected to beat the plain step's by
:data:`~specpath_engine.drafting_guard.BATCH_GAIN` (the guard's bar on measured steps, below),
and only where the batch's laggards (fewest tokens generated so far) are not expected to
progress slower than they would decoding plainly (:data:`SLOWEST`, :func:`slowest_progress`):
the others' drafts make every step dearer, and a laggard that accepts little pays that without
finishing sooner. (8 chat requests, EAGLE-3: 43 full steps and 21 tail ones, 0.95x of plain
decoding, before this rule.) Where the chosen drafts would, every draft is capped shorter until
they do not (the deepest drafts cost a row each and are the least likely), and only where no cap
spares them does nobody draft.

The allocation (:func:`allocate`) is exact for this cost model: Dinkelbach's method turns the
ratio into ``max sum_i [G_i(k_i) - lam c_i(k_i)] - lam shared(m)`` for the current rate ``lam``,
which, for each pass count ``m``, separates into one running maximum per request (``O(B K)``
for all ``m`` at once); ``lam`` becomes the rate of the best allocation and two or three rounds
settle it.

``P_i(j)`` comes from the request's own recent verifications (conditional acceptance at each
depth, decayed so it follows the text), starting from the engine's recent acceptance over the
requests of its kind, greedy or sampled (itself from an optimistic prior, so the first requests
try drafting). A request the allocation gives no drafts is backed off; it is still weighed every
step at its last estimate (when the batch shrinks or costs fall it drafts again at once), and
now and then, after a wait in output positions that doubles while probes keep failing, it is
probed: weighed as if its acceptance were at least the engine's recent acceptance (what a new
request starts from: the optimistic prior until drafts are verified), so a probe is priced like any
other draft and spent only where drafting could pay at all (at the prior, 0.7, every one-token probe
of DFlash over an int4 target paid on paper while per-row costs of 0.19 of a step and an
acceptance of ~0.3 made each cost ~0.4 of a step: 24 of its 29 drafting steps in 4 chat replies
were probes, 0.956x of plain decoding); a probe priced out still drafts one token where the
drafter has not drafted for the longest wait, engine-wide (one request per step: its cost is
engine-wide, measured only while it drafts, and may be stale; a configured ``draft_pass_cost``
is not measured). A text that becomes predictable (a quoted block, a repetition) is picked up again by
a probe.

Where every step would draft alike, nothing varies the rows and the fit could not tell a row's
cost from the rest: every :data:`EXPLORE_EVERY` drafting steps the step drafts half, every second
time nothing (a plain step, timed beside the drafting ones).

Above all this sits the engine-wide guard (:mod:`specpath_engine.drafting_guard`): it compares the
realised tokens per second of the steps that drafted with those of plain steps, and where
drafting steps are measurably slower it backs the whole engine off (no drafts, probes or
exploration) but for a short burst every so many steps, whatever the cost model says.

From :data:`~specpath_engine.batch_arms.ARMS_FROM` requests the allocation above is one of three
arms (:mod:`specpath_engine.batch_arms`): each decode step runs no drafts, one draft a request, or
the allocation, whichever has delivered most lately (the others tried now and then); there the
arms stand in for the guard.

Decisions depend on timings, so they vary from run to run; greedy output never depends on them
(any K verifies to the same tokens).

Worked example (one request, K=4, costs in plain steps: a pass 0.10, a call 0.03, a row 0.02):
a request whose conditional acceptance is 0.8 at every depth has P = 0.8, 0.64, 0.51, 0.41:
E(4)/C(4) = 3.36/1.51 = 2.2, so it drafts 4. At 0.3 per depth E(1)/C(1) = 1.3/1.15 = 1.13 beats
E(2)/C(2) = 1.39/1.27, so it drafts 1; at 0.1 nothing beats 1.0 and it decodes plainly.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence

import attrs

from specpath_engine.batch_arms import ARMS_FROM, Arm, BatchArms
from specpath_engine.draft_calibration import Calibration
from specpath_engine.drafting_guard import BATCH_GAIN, DraftingGuard, band
from specpath_engine.step_costs import Clock, StepCosts

PRIOR_ACCEPTANCE = 0.7
"""Conditional acceptance the engine starts from at every depth (optimistic: the first requests try
drafting); a new request starts from, and a probe is weighed at least at, the engine's recent
acceptance drawn from it (:meth:`DraftGovernor.prior_rates`)."""

PRIOR_WEIGHT = 2.0
"""How many verifications the prior counts as."""

DECAY = 0.9
"""Weight of past verifications after each new one: about the last ten steps count."""

PLAIN_FIT_EVERY, PLAIN_SURPRISE = 4, 0.25
"""Plain decode steps (no drafter call, no drafts, no prefill) reach the target's cost fit one in
:data:`PLAIN_FIT_EVERY`, and every one more than :data:`PLAIN_SURPRISE` off what the fit expects
(the costs changed): alike, they say little new each, and beside a fast target (int4: 7.7 ms a
step) the fit's work on every one, run with cold caches after the step, cost 1-2% of the time."""

QUIET_EVERY = 4
"""Of the plain decode steps in which nothing could draft (every request backed off with no probe
due, or the guard backed off between bursts), one in this many reaches the cost fit and the guard
once the band's costs are timed: they are alike, and each one's bookkeeping runs right after the
target's pass with cold caches (SmolLM2 int4, DFlash backed off on chat, a loaded machine: 0.18 ms
a step outside the target's pass beyond the plain engine's, of which the fit and the guard took
half; quiet, the whole excess is ~45 us of a 5.5 ms step)."""

FILL_DECAY = 0.9
"""Weight of past drafting steps in :attr:`DraftGovernor.fill` (about the last ten count)."""

FILL_PRIOR = 1.0
"""Pseudo-steps of a full fill :attr:`DraftGovernor.fill` starts from."""

ENGINE_DECAY = 0.98
"""The same for the engine-wide acceptance new requests start from (about the last 50 drafts)."""

FIRST_WAIT, MAX_WAIT, MAX_FIRST_WAIT = 4, 64, 16
"""Positions a backed-off request waits before a probe; doubled per failed probe, at most MAX_WAIT.
A request's first wait (and the one it starts over from after drafting paid) is the engine's
(:attr:`DraftGovernor.probe_wait`): doubled by every probe that has nothing accepted, halved by
every one that has, between FIRST_WAIT and MAX_FIRST_WAIT (so a reply still probes early: text
that turns predictable is found within it). Where probes keep failing (a weak drafter on sampled
everyday chat: SmolLM2's draft model at T=0.8 probed 115 times in 12 replies of 64 tokens, 22% of
first drafts accepted, 0.92x of plain decoding), new requests no longer probe as if nothing had
been learnt: ~2 probes in 64 positions instead of ~4."""

MAX_ROUNDS = 8
"""Dinkelbach rounds at most (two or three settle it in practice)."""

EXPLORE_EVERY = 16
"""Every this many drafting steps the step drafts half what was chosen (rounded up), and every
second time nothing: the deepest drafts are worth least, and it varies the rows and passes and
times a plain step beside the drafting ones, so their costs stay measurable where every step
would otherwise draft alike (a few percent of the steps' drafts)."""

SLOWEST = 1.0
"""Above batch 1 the batch's laggards (the requests with the fewest tokens generated: in a batch
that arrived together, the last to finish) may not be expected to progress at less than this
share of their plain decoding speed because the others draft: where one would, nobody drafts
that step, unless shorter drafts spare them (:meth:`DraftGovernor._spare_laggards`: the batch ends
with its last request, so drafting that slows it is a loss)."""

ONE_AHEAD, COHORT = 1, 16
"""The batch arms' ``one`` drafts for no request more than ``ONE_AHEAD`` tokens ahead of the
batch's slowest where the batch arrived together (its requests' generated tokens within
``COHORT`` of each other): such a batch ends with its last request, so a draft row for one ahead
buys nothing the batch needs, and the requests stay in step. (SmolLM2 bf16 at batch 8 on an AMD
EPYC, 128 tokens, greedy: drafting for all, the last request's luck set the batch's end, and
EAGLE-3 / DFlash / DSpark read 0.99 / 0.96 / 0.94x on code, 1.00 / 1.00 / 0.97x on chat; for the
slowest alone, 1.09 / 0.98 / 1.02x and 1.01 / 1.00 / 0.98x in the next run.) Requests that
arrived apart (a server's traffic) all draft: there a request done sooner frees its place."""

EXPLORE_FIRST = (4, 8)
"""The first drafting steps that explore (a plain step, then half): the costs are needed early."""


def allocate(reach: Sequence[Sequence[float]], base_tokens: float, base_cost: float, *, call: float,
             per_request: Sequence[float], per_token: float, per_pass: float,
             one_pass: bool = False, rows: int = 0, row_block: int = 0, per_block: float = 0.0,
             fill: float = 1.0, gain: float = 0.0) -> list[int]:
    """Draft lengths ``k_i`` in ``0..len(reach[i])`` maximising expected tokens per unit time.

    ``reach[i][j]``: the chance request ``i``'s first ``j + 1`` drafts are all accepted;
    ``base_tokens`` / ``base_cost``: the step's tokens and cost without drafts; a drafting step
    adds ``call`` once, ``per_request[i]`` per drafting request, ``per_token`` per draft (its
    row and its share of the drafter), and ``per_pass`` per pass (the longest draft, or one when
    ``one_pass``). Where the target multiplies rows in blocks of ``row_block``, each block the
    drafts open beyond the ``rows`` the step has anyway adds ``per_block``: the best allocation
    that ignores blocks is weighed against the same trimmed to fill each block it opens, and to
    the blocks already open (its least likely drafts dropped first). ``fill``: the share of the
    drafts allotted that a drafter proposes (a match-based one proposes none where nothing
    matches): the rows a step is expected to hold. ``gain``: drafts are allotted only where the
    best allocation's expected rate beats the plain step's by this share (then the best one). All
    costs >= 0. See the module docstring for the method.
    """
    alloc = _allocate(reach, base_tokens, base_cost, call=call, per_request=per_request, per_token=per_token,
                      per_pass=per_pass, one_pass=one_pass, gain=gain)
    drafts = sum(alloc)
    if not drafts or not row_block or per_block <= 0:
        return alloc
    first = (rows - 1) // row_block if rows else 0

    def opened(total: int) -> int:  # blocks beyond those open anyway, for drafts allotted in all
        return (rows + math.ceil(fill * total) - 1) // row_block - first

    if not opened(drafts):
        return alloc
    gains = [[sum(r[: j + 1]) for j in range(len(r))] for r in reach]
    args = (gains, base_tokens, base_cost, call, per_request, per_token, per_pass, one_pass)

    def rate(ks: Sequence[int]) -> float:  # _rate's, the blocks the drafts open included
        tokens = base_tokens + sum(g[k - 1] for k, g in zip(ks, gains) if k)
        return tokens / (tokens / _rate(ks, *args) + opened(sum(ks)) * per_block)

    candidates = [alloc]
    trimmed, blocks = list(alloc), opened(drafts)
    for total in range(drafts - 1, -1, -1):  # drop the least likely last draft, one at a time
        i = min((i for i, k in enumerate(trimmed) if k), key=lambda i: reach[i][trimmed[i] - 1])
        trimmed[i] -= 1
        if (now := opened(total)) < blocks:  # the most drafts one block fewer holds: a candidate
            candidates.append(list(trimmed))
            blocks = now
        if not now:
            break
    best = max(candidates, key=rate)
    return best if rate(best) > (1 + gain) * base_tokens / max(base_cost, 1e-12) else [0] * len(reach)


def _allocate(reach: Sequence[Sequence[float]], base_tokens: float, base_cost: float, *, call: float,
              per_request: Sequence[float], per_token: float, per_pass: float, one_pass: bool,
              gain: float = 0.0) -> list[int]:
    """:func:`allocate` without row blocks: Dinkelbach's method, exact. Started at ``1 + gain``
    times the plain rate, it keeps only an allocation that beats that (the best one)."""
    n = len(reach)
    alloc = [0] * n
    if not n or base_tokens <= 0:
        return alloc
    base_cost = max(base_cost, 1e-12)
    gains = []
    longest = 0
    for r in reach:
        acc, g = 0.0, []
        for p in r:
            acc += p
            g.append(acc)
        gains.append(g)
        longest = max(longest, len(g))
    if not longest:
        return alloc
    passes = 1 if one_pass else longest
    lam = (1 + gain) * base_tokens / base_cost
    for _ in range(MAX_ROUNDS):
        cols = [0.0] * passes
        picks = []
        for g, q in zip(gains, per_request):
            pick = [0] * passes
            run, arg = 0.0, 0
            for k in range(1, len(g) + 1):  # best k <= m, for every pass count m, in one sweep
                v = g[k - 1] - lam * (q + k * per_token)
                if v > run:
                    run, arg = v, k
                if not one_pass:
                    cols[k - 1] += run
                    pick[k - 1] = arg
            if one_pass:
                cols[0] += run
                pick[0] = arg
            else:
                for m in range(len(g), passes):
                    cols[m] += run
                    pick[m] = arg
            picks.append(pick)
        best, best_m = 1e-12 * base_tokens, -1
        for m, total in enumerate(cols):
            value = total - lam * (call + (m + 1) * per_pass)
            if value > best:
                best, best_m = value, m
        if best_m < 0:
            break
        chosen = [p[best_m] for p in picks]
        rate = _rate(chosen, gains, base_tokens, base_cost, call, per_request, per_token, per_pass, one_pass)
        if rate <= lam:
            break
        alloc, lam = chosen, rate
    return alloc


def _rate(ks: Sequence[int], gains: Sequence[Sequence[float]], base_tokens: float, base_cost: float, call: float,
          per_request: Sequence[float], per_token: float, per_pass: float, one_pass: bool) -> float:
    """Expected tokens per unit cost of the allocation ``ks``."""
    tokens, cost, longest = base_tokens, base_cost, 0
    for k, g, q in zip(ks, gains, per_request):
        if k:
            tokens += g[k - 1]
            cost += q + k * per_token
            longest = max(longest, k)
    if longest:
        cost += call + per_pass * (1 if one_pass else longest)
    return tokens / cost


def slowest_progress(ks: Sequence[int], reach: Sequence[Sequence[float]], base_cost: float, *, call: float,
                     per_request: Sequence[float], per_token: float, per_pass: float, one_pass: bool = False,
                     rows: int = 0, row_block: int = 0, per_block: float = 0.0, fill: float = 1.0,
                     among: Sequence[bool] = ()) -> float:
    """The least expected progress of any request (of those ``among`` marks, default all) under
    the allocation ``ks``, in plain steps' worth: ``min_i (1 + E_i(k_i)) * base_cost / cost(ks)``
    (1: no faster or slower than plain decoding; below 1, drafting the others slows it down).
    The costs are :func:`allocate`'s, row blocks included."""
    cost, longest, drafts = base_cost, 0, 0
    least = math.inf
    for i, (k, r, q) in enumerate(zip(ks, reach, per_request)):
        if not among or among[i]:
            least = min(least, 1.0 + sum(r[:k]))
        if k:
            cost += q + k * per_token
            longest = max(longest, k)
            drafts += k
    if not longest:
        return 1.0
    cost += call + per_pass * (1 if one_pass else longest)
    if row_block and per_block > 0:
        first = (rows - 1) // row_block if rows else 0
        cost += ((rows + math.ceil(fill * drafts) - 1) // row_block - first) * per_block
    return least * base_cost / max(cost, 1e-12)


def step_rate(ks: Sequence[int], reach: Sequence[Sequence[float]], base_tokens: float, base_cost: float, *,
              call: float, per_request: Sequence[float], per_token: float, per_pass: float,
              one_pass: bool = False) -> float:
    """The rate :func:`allocate` maximises, for any allocation ``ks`` (tests compare them)."""
    gains = [[sum(r[: j + 1]) for j in range(len(r))] for r in reach]
    return _rate(ks, gains, base_tokens, base_cost, call, per_request, per_token, per_pass, one_pass)


@attrs.define(kw_only=True, slots=True)
class RequestAcceptance:
    """One request's decayed acceptance counts by depth and its back-off state."""

    accepted: list[float]
    """Decayed count of drafts accepted at depth j (given depths < j accepted)."""
    tried: list[float]
    """Decayed count of drafts verified at depth j."""
    probe_at: int = -1
    """While backed off, the position from which it is probed (-1: not backed off)."""
    next_wait: int = FIRST_WAIT
    """Positions the next back-off waits."""
    probing: bool = False
    """It drafts this step as a probe."""
    run: int = 0
    """Drafting steps since its last back-off: a back-off after fewer than ``FIRST_WAIT`` (a
    failed probe, a fluke of the estimates) doubles the next wait; after a longer run drafting
    had paid, and the wait starts over."""
    backed_off: bool = False
    """It has backed off before (its first drafting run is a start, not a failed probe)."""
    sampled: bool = False
    """It samples (temperature > 0): its verifications feed, and it starts from, the engine's
    acceptance over sampled requests, not over greedy ones."""

    rates: list[float] = attrs.field(factory=list)
    """The conditional acceptance at each depth (kept up to date by ``refresh``)."""

    def conditional(self, depth: int, prior: float = PRIOR_ACCEPTANCE) -> float:
        return (self.accepted[depth] + prior * PRIOR_WEIGHT) / (self.tried[depth] + PRIOR_WEIGHT)

    def refresh(self, prior: Sequence[float]) -> None:
        self.rates = [self.conditional(j, p) for j, p in enumerate(prior)]


class DraftGovernor:
    """Draft lengths for a step's requests (``allocate``), their outcomes (``observe``) and the
    step's timings (``observe_step``, with ``clock``).

    ``costs``: the cost model (default: a :class:`~specpath_engine.step_costs.StepCosts` from
    ``pass_cost``, ``one_pass`` and ``pinned``); tests pass one fed with simulated times. Each band
    of batch sizes (the guard's: 1, 2-3, 4-7, 8-15, ...) fits its own copy: what a row costs is not
    one number across them (a lone request's step is memory-bound, its draft rows nearly free; at
    batch 8 on a CPU without AMX tiles a row cost 0.12 of a plain step), and one fit shared by
    both carried batch 8's row cost to batch 1, where it priced every draft out and, drafting
    nothing, never learnt otherwise (SmolLM2, EAGLE-3 on everyday chat after a batch-8 run: 0.92x
    instead of ~1.2-1.3x).
    """

    def __init__(self, max_k: int, pass_cost: float = 0.0, *, one_pass: bool = False, pinned: bool = False,
                 row_block: int = 0, costs: StepCosts | None = None, clock: Clock = time.perf_counter,
                 arms_from: int | None = ARMS_FROM) -> None:
        self.max_k = max_k
        self._template = costs if costs is not None else StepCosts(pass_cost, one_pass=one_pass, pinned=pinned,
                                                                   row_block=row_block)
        self._fresh = copy.deepcopy(self._template)
        """A copy of the model before any timing reached it: each further band starts from one."""
        self._band_costs: dict[int, StepCosts] = {}
        self.costs = self.costs_for(1)
        """The cost model of the band of the step last allocated or observed."""
        self.clock = clock
        """Read around the drafter's call and around the target step (one pair each, per step)."""
        self.guard = DraftingGuard()
        """The engine-wide back-off from realised throughput (fed by ``observe_step``'s ``tokens``)."""
        self.arms = BatchArms()
        """From :data:`~specpath_engine.batch_arms.ARMS_FROM` requests, which way of drafting a decode
        step runs (no drafts, one each, or the allocation's), from what each delivered."""
        self.arms_from = arms_from
        """Batch sizes from which steps run arms (None: never; tests of the allocation alone)."""
        self._arm: Arm | None = None
        """The arm of the step allocated last (until it is observed)."""
        self.num_probes = 0
        """Probes that drafted."""
        self.num_declined_probes = 0
        """Probes the allocation priced out (drafting could not pay even at the prior's acceptance)."""
        self._requests: dict[str, RequestAcceptance] = {}
        self._allotted = 0
        """Drafts allotted this step (until the step is observed)."""
        self._backlog = 0
        """Positions the requests drafting this step hand the drafter beyond a step's worth (a new
        request's prompt, a back-off's positions): their ingest is taken out of what the guard judges."""
        self._steps = 0
        """Steps :meth:`allocate` was asked about."""
        self._drafted_step = -MAX_WAIT
        """The last of those steps that drafted (a forced probe waits :data:`MAX_WAIT` after it)."""
        self._plain_steps = 0
        """Plain decode steps observed (one in :data:`PLAIN_FIT_EVERY` reaches the fit)."""
        self._quiet = False
        """This step's allocation could draft nothing (see :data:`QUIET_EVERY`)."""
        self._quiet_steps = 0
        self._fill = (FILL_PRIOR, FILL_PRIOR)
        """Decayed drafts proposed and allotted (from a prior of all proposed)."""
        self._drafting_steps = 0
        self._observed = 0
        """Verifications observed (a request's acceptance, or the engine's, may have moved)."""
        self._idle: tuple | None = None
        """What the last choice read where every request was backed off and it chose nothing (the
        requests, their limits and backlogs, the step's shape, the costs, the fill, the observed
        count, the guard's exploration): the same again chooses nothing again, without the
        allocation's work (0.06 ms a step at batch 6, a third of a backed-off engine's excess)."""
        self._engine = {False: ([0.0] * max_k, [0.0] * max_k), True: ([0.0] * max_k, [0.0] * max_k)}
        """The engine's decayed (accepted, tried) counts by depth, over its greedy (False) and its
        sampled (True) requests: a new request's prior. Kept apart because a drafter's acceptance
        depends on the temperature (SmolLM2 bf16, EAGLE-3, held-out code completions: 0.82 of first
        drafts accepted greedy, 0.47 at T=0.8): greedy requests after a run of sampled ones started
        from the sampled acceptance, were priced out and waited for probes."""
        self.probe_wait = FIRST_WAIT
        """The first wait of a request's back-off (see :data:`FIRST_WAIT`): learnt from probes."""
        self.calibration = Calibration()
        """How often the drafter's own estimates of its drafts come true (fed by the runner)."""
        self.floors = (0.0, 0.0)
        """The last allocation's (draft, row) floors: the chance of being accepted (its whole path)
        below which one more draft does not pay for its pass and row, or (drafts already made) its
        row, at the step's expected rate (Dinkelbach's condition: keep what yields more than the
        rate times what it costs). (0, 0): nothing allotted."""

    def costs_for(self, num_requests: int) -> StepCosts:
        """The cost model of the band of ``num_requests`` (the first band takes the given model,
        the others start from a fresh copy of it)."""
        key = band(max(1, num_requests))
        costs = self._band_costs.get(key)
        if costs is None:
            costs = self._band_costs[key] = self._template if not self._band_costs else copy.deepcopy(self._fresh)
        return costs

    @property
    def main_costs(self) -> StepCosts:
        """The cost model of the band with the most timed target steps (what :meth:`summary`
        reports: a closed batch's last steps run at smaller batch sizes)."""
        return max(self._band_costs.values(), key=lambda c: c.target.count)

    def prior_rates(self, sampled: bool = False) -> list[float]:
        """The conditional acceptance a new request starts from at each depth: the engine's recent
        acceptance over requests that sample as it does (``sampled``: temperature > 0), itself
        starting from :data:`PRIOR_ACCEPTANCE` (so a drafter that has shown low acceptance does
        not make every new request try it again at full length)."""
        accepted, tried = self._engine[sampled]
        return [(a + PRIOR_ACCEPTANCE * PRIOR_WEIGHT) / (t + PRIOR_WEIGHT) for a, t in zip(accepted, tried)]

    @property
    def fill(self) -> float:
        """The share of its allotted drafts the drafter has been proposing lately (a match-based
        drafter proposes none where nothing matches): the rows a drafting step is expected to hold."""
        return self._fill[0] / self._fill[1]

    @property
    def pass_cost(self) -> float:
        """The static cost of a drafter pass relative to a plain step (the prior, or the pinned cost)."""
        return self.costs.pass_cost

    @property
    def one_pass(self) -> bool:
        return self.costs.one_pass

    def _state(self, req_id: str, sampled: bool = False) -> RequestAcceptance:
        state = self._requests.get(req_id)
        if state is None:
            state = self._requests[req_id] = RequestAcceptance(
                accepted=[0.0] * self.max_k, tried=[0.0] * self.max_k, rates=self.prior_rates(sampled),
                next_wait=self.probe_wait, sampled=sampled)
        return state

    def allocate(self, req_ids: Sequence[str], limits: Sequence[int], positions: Sequence[int],
                 pending: Sequence[int], *, num_requests: int, num_sampling: int, prefill_rows: int = 0,
                 call_sunk: bool = False, generated: Sequence[int] = (), sampled: Sequence[bool] = ()) -> list[int]:
        """Draft lengths for the step's requests that may draft.

        ``limits``: each one's most drafts (the scheduler's K); ``positions``: its length (what
        the drafts would follow); ``pending``: positions it would hand the drafter if it drafted
        (priced up to a step's worth: a backlog, a prompt or the positions of a back-off, is
        ingested whenever drafting starts, so it must not keep drafting from starting);
        ``num_requests`` / ``num_sampling`` / ``prefill_rows``: the whole step's scheduled
        requests, those that sample a token, and prefill rows beyond one per request;
        ``call_sunk``: the drafter is called this step anyway (it ingests for others);
        ``generated``: the tokens each has generated so far (where given, those with the fewest
        are the batch's laggards, whom the others' drafts may not slow: :data:`SLOWEST`; not
        given, nobody is held back for them); ``sampled``: which sample (temperature > 0; not
        given, none): a new request starts from the engine's acceptance over its kind.
        """
        ks = [0] * len(req_ids)
        self._steps += 1
        self._quiet, self._backlog = False, 0
        guard = self.guard
        self._arm = None
        for i, rid in enumerate(req_ids):
            if rid not in self._requests:  # new traffic: the guard judges it afresh
                self._state(rid, bool(sampled[i]) if sampled else False)
                guard.admitted()
                self.arms.admitted()
        # from ARMS_FROM requests the arms choose (their plain arm is the guard's reference and
        # back-off); below, and for prefill steps, the guard judges the allocation's drafting
        armed = self.arms_from is not None and num_requests >= self.arms_from and not prefill_rows
        if armed:
            arm = self._arm = self.arms.pick(num_requests)
            if arm is Arm.PLAIN:
                return ks
            if arm is Arm.ONE:
                return self._draft_one(ks, limits, pending, generated)
        else:
            if not prefill_rows and guard.wants_plain(num_requests):
                return ks  # a plain step timed for the comparison
            if not guard.allows(num_requests):
                self._quiet = True
                return ks  # backed off engine-wide, no burst due
        exploring = not armed and guard.exploring(num_requests)
        requests = self._requests
        idle = None  # where every request is backed off with no probe due: what the choice reads
        if all(requests[rid].probe_at > pos for rid, pos in zip(req_ids, positions)):
            costs = self.costs_for(num_requests)
            idle = (tuple(req_ids), tuple(limits), tuple(min(p, k + 1) for p, k in zip(pending, limits)),
                    num_requests, num_sampling, prefill_rows, call_sunk, tuple(costs.target_coefficients),
                    tuple(costs.drafter_coefficients), self._fill, self._observed, exploring)
            if idle == self._idle:  # nothing it reads changed since it chose nothing: nothing again
                self._allotted, self.floors, self._quiet = 0, (0.0, 0.0), True
                return ks
        idx, reach, states, probes = [], [], [], []
        probe_floors = {}  # what a probe's acceptance is weighed at least at, by depth (the engine's recent), by kind
        for i, (rid, limit, pos) in enumerate(zip(req_ids, limits, positions)):
            limit = min(limit, self.max_k)
            if limit <= 0:
                continue
            state = self._state(rid)
            probe = 0 <= state.probe_at <= pos
            if probe:
                floor = probe_floors.get(state.sampled)
                if floor is None:
                    floor = probe_floors[state.sampled] = self.prior_rates(state.sampled)
            r, acc = [], 1.0
            for j, c in enumerate(state.rates[:limit]):
                acc *= max(c, floor[j]) if probe else c
                r.append(acc)
            idx.append(i)
            reach.append(r)
            states.append(state)
            probes.append(probe)
        if not idx:
            return ks
        costs = self.costs = self.costs_for(num_requests)
        t, d = costs.target_coefficients, costs.drafter_coefficients
        rows = num_requests + prefill_rows
        base = t[0] + t[1] * num_requests + t[3] * prefill_rows + t[4] * costs.blocks(rows) + (d[0] if call_sunk else 0.0)
        shape = dict(call=0.0 if call_sunk else d[0], per_token=t[2] + d[3], per_pass=d[2], one_pass=costs.one_pass,
                     per_request=[d[1] + d[4] * min(pending[i], limits[i] + 1) for i in idx], rows=rows,
                     row_block=costs.row_block, per_block=t[4], fill=self.fill)
        weighed = dict(zip(idx, zip(reach, shape["per_request"])))  # (chances, cost per request) of each i
        bar = num_requests > 1 and not exploring  # (a burst drafts what pays at all: the guard judges it)
        chosen = allocate(reach, float(num_sampling), base, **shape, gain=BATCH_GAIN if bar else 0.0)
        if bar and generated and len(idx) > 1 and any(chosen):
            chosen = self._spare_laggards(chosen, reach, base, float(num_sampling), shape,
                                          self._laggards(idx, generated))
        if exploring:
            # the guard's burst drafts what the costs choose (that is what it judges), and where
            # they choose nothing the likeliest request one token: a draft the costs priced out
            # is a probe (its back-off stays)
            if not any(chosen):
                j = max(range(len(idx)), key=lambda j: reach[j][0])
                idx, chosen, states, probes = [idx[j]], [1], [states[j]], [True]
        elif any(chosen):
            self._drafting_steps += 1
            n = self._drafting_steps
            if n % EXPLORE_EVERY == 0 or n in EXPLORE_FIRST:  # early too: a short reply needs the costs soon
                plain = n % (2 * EXPLORE_EVERY) == 0 or n == EXPLORE_FIRST[0]
                chosen = [0 if plain else (k + 1) // 2 for k in chosen]
        # The drafter's costs are engine-wide: one probe re-measures them for every request, and
        # only where the drafter has not drafted for the longest wait (at batch 8 a probe per
        # request and wait cost a drafter call each, ~15% of a step apiece). Without it, costs
        # that once priced every draft out (two calls stalled by the machine read as a change of
        # costs) would never be measured again.
        # Until the drafter has been timed its costs are a guess from its weights' bytes (for a
        # drafter through the target's head over an int4 target, several times too dear): a probe
        # priced out then drafts all the same, one a step, so the guess is replaced by a measurement.
        timed = costs.drafter_timed
        # (of the probes due and priced out, the one whose catch-up is shortest: above batch 1 that
        # is most of what it costs)
        forced = -1
        if (self._steps - self._drafted_step >= MAX_WAIT and not costs.pinned) or not timed:
            due = [j for j, (k, probe) in enumerate(zip(chosen, probes)) if probe and not k]
            forced = min(due, key=lambda j: pending[idx[j]]) if due else -1
        for j, (i, k, state, probe) in enumerate(zip(idx, chosen, states, probes)):
            ks[i] = k
            pos = positions[i]
            if k:
                state.run += 1
                if probe:
                    state.probing = True
                    self.num_probes += 1
                else:
                    state.probe_at = -1
            elif probe and j == forced:
                # priced out while the drafter has not drafted for the longest wait (or was never
                # timed): one draft, so stale (or guessed) drafter costs get measured; the wait is
                # the engine's, not the request's (a request's own reaches MAX_WAIT only after 124
                # positions: a run of shorter replies would never measure the drafter again)
                ks[i] = 1
                state.run += 1
                state.probing = True
                self.num_probes += 1
            elif probe and state.next_wait < MAX_WAIT:  # priced out: no draft spent, the next probe waits longer
                self.num_declined_probes += 1
                state.next_wait = min(MAX_WAIT, state.next_wait * 2)
                state.probe_at = pos + state.next_wait
            elif probe:  # the drafter drafted lately (its costs are fresh): priced out, it waits again
                self.num_declined_probes += 1
                state.probe_at = pos + state.next_wait
            elif state.probe_at < 0:  # backs off now
                short = state.run < FIRST_WAIT and state.backed_off
                state.next_wait = min(MAX_WAIT, state.next_wait * 2) if short else self.probe_wait
                state.run, state.backed_off = 0, True
                state.probe_at = pos + state.next_wait
        self._allotted = sum(ks)
        self._backlog = sum(max(0, p - limit - 1) for k, p, limit in zip(ks, pending, limits) if k)
        self._idle = idle if not self._allotted else None
        self._quiet = self._idle is not None
        self.floors = (0.0, 0.0)
        if self._allotted:
            self._drafted_step = self._steps
            self.floors = self._floors(ks, weighed, float(num_sampling), base, shape, t[2])
        return ks

    def _draft_one(self, ks: list[int], limits: Sequence[int], pending: Sequence[int],
                   generated: Sequence[int] = ()) -> list[int]:
        """The ``one`` arm: one draft for every request that may draft, but in a batch that arrived
        together (:data:`COHORT`) none for a request ahead of the slowest by more than
        :data:`ONE_AHEAD` tokens (back-offs and probes untouched: they are the ``chosen`` arm's)."""
        least = min(generated) if generated else 0
        cohort = bool(generated) and max(generated) - least <= COHORT
        for i, limit in enumerate(limits):
            ahead = cohort and generated[i] - least > ONE_AHEAD
            ks[i] = 1 if min(limit, self.max_k) > 0 and not ahead else 0
        self._allotted = sum(ks)
        self._backlog = sum(max(0, p - limit - 1) for k, p, limit in zip(ks, pending, limits) if k)
        self._idle, self.floors = None, (0.0, 0.0)
        if self._allotted:
            self._drafted_step = self._steps
        return ks

    @staticmethod
    def _floors(ks: Sequence[int], weighed: dict, base_tokens: float, base_cost: float, shape: dict,
                row_cost: float) -> tuple[float, float]:
        """:attr:`floors` for the allocation ``ks`` (the step's draft lengths; ``weighed``: per
        request that may draft its chances and its cost as a drafting request; ``shape``: the costs
        :func:`allocate` was given; ``row_cost``: the target's per draft row)."""
        drafting = [i for i, k in enumerate(ks) if k]
        rate = step_rate([ks[i] for i in drafting], [weighed[i][0] for i in drafting], base_tokens,
                         max(base_cost, 1e-12), call=shape["call"], per_request=[weighed[i][1] for i in drafting],
                         per_token=shape["per_token"], per_pass=shape["per_pass"],
                         one_pass=shape["one_pass"])  # tokens a second, as expected
        draft = shape["per_token"] + (0.0 if shape["one_pass"] else shape["per_pass"])
        return min(1.0, rate * draft), min(1.0, rate * row_cost)

    @staticmethod
    def _spare_laggards(chosen: list[int], reach: Sequence[Sequence[float]], base: float, base_tokens: float,
                        shape: dict, laggards: Sequence[bool]) -> list[int]:
        """``chosen``, or where it would slow the batch's laggards below :data:`SLOWEST` the best
        allocation with every draft capped shorter that does not (and still clears the batch's
        gain bar), or none. A batch-8 step's rows cost most at depth (the drafts past the room its
        first row block leaves open another pass over every weight) while the first drafts are the likeliest: where drafting 3 slows the last
        request, drafting 1 often speeds it up. (SmolLM2 bf16 on an AMD EPYC, EAGLE-3, 8 held-out
        code requests: K=1 and K=2 fixed ran at 1.11x and 1.18-1.21x of plain decoding; the rule
        dropping every draft instead, at 1.02-1.08x, drafting in ~80 of ~900 steps; capping,
        1.10-1.14x, drafting in nearly every step.)"""
        if slowest_progress(chosen, reach, base, **shape, among=laggards) >= SLOWEST:
            return chosen
        for cap in range(max(chosen) - 1, 0, -1):
            capped = [r[:cap] for r in reach]
            ks = allocate(capped, base_tokens, base, **shape, gain=BATCH_GAIN)
            if any(ks) and slowest_progress(ks, capped, base, **shape, among=laggards) >= SLOWEST:
                return ks
        return [0] * len(chosen)

    @staticmethod
    def _laggards(idx: Sequence[int], generated: Sequence[int]) -> list[bool]:
        """Which of the requests ``idx`` have generated fewest tokens."""
        least = min(generated[i] for i in idx)
        return [generated[i] == least for i in idx]

    def observe(self, req_id: str, num_drafted: int, num_accepted: int) -> None:
        """The verification of a step in which this request drafted ``num_drafted`` tokens."""
        if num_drafted <= 0:
            return
        self._observed += 1
        state = self._state(req_id)
        for j in range(self.max_k):
            state.accepted[j] *= DECAY
            state.tried[j] *= DECAY
        for j in range(min(num_drafted, num_accepted + 1, self.max_k)):
            state.tried[j] += 1.0
            if j < num_accepted:
                state.accepted[j] += 1.0
            engine_accepted, engine_tried = self._engine[state.sampled]
            engine_tried[j] = ENGINE_DECAY * engine_tried[j] + 1.0
            engine_accepted[j] = ENGINE_DECAY * engine_accepted[j] + (j < num_accepted)
        state.refresh(self.prior_rates(state.sampled))
        if state.probing:
            state.probing = False
            state.probe_at = -1
            self.probe_wait = max(FIRST_WAIT, self.probe_wait // 2) if num_accepted else min(MAX_FIRST_WAIT,
                                                                                              2 * self.probe_wait)

    def observe_step(self, drafter: Sequence[float] | None, drafter_s: float, target: Sequence[float],
                     target_s: float, tokens: int | None = None) -> None:
        """A step's timings: the drafter's call (``DRAFT_FEATURES``; None: not called) and the
        target step (``TARGET_FEATURES``), in seconds; ``tokens``: what the step emitted (for the
        guard, decode steps only: None leaves it unfed); of the plain decode steps whose allocation
        could draft nothing, one in :data:`QUIET_EVERY` is taken."""
        costs = self.costs = self.costs_for(int(target[1]))
        arm, self._arm = self._arm, None  # (this step's, whichever way this returns)
        if self._quiet:
            self._quiet = False
            # (once timed: a model still learning its unit or the drafter's costs takes every step)
            if drafter is None and not target[2] and not target[3] and costs.unit and costs.drafter_timed:
                self._quiet_steps += 1
                if self._quiet_steps % QUIET_EVERY:
                    return
        plain = costs.plain_step(int(target[1])) if costs.unit else 0.0  # before this step moves the fit
        if drafter is None and not target[2] and not target[3] and plain > 0:  # a plain decode step
            self._plain_steps += 1
            if self._plain_steps % PLAIN_FIT_EVERY == 0 or abs(target_s - plain) > PLAIN_SURPRISE * plain:
                costs.observe_target(target, target_s)
        else:
            costs.observe_target(target, target_s)
            costs.observe_drafter(drafter, drafter_s)
        if self._allotted:  # what the drafter proposed of what it was allotted (the step's draft rows)
            self._fill = (FILL_DECAY * self._fill[0] + min(target[2], self._allotted),
                          FILL_DECAY * self._fill[1] + self._allotted)
            self._allotted = 0
        if tokens is not None and not target[3] and costs.unit:
            # the step's time in plain steps of its batch as the target's fit has them now: the
            # load of a shared machine and the context's growth drift both kinds of step alike
            plain = plain or costs.plain_step(int(target[1]))  # (the first timed step sets the unit)
            if plain > 0:
                drafted = drafter is not None and drafter[1] > 0
                seconds = target_s + (drafter_s if drafter is not None else 0.0)
                # a backlog's ingest is paid once per request and stretch, as a plain engine's
                # prefill is, not per step: judged per step, a batch of 8 fresh prompts' catch-up
                # (~2.5 plain steps) read as drafting that loses, and the band backed off
                catch_up = min(drafter_s, costs.drafter_coefficients[4] * self._backlog) if drafted else 0.0
                self.guard.observe(int(target[1]), drafted, tokens, seconds / plain, catch_up=catch_up / plain)
                if arm is not None:  # (a step that drafted nothing is a plain step's sample)
                    self.arms.observe(int(target[1]), arm if drafted else Arm.PLAIN, tokens,
                                      (seconds - catch_up) / plain, catch_up / plain)
        self._backlog = 0

    def summary(self) -> dict:
        """The fitted costs, the probes, what the guard chose, the share of allotted drafts lately
        verified (``fill``: a drafter stops where its drafts stop paying, a match-based one
        proposes none where nothing matches) and how the drafter's estimates came true, for metrics."""
        return {**self.main_costs.summary(), "num_probes": self.num_probes, "num_declined_probes": self.num_declined_probes,
                "probe_wait": self.probe_wait,
                **self.guard.summary(), "batch_arms": self.arms.summary(), "fill": round(self.fill, 3),
                "draft_calibration": self.calibration.summary()}

    def remove(self, req_id: str) -> None:
        self._requests.pop(req_id, None)
