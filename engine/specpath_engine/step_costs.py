"""What a step costs, measured while the engine runs: the target's pass and the drafter's call.

The adaptive draft length (:mod:`specpath_engine.draft_governor`) weighs expected tokens against
time, so it needs the time of a step as a function of what the step holds. Two small linear
models, fitted online from one wall-clock pair per part and step (never anything per token):

- the target step (its pass, verification and bookkeeping) over :data:`TARGET_FEATURES`: a
  constant, the scheduled requests, the draft rows and the prefill rows beyond one per request
  (prefill is compute-bound, draft rows nearly free: they get separate coefficients), and where
  the target multiplies its rows in blocks (``row_block``: AMX tiles take 16 rows per pass at the
  cost of one) the blocks beyond the first: a row that opens a block costs a pass over every
  weight, the next fifteen little (SmolLM2 bf16, 8 requests: 8 and 16 rows 26.8 and 30.0 ms a
  step, 24 rows 42.8 ms), a step no straight line through the rows fits;
- the drafter's call over :data:`DRAFT_FEATURES`: a constant, the drafting requests, the passes
  (the longest draft for one-token-a-pass drafters, 1 for ``drafts_in_one_pass``), the draft
  tokens and the positions handed over (a request back from a back-off catches up on all of its).

Each model is exponentially forgotten least squares (about the last ``1 / (1 - FORGET)`` steps
count), regularised toward a prior: today's static model (``VERIFY_COST`` per row,
``CALL_COST`` per call, ``draft_pass_cost`` per pass, all in plain steps) times a scale fitted
with the rest. Each fit has one more regressor, the static model's prediction in plain steps,
whose coefficient (the scale, seconds per plain step) is nearly free, while the per-feature
coefficients (corrections to the static shape, in seconds) are drawn toward zero. So the
directions a workload never varies (the requests at batch 1, the draft rows where every step
drafts K) keep the static model's shape at the measured scale instead of drifting, and before
the first timed step the costs are the static model's in plain steps, which is all a ratio of
tokens to time needs: the engine starts out choosing what the static model chose. The drafter's
scale is drawn toward the target's until the drafter has been timed.

A stalled step (a busy machine) is an outlier: its residual is clipped to a few running residual
scales, so one stall barely moves a fit; a second outlier on the same side in a row is a change
of costs, not a stall: it counts in full and the past is discounted (:data:`SHIFT_KEEP`), so the
fit follows within a few steps. The next observation confirms the change or takes it back: one
that the fit before the change expects (within its clip) and the changed fit does not says the
two were a longer stall, and the fit returns to where it was. (Two drafter calls stalled 50x in a
row once priced every draft out, so the drafter was never timed again: SmolLM2 EAGLE-3 on chat,
372 of 384 steps backed off for the rest of the engine's life.)

A configured ``draft_pass_cost`` pins the drafter: its cost is that fraction of the measured
plain step per pass (plus the call), and drafter timings are not fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import math

VERIFY_COST = 0.02
"""Static prior: target cost of one more query row, relative to a plain single-request step
(decode is memory-bound: the weights are read once whatever the rows)."""

CALL_COST = 0.03
"""Static prior: fixed cost of a drafting step (the drafter's call, the verification set-up)."""

PREFILL_ROW_COST = 0.1
"""Static prior: cost of a prefill row (compute-bound, unlike a decode step's rows), relative to
a plain step; a drafter's, relative to its pass."""

ROW_BLOCK_COST = 0.3
"""Static prior: cost of a further block of rows (a further pass over the weights where the
target multiplies rows in blocks), relative to a plain single-request step."""

TARGET_FEATURES = ("step", "requests", "draft_rows", "prefill_rows", "row_blocks")
DRAFT_FEATURES = ("call", "requests", "passes", "tokens", "positions")

FORGET = 0.95
"""Weight of past observations after each new one."""

PRIOR_WEIGHT = 0.03
"""How strongly each correction to the static shape is drawn to zero (pseudo-observations of a
unit feature: features are counts)."""

SCALE_WEIGHT = 1e-5
"""How strongly a fit's scale is drawn to its prior (barely: the data set it)."""

CLIP = 3.0
"""Residuals beyond this many running scales are clipped (a stalled step)."""

SCALE_RATE = 0.25
"""How fast the running residual scale follows; it follows residuals up to :data:`SCALE_CAP` scales."""

SCALE_CAP = 4.0

COLD_CALLS = 2
"""The first target steps and drafter calls are not fitted: they set things up (allocations,
lazily built kernels) and say nothing of the steps after."""

SHIFT_KEEP = 0.02
"""Weight the past keeps when two outliers in a row say the costs changed."""

SOLVE_EVERY = 4
"""Past the first :data:`SOLVE_FIRST` observations the coefficients are solved again every this
many: a step's observation barely moves a fit of the last twenty (a stall's, clipped, still
less), and the solve is most of the per-step work."""

SOLVE_FIRST = 8
"""Observations solved after each, at first and after a change of costs."""

class OnlineFit:
    """Forgetting least squares over a few features, regularised toward ``prior``, robust to stalls.

    ``coefficients`` solves ``(A + W) theta = b + W prior`` where ``A``, ``b`` are the decayed
    sums of ``x x^T`` and ``x y`` and ``W`` the diagonal of ``weights``, each counted per unit of
    its feature's typical size (``A``'s diagonal over the decayed count), so a correction is drawn
    to zero by what it adds to a typical step, whatever the feature counts (rows or requests).

    Plain Python floats, not numpy: the fit runs right after the target's pass, with the caches
    cold, where numpy's first calls cost ~90 us a step against ~10 us warm (SmolLM2 bf16, AMD
    EPYC; a 6-feature fit needs no vector unit).
    """

    def __init__(self, prior: Sequence[float], weights: Sequence[float], *, forget: float = FORGET) -> None:
        n = len(prior)
        self.prior = [float(v) for v in prior]
        self.weights = [float(v) for v in weights]
        """How strongly each coefficient is drawn to its prior mean (pseudo-observations)."""
        self.forget = forget
        self._a = [[0.0] * n for _ in range(n)]  # [n, n] decayed sum of x x^T
        self._b = [0.0] * n  # [n] decayed sum of x y
        self._theta: list[float] | None = list(self.prior)
        self.scale = 0.0
        """Running scale of the residuals (in the fit's unit of time)."""
        self.count = 0
        """Observations so far."""
        self._last_outlier = 0
        """Side of the last observation's outlier (+1 above, -1 below, 0: it was none)."""
        self._n = 0.0
        """Decayed count of observations."""
        self._solve_until = SOLVE_FIRST
        """Solved after every observation up to this count (the first ones, and after a change)."""
        self._before_change: tuple | None = None
        """The fit as it was before the last change of costs (sums, count, scale, coefficients),
        until the next observation confirms the change or takes it back."""

    def rescale(self, factor: float) -> None:
        """Measure time in units ``1 / factor`` as large (the data and residual scale follow)."""
        self._b = [v * factor for v in self._b]
        self.scale *= factor
        self._theta = None
        if self._before_change is not None:
            a, b, n, scale, theta = self._before_change
            self._before_change = (a, [v * factor for v in b], n, scale * factor, [v * factor for v in theta])

    def set_prior(self, prior: Sequence[float]) -> None:
        self.prior = [float(v) for v in prior]
        self._theta = None

    @property
    def coefficients(self) -> list[float]:
        if self._theta is None:
            n, a = max(self._n, 1e-12), self._a
            w = [wt * max(1.0, a[i][i] / n) for i, wt in enumerate(self.weights)]
            m = [[v + (w[i] if i == j else 0.0) for j, v in enumerate(row)] for i, row in enumerate(a)]
            theta = _solve_spd(m, [b + wi * p for b, wi, p in zip(self._b, w, self.prior)])
            self._theta = theta if theta is not None and all(map(math.isfinite, theta)) else list(self.prior)
        return self._theta

    def predict(self, x: Sequence[float]) -> float:
        return sum(t * v for t, v in zip(self.coefficients, x))

    def add(self, x: Sequence[float], y: float) -> None:
        """One observation: features ``x``, time ``y``; its residual is clipped (see the module)."""
        guess = self.predict(x)
        if self._before_change is not None:  # this one confirms the last change of costs or takes it back
            a, b, n, scale, theta = self._before_change
            self._before_change = None
            before = sum(t * v for t, v in zip(theta, x))
            if abs(y - before) <= CLIP * max(scale, 0.02 * abs(before)) < abs(y - guess):
                self._a, self._b, self._n, self.scale, self._theta = a, b, n, scale, None
                self._last_outlier = 0
                guess = self.predict(x)
        r = y - guess
        scale = max(self.scale, 0.02 * abs(guess))
        f = self.forget
        if not self.count:
            self.scale = abs(r) / 2
        elif abs(r) <= CLIP * scale:
            self._last_outlier = 0
            self.scale = scale + SCALE_RATE * (abs(r) - scale)
        elif self._last_outlier == (side := 1 if r > 0 else -1):  # twice in a row: the costs changed
            self._before_change = ([list(row) for row in self._a], list(self._b), self._n, self.scale,
                                   list(self.coefficients))
            self._last_outlier = 0
            self.scale = abs(r) / CLIP
            f *= SHIFT_KEEP
            self._solve_until = self.count + SOLVE_FIRST
        else:  # a stall, as far as one step tells
            self._last_outlier = side
            self.scale = scale + SCALE_RATE * (min(abs(r), SCALE_CAP * scale) - scale)
            y = guess + side * CLIP * scale
        v = [float(t) for t in x]
        self._a = [[f * aij + vi * vj for aij, vj in zip(row, v)] for row, vi in zip(self._a, v)]
        self._b = [f * bi + vi * y for bi, vi in zip(self._b, v)]
        self._n = f * self._n + 1
        self.count += 1
        if self.count <= self._solve_until or self.count % SOLVE_EVERY == 0:
            self._theta = None  # (an outlier counts clipped: it need not be solved at once; a change does, above)


def _solve_spd(m: list[list[float]], rhs: list[float]) -> list[float] | None:
    """``m^-1 rhs`` for a symmetric positive definite ``m`` (Cholesky); None where it is not."""
    n = len(rhs)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = m[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            if i == j:
                if not s > 0.0:
                    return None
                low[i][i] = math.sqrt(s)
            else:
                low[i][j] = s / low[j][j]
    z = [0.0] * n
    for i in range(n):
        z[i] = (rhs[i] - sum(low[i][k] * z[k] for k in range(i))) / low[i][i]
    out = [0.0] * n
    for i in reversed(range(n)):
        out[i] = (z[i] - sum(low[k][i] * out[k] for k in range(i + 1, n))) / low[i][i]
    return out


class StepCosts:
    """The measured cost model of one engine: target and drafter fits, in seconds (in plain
    steps until the first step is timed).

    ``pass_cost``: the static cost of a drafter pass relative to a plain step (the prior's, or
    the pinned cost where ``pinned``); ``one_pass``: the drafter drafts all K in one pass.
    """

    def __init__(self, pass_cost: float, *, one_pass: bool = False, pinned: bool = False, row_block: int = 0) -> None:
        self.pass_cost = pass_cost
        self.one_pass = one_pass
        self.pinned = pinned
        self.row_block = row_block
        """Rows the target multiplies per pass over its weights (0: no blocks, each row alike)."""
        self.target_shape = (1 - VERIFY_COST, VERIFY_COST, VERIFY_COST, PREFILL_ROW_COST,
                             ROW_BLOCK_COST if row_block else 0.0)
        """The static model of :data:`TARGET_FEATURES`, in plain steps."""
        self.drafter_shape = (CALL_COST, 0.0, pass_cost, 0.0, PREFILL_ROW_COST * pass_cost)
        """The static model of :data:`DRAFT_FEATURES`, in plain steps."""
        w = PRIOR_WEIGHT
        self.target = OnlineFit([1.0] + [0.0] * 5, [SCALE_WEIGHT] + [w] * 5)
        self.drafter = OnlineFit([1.0] + [0.0] * 5, [SCALE_WEIGHT] + [w] * 5)
        self._steps = self._calls = 0
        self._target_from = self._drafter_from = None  # (the fit's coefficients, unit) the cached costs are from
        self._target: list[float] = []
        self._drafter: list[float] = []
        self.unit = 0.0
        """Seconds per unit of the fits: about a plain step, re-anchored as the target's scale
        moves (so the corrections are drawn to zero in plain steps); 0 until a step is timed."""

    @staticmethod
    def _with_shape(shape: Sequence[float], x: Sequence[float]) -> list[float]:
        return [sum(s * v for s, v in zip(shape, x)), *x]

    @staticmethod
    def _effective(shape: Sequence[float], theta: Sequence[float]) -> list[float]:
        return [max(0.0, theta[0] * s + d) for s, d in zip(shape, theta[1:])]

    def blocks(self, rows: int) -> int:
        """Row blocks beyond the first for a step of ``rows`` query rows (0 without blocks)."""
        g = self.row_block
        return (rows - 1) // g if g and rows > 0 else 0

    def plain_step(self, num_requests: int) -> float:
        """Seconds of a plain decode step of ``num_requests`` as the target's fit has it now."""
        t = self.target_coefficients
        return t[0] + t[1] * num_requests + t[4] * self.blocks(num_requests)

    def observe_target(self, x: Sequence[float], seconds: float) -> None:
        """A timed target step with the first four :data:`TARGET_FEATURES` ``x`` (constant,
        requests, draft rows, prefill rows beyond one per request); its row blocks follow."""
        if seconds <= 0:
            return
        self._steps += 1
        if self._steps <= COLD_CALLS:
            return
        z = self._with_shape(self.target_shape, (*x[:4], self.blocks(int(x[1] + x[2] + x[3]))))
        if not self.unit:
            self.unit = seconds / z[0]
        self.target.add(z, seconds / self.unit)
        scale = self.target.coefficients[0]
        if not 0.8 < scale < 1.25 and scale > 0:  # re-anchor the unit at the measured plain step
            self.unit *= scale
            self.target.rescale(1 / scale)
            self.drafter.rescale(1 / scale)
        scale = self.target.coefficients[0]
        if abs(self.drafter.prior[0] - scale) > 0.01 * scale:  # the drafter's prior: at the target's scale
            self.drafter.set_prior([scale] + [0.0] * 5)

    def observe_drafter(self, x: Sequence[float] | None, seconds: float) -> None:
        """A timed drafter call with :data:`DRAFT_FEATURES` ``x`` (ignored while pinned; the
        first :data:`COLD_CALLS` set things up); None: not called this step."""
        if self.pinned or not self.unit:
            return
        if x is None:
            return
        if seconds > 0 and x[1]:  # calls that only ingest (prefill) draft nothing: not what is chosen
            self._calls += 1
            if self._calls > COLD_CALLS:
                self.drafter.add(self._with_shape(self.drafter_shape, x), seconds / self.unit)

    @property
    def drafter_timed(self) -> bool:
        """Whether the drafter's costs rest on a timed call (or are pinned): until then they are
        the byte prior's guess, which the governor must not trust to price every draft out."""
        return self.pinned or self.drafter.count > 0

    @property
    def target_coefficients(self) -> list[float]:
        """Seconds (plain steps before any timing) per :data:`TARGET_FEATURES`, each >= 0."""
        theta = self.target.coefficients
        if (theta, self.unit) != self._target_from:
            self._target_from = (theta, self.unit)
            self._target = [v * (self.unit or 1.0) for v in self._effective(self.target_shape, theta)]
        return self._target

    @property
    def drafter_coefficients(self) -> list[float]:
        """Seconds per :data:`DRAFT_FEATURES`, each >= 0; where pinned, the static model at the
        target's measured plain step."""
        if self.pinned:
            t = self.target_coefficients
            return [(t[0] + t[1]) * s for s in self.drafter_shape]
        theta = self.drafter.coefficients
        if (theta, self.unit) != self._drafter_from:
            self._drafter_from = (theta, self.unit)
            self._drafter = [v * (self.unit or 1.0) for v in self._effective(self.drafter_shape, theta)]
        return self._drafter

    def summary(self) -> dict[str, float | int | bool | None]:
        """The fitted costs (what ``LLM`` metrics and ``specpath run --json`` show): a plain
        single-request step in ms, and the rest as fractions of it."""
        t, d = self.target_coefficients, self.drafter_coefficients
        plain = t[0] + t[1]
        unit = plain if plain > 0 else 1.0
        return {
            "plain_step_ms": round(1000 * plain, 3) if self.unit else None,
            "per_request": round(t[1] / unit, 4),
            "per_row": round(t[2] / unit, 4),
            "per_prefill_row": round(t[3] / unit, 4),
            "per_row_block": round(t[4] / unit, 4) if self.row_block else None,
            "drafter_call": round(d[0] / unit, 4),
            "per_drafting_request": round(d[1] / unit, 4),
            "per_pass": round(d[2] / unit, 4),
            "per_draft_token": round(d[3] / unit, 4),
            "per_position": round(d[4] / unit, 4),
            "target_steps": self.target.count,
            "drafter_calls": self.drafter.count,
            "pinned_pass_cost": self.pass_cost if self.pinned else None,
        }


Clock = Callable[[], float]
