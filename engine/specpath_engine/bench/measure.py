"""Measuring methods side by side: every engine runs every batch of a workload in one process,
round after round, with the engines' order rotated each round so none is penalised for its
place (a machine that gets busier mid-round hurts a different engine each time).

One row per (workload, batch size, temperature, method), against the baseline of the same
round: speedups are ratios of tokens/s measured minutes apart at most, and the row keeps every
round's ratio (the spread) beside the median.

Two ways to interleave (``interleave``). ``"step"`` (the default): every engine runs the same
batch at once, one engine step each in turn, and an engine's time is the sum of its own steps, so
a burst of another job's work lands on every engine alike; a batch of 8 takes ~4 s, and timed one
engine after another (``"batch"``), plain against plain read 0.90-1.07x a round on a 2-vCPU VM.
``"batch"``: each engine runs the whole batch in turn, the baseline several times among the others
(:data:`REFERENCE_EVERY`), its median the reference. Each round starts with every drafter's memory
of finished responses dropped
(``BaseSpeculator.forget_responses``): a workload's prompts come back in every round and setting,
and suffix decoding's global tree would otherwise draft their earlier answers (its batch-1
greedy rounds read 1.35x then 3.24x before this).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from specpath_engine.bench.workloads import Item, Workload, batches
from specpath_engine.harness import forget_responses

BASELINE = "baseline"

REFERENCE_EVERY = 3
"""Within a round the baseline runs each batch again after every this many other engines (and
last), and its time for the batch is the median of its runs: timed once, a burst of another job's
work during that one run tilts every row of the round alike (seen on a 2-vCPU VM: all seven
methods 0.54-0.64x in one round of everyday chat at batch 8, 0.81-0.87x in the other)."""

PLAUSIBLE_SLACK = 1.25
"""A speculative step costs at least a plain step, so a method's speedup cannot exceed its target
passes saved (tokens per target pass over the baseline's) by much; more than this factor means
the machine's load changed between engines, and the row is flagged."""


@attrs.frozen(kw_only=True)
class Setting:
    """One cell of the benchmark grid."""

    workload: Workload
    batch_size: int
    """Concurrent requests in one ``generate`` call (1: the latency setting)."""
    temperature: float
    max_tokens: int
    ignore_eos: bool = True
    """Every reply is ``max_tokens`` long, so tokens/s compare like with like."""
    seed: int = 0
    """Request ``i`` of a batch samples with ``seed + i`` in every engine."""


def build_engines(runs: Sequence[tuple[str, Mapping | None]], *, model: str | None, engine_kwargs: Mapping[str, Any],
                  progress: Callable[[str], None]) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, str]]]:
    """``([(label, config, llm)], [(label, reason)])``: one warmed-up ``LLM`` per run (the
    baseline, run ``None``, must build; another that fails is reported and skipped)."""
    from specpath_engine.harness import WARM_UP_PROMPT
    from specpath_engine.llm import LLM, SamplingParams

    engines, skipped = [], []
    for label, config in runs:
        progress(f"loading {label}")
        try:
            llm = LLM(model, None if config is None else dict(config), **engine_kwargs)
            llm.generate([WARM_UP_PROMPT], SamplingParams(max_tokens=8, ignore_eos=True))
            engines.append((label, config, llm))
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the others
            if config is None:
                raise
            skipped.append((label, " ".join(str(exc).split()) or type(exc).__name__))
    return engines, skipped


def _params(setting: Setting, n: int) -> list[Any]:
    from specpath_engine.llm import SamplingParams

    return [SamplingParams(max_tokens=setting.max_tokens, temperature=setting.temperature,
                           seed=setting.seed + i if setting.temperature > 0 else None,
                           ignore_eos=setting.ignore_eos) for i in range(n)]


def run_batch(llm: Any, items: Sequence[Item], setting: Setting) -> tuple[list[Any], float]:
    """(outputs in item order, wall seconds) for one batch of concurrent requests."""
    params = _params(setting, len(items))
    prompts = [(i, it) for i, it in enumerate(items) if isinstance(it, str)]
    chats = [(i, it) for i, it in enumerate(items) if not isinstance(it, str)]
    outputs: list[Any] = [None] * len(items)
    start = time.perf_counter()
    if prompts:
        for (i, _), out in zip(prompts, llm.generate([p for _, p in prompts], [params[i] for i, _ in prompts])):
            outputs[i] = out
    if chats:
        for (i, _), out in zip(chats, llm.chat([c for _, c in chats], [params[i] for i, _ in chats])):
            outputs[i] = out
    return outputs, time.perf_counter() - start


def _token_lists(llm: Any, items: Sequence[Item]) -> list[list[int]]:
    """The token ids ``run_batch`` would generate from: prompts as they are, chats rendered."""
    texts = [it if isinstance(it, str) else llm.chat_prompts(it)[0] for it in items]
    return llm.encode_prompts(texts)


def run_lockstep(engines: Sequence[tuple[str, Any, Any]], items: Sequence[Item], setting: Setting,
                 done: Callable[[str], None] = lambda name: None) -> dict[str, tuple[list[Any], float]]:
    """``{name: (outputs in item order, seconds)}``: every engine runs ``items`` as one batch of
    concurrent requests, the engines taking one step each in turn (``engines``' order), and an
    engine's seconds are the sum of its own steps (what it took, whatever ran between them);
    ``done(name)`` as each engine finishes."""
    from types import SimpleNamespace

    params = _params(setting, len(items))
    running = {name: llm.engine.stream(_token_lists(llm, items), params) for name, _, llm in engines}
    seconds = dict.fromkeys(running, 0.0)
    last: dict[str, list[Any]] = {}
    while running:
        for name in list(running):
            start = time.perf_counter()
            try:
                last[name] = next(running[name])
            except StopIteration:
                del running[name]
                done(name)
            seconds[name] += time.perf_counter() - start
    return {name: ([SimpleNamespace(metrics=r.metrics, token_ids=list(r.output_token_ids)) for r in last[name]],
                   seconds[name]) for name, _, _ in engines}


def measure(engines: Sequence[tuple[str, Any, Any]], setting: Setting, *, repeats: int,
            progress: Callable[[str], None], interleave: str = "step") -> list[dict]:
    """Rows (see the module docstring) for one setting."""
    if interleave not in ("step", "batch"):
        raise ValueError(f"interleave: 'step' or 'batch', got {interleave!r}")
    from specpath_engine.metrics import SpecMetrics

    groups = batches(setting.workload, setting.batch_size)
    names = [name for name, _, _ in engines]
    # rounds[name][r] = {"metrics": [per request], "seconds": [per batch], "tokens": [per request]}
    rounds: dict[str, list[dict]] = {name: [] for name in names}
    loads: list[float] = []
    for r in range(repeats):
        order = list(engines[r % len(engines):]) + list(engines[: r % len(engines)])
        this = {name: {"metrics": [], "seconds": [], "tokens": []} for name in names}
        loads.append(_load())
        forget_responses(llm for _, _, llm in engines)  # (an earlier round or setting saw these prompts)
        for items in groups:  # batch-major: each batch runs through every engine before the next
            if interleave == "step":
                for name, (outs, seconds) in run_lockstep(order, items, setting, done=progress).items():
                    this[name]["seconds"].append(seconds)
                    this[name]["metrics"].extend(o.metrics for o in outs)
                    this[name]["tokens"].extend(o.token_ids for o in outs)
                continue
            reference: list[float] = []
            for name, _, llm in _with_references(order, engines[0]):
                progress(name)
                outs, seconds = run_batch(llm, items, setting)
                if name == names[0]:
                    reference.append(seconds)
                    if len(reference) > 1:  # a re-run: its time only (same tokens)
                        continue
                this[name]["seconds"].append(seconds)
                this[name]["metrics"].extend(o.metrics for o in outs)
                this[name]["tokens"].extend(o.token_ids for o in outs)
            this[names[0]]["seconds"][-1] = statistics.median(reference)
        for name in names:
            rounds[name].append(this[name])

    def total(rnd: dict) -> Any:
        return SpecMetrics.total(rnd["metrics"], elapsed_s=sum(rnd["seconds"]))

    base = rounds[names[0]]
    base_totals = [total(r) for r in base]
    base_passes = _tokens_per_pass(base_totals[-1])
    rows = []
    for name, config, llm in engines:
        totals = [total(r) for r in rounds[name]]
        last = totals[-1]
        speedups = [t.tokens_per_s / b.tokens_per_s if b.tokens_per_s else 0.0 for t, b in zip(totals, base_totals)]
        passes = _tokens_per_pass(last)
        speedup = statistics.median(speedups)
        greedy = setting.temperature == 0
        same = sum(a == b for a, b in zip(rounds[name][-1]["tokens"], base[-1]["tokens"]))
        rows.append({
            "workload": setting.workload.name,
            "batch_size": setting.batch_size,
            "temperature": setting.temperature,
            "method": name,
            "config": None if config is None else dict(config),
            "tokens_per_s": statistics.median(t.tokens_per_s for t in totals),
            "speedup": speedup,
            "speedups": speedups,
            "mean_acceptance_length": last.mean_acceptance_length if config is not None else 1.0,
            "acceptance_rate_by_position": last.acceptance_rate_by_position,
            "tokens_per_target_pass": passes,
            "target_passes": last.num_steps,
            "num_backoff_steps": last.num_backoff_steps,
            "step_costs": llm.metrics.step_costs,
            "plausible": speedup <= PLAUSIBLE_SLACK * passes / base_passes if base_passes else True,
            "greedy_identical": (all(r["tokens"] == b["tokens"] for r, b in zip(rounds[name], base))
                                 if greedy else None),
            "identical_requests": same if greedy else None,
            "num_requests": len(rounds[name][-1]["tokens"]),
            "per_batch_speedup": _per_batch(rounds[name], base),
            "load_per_core": loads,
        })
    return rows


def runs_per_batch(num_engines: int, interleave: str = "step") -> int:
    """``generate`` calls a batch takes in one round (the baseline's re-runs included)."""
    if interleave == "step":
        return num_engines
    others = num_engines - 1
    return num_engines + -(-others // REFERENCE_EVERY) if others > 0 else num_engines


def _with_references(order: Sequence[tuple[str, Any, Any]], reference: tuple[str, Any, Any]) -> list[tuple[str, Any, Any]]:
    """``order`` with the reference engine first, again after every :data:`REFERENCE_EVERY` others,
    and last (B o o o B o o o B o B for seven others)."""
    others = [e for e in order if e[0] != reference[0]]
    out = [reference]
    for i, engine in enumerate(others, 1):
        out.append(engine)
        if i % REFERENCE_EVERY == 0 or i == len(others):
            out.append(reference)
    return out


def _tokens_per_pass(m: Any) -> float:
    """Generated tokens over target passes for whole replies (a plain decoder's is 1)."""
    return m.num_generated_tokens / m.num_steps if m.num_steps else 0.0


def _per_batch(rounds: list[dict], base: list[dict]) -> list[float]:
    """Per batch (a prompt at batch 1), the median over rounds of baseline seconds / these seconds."""
    count = len(rounds[0]["seconds"])
    return [statistics.median(b["seconds"][i] / r["seconds"][i] if r["seconds"][i] else 0.0
                              for r, b in zip(rounds, base)) for i in range(count)]


def _load() -> float:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0
