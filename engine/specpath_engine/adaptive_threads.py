"""The intra-op thread count adapted at run time to what the machine gives this process.

:mod:`specpath_engine.threads` picks a count once, when an ``LLM`` is built; the machine changes
after that. On a 2-core VM a SmolLM2 bf16 decode step at 2 threads is about twice as fast as at
1 while the machine is quiet, but beside other jobs each OpenMP region waits for whichever of its
threads the scheduler has put aside, and 1 thread can do as well or better (benchmarks/
contention.py). Only the step loop knows which, so :class:`ThreadAdapter` watches it:

- every decode-sized step (at most :data:`MAX_ROWS` target rows; prefill chunks are not
  comparable) is timed on the wall clock, and the last :data:`RECENT` times kept per row count
  and kind (whether it called a drafter: that call comes and goes with the draft governor's
  choices, and the steps with it are compared only with each other) for the current thread count;
- now and then it *probes* the other count for a few steps and compares each step with the
  median of the current count's recent steps of the same row count: a probe whose first two steps are both clearly
  slower stops at once (a quiet machine pays two slow steps), one whose median is at least
  :attr:`ThreadAdapter.win` faster makes the other count the current one;
- a change in the machine starts a probe at once: four steps in a row 1.5x slower (other jobs
  started) or faster (they stopped) than the median of their row count once the count settled
  (:data:`RECENT` steps after the last probe), so a burst of load is met within a few steps,
  not at the next scheduled probe;
- a lost scheduled probe doubles the interval to the next one (capped: 1024 steps at the larger count,
  128 at the smaller, so a machine that has gone quiet again is noticed soon), a won one resets
  it, so a steady machine is probed rarely (the cost on a quiet machine is measured in
  docs/real-models.md).

Per step it costs a ``perf_counter`` pair, a dict look-up and a ``deque.append`` (medians are
taken once a probe).

Switching threads must not change any output: it is enabled only where the logits are bitwise
the same at every thread count (:func:`thread_invariant`): bf16 (and weight-only quantised)
targets, whose native kernels split work by output row and column, never along a reduction, and
whose oneDNN fallback does the same at decode shapes (tests/engine/test_adaptive_threads.py; the
real SmolLM2 in benchmarks/thread_invariance.py). float32 models run torch's own matmul, whose
multi-row products change in the last bits with the thread count, so there the count stays as
chosen.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

MAX_ROWS = 64
"""Steps of more target rows than this (prefill chunks) are neither timed nor counted."""
RECENT = 9
"""Steps per row count kept as the current count's reference."""


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def thread_invariant(dtype: object) -> bool:
    """Whether a target of ``dtype`` gives the same logits, bit for bit, at any thread count
    here (see the module docstring): bfloat16 (also the compute dtype of quantised targets)."""
    import torch

    return dtype == torch.bfloat16


def other_count(num_threads: int, cpus: int) -> int:
    """The count to probe beside ``num_threads``: half of it (at least 1), or 2 from 1 where
    there are 2 CPUs; ``num_threads`` itself when there is nothing to compare."""
    if num_threads > 1:
        return max(1, num_threads // 2)
    return min(2, cpus)


class ThreadAdapter:
    """Keeps whichever of two thread counts makes decode steps faster (module docstring)."""

    def __init__(self, counts: tuple[int, int], *, set_threads: Callable[[int], None] | None = None,
                 get_threads: Callable[[], int] | None = None,
                 first_probe: int = 32, max_interval: int = 1024, max_interval_below: int = 128, window: int = 6,
                 win: float = 0.9, lose: float = 1.25, change: float = 1.5, changed_steps: int = 4) -> None:
        if set_threads is None or get_threads is None:
            import torch

            set_threads = set_threads or torch.set_num_threads
            get_threads = get_threads or torch.get_num_threads
        self.current, self.other = counts
        self._set = set_threads
        self._get = get_threads
        self.first_probe, self.max_interval, self.window, self.win, self.lose = (
            first_probe, max_interval, window, win, lose)
        self.max_interval_below = max_interval_below
        """The cap while at the smaller count: the machine is quiet most of the time, and a
        quiet machine run at the smaller count loses far more than a busy one probed for the
        larger (beside other jobs the two are close)."""
        self.change, self.changed_steps = change, changed_steps
        """A probe comes at once when ``changed_steps`` steps in a row are ``change`` times slower
        or faster than the settled median of their row count: other jobs started or stopped."""
        self._settled: dict[int, float] = {}
        """(rows, drafted) -> the median step once :data:`RECENT` steps ran since the last probe."""
        self._since = 0
        self._odd = 0
        self._triggered = False
        self.interval = first_probe
        self._countdown = first_probe
        self._recent: dict[int, deque[float]] = {}
        """(rows, drafted) -> the seconds of the last :data:`RECENT` such steps at the current count."""
        self._refs: dict[int, float] = {}
        """While probing: (rows, drafted) -> the median of ``_recent`` when the probe began; a median,
        like the probe's, so the rare stalled step of a busy machine drags neither (a mean
        would make a probe of the same speed look faster)."""
        self._probe: list[float] | None = None
        """While probing: each probe step's seconds over the reference of its row count."""
        self._probe_times: dict[int, deque[float]] = {}
        self._probe_steps = 0
        self.num_switches = 0
        self.num_probes = 0

    @property
    def num_threads(self) -> int:
        """The count the next step runs at."""
        return self.other if self._probe is not None else self.current

    def claim(self) -> None:
        """Before a step: the process's thread count is this adapter's again. The count is
        process-wide, and engines in one process (``specpath bench``, ``specpath demo``) take
        turns: another engine's probe may have left it at its other count, and this one would
        then run, and time, a whole stretch of steps at a count it did not choose."""
        n = self.num_threads
        if self._get() != n:
            self._set(n)

    def observe(self, rows: int, seconds: float, *, drafted: bool = False) -> None:
        """One step of ``rows`` target rows took ``seconds``; maybe change the count for the next.
        ``drafted``: the step called a drafter (its time is compared only with such steps')."""
        if rows > MAX_ROWS:
            return
        key = (rows, drafted)  # what a step's time is kept and compared under
        if self._probe is None:
            recent = self._recent.get(key)
            if recent is None:
                recent = self._recent[key] = deque(maxlen=RECENT)
            recent.append(seconds)
            self._countdown -= 1
            settled = self._settled.get(key)
            if settled is not None:
                if seconds > self.change * settled or seconds * self.change < settled:
                    self._odd += 1
                    if self._odd >= self.changed_steps:
                        self._triggered, self._countdown = True, 0
                else:
                    self._odd = 0
            self._since += 1
            if self._since == RECENT:
                self._settled = {r: _median(d) for r, d in self._recent.items()}
            if self._countdown <= 0:
                last = self.changed_steps if self._triggered else RECENT  # after a change: only the steps since
                self._refs = {r: _median(list(d)[-last:]) for r, d in self._recent.items()}
                self._probe, self._probe_times, self._probe_steps = [], {}, 0
                self.num_probes += 1
                self._set(self.other)
            return
        self._probe_steps += 1
        ref = self._refs.get(key)
        if ref is not None and ref > 0.0:
            self._probe.append(seconds / ref)
        self._probe_times.setdefault(key, deque(maxlen=RECENT)).append(seconds)
        probe, n = self._probe, len(self._probe)
        if n == 2 and min(probe) > self.lose:
            self._end(won=False)
        elif n >= self.window:
            self._end(won=_median(probe) < self.win)
        elif self._probe_steps >= 2 * self.window:  # steps the current count never ran: no verdict
            self._end(won=False)

    def _end(self, *, won: bool) -> None:
        self._probe, self._settled, self._since, self._odd = None, {}, 0, 0
        triggered, self._triggered = self._triggered, False
        if won:
            self.current, self.other = self.other, self.current
            self._recent = self._probe_times
            self.num_switches += 1
            self.interval = self.first_probe
        else:
            self._set(self.current)
            if not triggered:  # a change that did not favour the other count says nothing of the interval
                cap = self.max_interval if self.current > self.other else self.max_interval_below
                self.interval = min(cap, 2 * self.interval)
        self._countdown = self.interval

    def stats(self) -> dict[str, int]:
        """What it did: the count now, switches and probes so far."""
        return {"num_threads": self.num_threads, "num_switches": self.num_switches, "num_probes": self.num_probes}
