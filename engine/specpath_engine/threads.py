"""How many intra-op threads to run and how idle ones wait, chosen for the machine.

On a CPU shared with other work, OpenMP threads that busy-wait at barriers take the cores that
the thread they wait for needs: on a 2-core VM beside two other 2-thread jobs a SmolLM2 decode
step went from 0.02 s to over a second. Two choices keep generation usable there:

- the wait policy: libgomp (torch's OpenMP runtime, which the native kernels share) reads
  ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` once, when it loads with torch, so
  :func:`prefer_passive_wait` sets ``GOMP_SPINCOUNT`` to :data:`SHORT_SPIN` from
  ``specpath_engine``'s import, before torch loads, unless the user set either: idle threads
  spin a few microseconds (the gap between a decode step's parallel regions, so a quiet machine
  loses nothing: SmolLM2 bf16 2 threads 57.6 tok/s against 58.6 spinning and 25.0 with
  ``PASSIVE``), then sleep (so beside other jobs they give the cores back: 0.28 of the quiet
  speed against 0.12 with libgomp's 300,000 spins); once torch has loaded the variable is put
  back as it was (:func:`restore_environment`), so child processes inherit the user's
  environment, not ours;
- the thread count: the CPUs this process may use (affinity, cgroup quota); less the load
  already on them when idle threads spin (:func:`choose_threads`); 1 for tiny models whose
  steps lose more in barriers than they gain; ``num_threads=`` / ``--threads``, ``$SPECPATH_NUM_THREADS`` or ``$OMP_NUM_THREADS``
  override it. Unless the user fixed it, :mod:`specpath_engine.adaptive_threads` then adapts
  the count at run time where outputs do not depend on it.

Pure selection (:func:`choose_threads`, :func:`parse_threads`) is separate from reading the
machine (:func:`available_cpus`, :func:`load_average`) so it can be tested without one.
"""

from __future__ import annotations

import math
import os
import sys

import attrs

THREADS_ENV = "SPECPATH_NUM_THREADS"
"""Overrides the chosen thread count (below an explicit ``num_threads`` / ``--threads``)."""
WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
"""libgomp's wait policy; read once, when torch loads libgomp."""
SPIN_COUNT_ENV = "GOMP_SPINCOUNT"
"""libgomp's spins before a waiting thread sleeps; when set it decides how long threads spin
whatever the policy, so a user who sets it is left alone (libgomp's own default is 300000)."""
SHORT_SPIN = "1000"
"""specpath's default spin count: a few microseconds, then sleep (see the module docstring;
measured by benchmarks/contention.py's ``default`` against ``2`` (passive) and ``spin2``)."""

_STATE: dict[str, object] = {}
"""What :func:`prefer_passive_wait` found and did (``policy``, ``source``, ``restore``)."""


@attrs.frozen(kw_only=True)
class ThreadChoice:
    """A thread count and why (shown in ``specpath run``'s output)."""

    num_threads: int
    reason: str
    fixed: bool = False
    """Never adapted at run time (:mod:`specpath_engine.adaptive_threads`): the user fixed the
    count (``num_threads`` / ``--threads`` or an environment variable), or the model is small
    (one thread is its best on any machine)."""


def parse_threads(value: object, *, source: str) -> int:
    """``value`` (an int, or the text of an environment variable) as a thread count within
    :func:`specpath_engine.arguments.check_threads`' bounds, else one
    :class:`~specpath_engine.arguments.EngineArgumentError` line naming ``source``."""
    from specpath_engine.arguments import EngineArgumentError, check_threads

    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit()):
            raise EngineArgumentError(f"{source}: expected a whole number of threads, got {value[:20]!r}")
        value = int(text) if len(text) <= 30 else 10**30  # int() of thousands of digits is refused or slow
    if value is None:
        raise EngineArgumentError(f"{source}: expected a whole number of threads, got None")
    try:
        return check_threads(value)
    except EngineArgumentError as exc:
        if source == "num_threads":
            raise
        raise EngineArgumentError(str(exc).replace("num_threads:", f"{source}:", 1)) from None


def choose_threads(*, requested: object = None, env: str | None = None, env_name: str = THREADS_ENV, cpus: int,
                   load: float | None, small_model: bool = False, passive: bool = False) -> ThreadChoice:
    """The thread count for a model: ``requested`` (``num_threads=`` / ``--threads``), else
    ``env`` (the value of ``env_name``: ``$SPECPATH_NUM_THREADS``, else ``$OMP_NUM_THREADS``),
    else 1 for a small model, else the CPUs left free by ``load`` (the 1-minute load average,
    other processes' runnable threads), at least 1, when idle threads spin; when they sleep
    (``passive``) every CPU: beside two 2-thread jobs on 2 cores, SmolLM2 kept 0.73-0.78 of its
    tokens/s on 2 sleeping threads against 0.26-0.35 on 1 (docs/benchmarks.md, CPU contention),
    since the scheduler shares the cores per thread."""
    if requested is not None:
        return ThreadChoice(num_threads=parse_threads(requested, source="num_threads"), reason="requested",
                            fixed=True)
    if env is not None and env.strip():
        return ThreadChoice(num_threads=parse_threads(env, source=env_name), reason=env_name, fixed=True)
    if small_model:
        return ThreadChoice(num_threads=1, reason="small model", fixed=True)
    if passive:
        return ThreadChoice(num_threads=cpus, reason=f"{cpus} CPUs, idle threads sleep")
    if load is None or not math.isfinite(load):
        return ThreadChoice(num_threads=cpus, reason=f"{cpus} CPUs")
    free = max(1, min(cpus, math.floor(cpus - load + 0.5)))
    return ThreadChoice(num_threads=free, reason=f"load {load:.1f} on {cpus} CPUs")


def _cgroup_cpus() -> float | None:
    """The cgroup v2 CPU quota in CPUs (``cpu.max``), None without one."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def available_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


def load_average() -> float | None:
    """The 1-minute load average, None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def machine_threads(requested: object = None, *, small_model: bool = False) -> ThreadChoice:
    """:func:`choose_threads` for this machine now."""
    name = next((n for n in (THREADS_ENV, "OMP_NUM_THREADS") if os.environ.get(n, "").strip()), THREADS_ENV)
    return choose_threads(requested=requested, env=os.environ.get(name), env_name=name, cpus=available_cpus(),
                          load=load_average(), small_model=small_model, passive=sleeps())


def sleeps() -> bool:
    """Idle OpenMP threads in this process soon sleep rather than spin (PASSIVE, or specpath's
    short spin): they do not hold cores the load needs."""
    if not _STATE:
        prefer_passive_wait()
    return _STATE["policy"] in ("passive", SHORT_SPIN_POLICY)


SHORT_SPIN_POLICY = f"spin {SHORT_SPIN} times, then sleep"


def prefer_passive_wait(environ: dict | None = None, torch_loaded: bool | None = None) -> str:
    """Set ``GOMP_SPINCOUNT`` to :data:`SHORT_SPIN` unless the user set a policy or a spin count,
    or torch (and so libgomp) has already loaded; returns the policy libgomp will use, as
    :func:`wait_policy` reports it."""
    env = os.environ if environ is None else environ
    loaded = ("torch" in sys.modules) if torch_loaded is None else torch_loaded
    user, spins = env.get(WAIT_POLICY_ENV), env.get(SPIN_COUNT_ENV)
    if user:
        _STATE.update(policy=user.strip().lower(), source=WAIT_POLICY_ENV, restore=False)
    elif spins:
        _STATE.update(policy=f"spin {spins.strip()[:20]} times, then sleep", source=SPIN_COUNT_ENV, restore=False)
    elif loaded:
        _STATE.update(policy="libgomp's default (spins, then sleeps)",
                      source="torch was imported before specpath_engine", restore=False)
    else:
        env[SPIN_COUNT_ENV] = SHORT_SPIN
        _STATE.update(policy=SHORT_SPIN_POLICY, source="specpath default", restore=True, environ=env)
    return str(_STATE["policy"])


def restore_environment() -> None:
    """Once torch has loaded (libgomp has read the policy), drop the variable we set, so child
    processes get the user's environment."""
    if _STATE.get("restore") and "torch" in sys.modules:
        env = _STATE.get("environ", os.environ)
        if env.get(SPIN_COUNT_ENV) == SHORT_SPIN:
            del env[SPIN_COUNT_ENV]
        _STATE["restore"] = False


def wait_policy() -> str:
    """How idle OpenMP threads wait in this process, and who chose it: e.g. ``spin 1000 times,
    then sleep (specpath default)``."""
    if not _STATE:
        prefer_passive_wait()
    return f"{_STATE['policy']} ({_STATE['source']})"


def apply(choice: ThreadChoice) -> None:
    """Set torch's intra-op threads (shared with the native kernels' OpenMP regions)."""
    import torch

    restore_environment()
    if torch.get_num_threads() != choice.num_threads:
        torch.set_num_threads(choice.num_threads)
