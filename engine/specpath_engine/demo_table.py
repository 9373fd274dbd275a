"""``specpath demo``'s table: what its numbers may claim, as pure functions (no timing here).

A speculative method cannot beat the baseline by more than it saves target passes: every pass
verifies at least one token and costs at least one decode step, so its tokens/s is at most
(tokens per target pass, its own) / (the baseline's) times the baseline's. On a busy machine a
baseline prompt stalled by other jobs makes every other row look faster than that; such a row
is flagged instead of printed as a result. Engines take turns in a rotating order
(:func:`rotation`), so none is always first or last after another one's burst of work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PLAUSIBLE_SLACK = 1.15
"""A speedup up to this much above the passes-saved bound passes as timing noise."""

WORTH_DEFAULT = 1.10
"""A drafter whose best prompt does not reach this speedup is not a default for the target: its
gain is within a busy machine's noise, and the adaptive draft length only keeps it near 1.0x."""


def rotation(names: Sequence[str], turn: int) -> list[str]:
    """``names`` starting at ``turn`` (mod their count): over ``len(names)`` turns each engine
    runs once in every place."""
    if not names:
        return []
    k = turn % len(names)
    return [*names[k:], *names[:k]]


def tokens_per_pass(tokens: int, passes: int) -> float:
    """Tokens emitted per target forward pass over the whole reply (prefill's pass included):
    unlike τ it counts the steps without drafts too."""
    return tokens / passes if passes else 0.0


def speedup_bound(row: dict, baseline: dict) -> float:
    """The most speedup ``row`` could show: its tokens per target pass over the baseline's."""
    base = tokens_per_pass(baseline["tokens"], baseline["target_steps"])
    return tokens_per_pass(row["tokens"], row["target_steps"]) / base if base else 0.0


def implausible(row: dict, baseline: dict, slack: float = PLAUSIBLE_SLACK) -> bool:
    """The row's speedup exceeds what its target passes allow (timing noise, not a result)."""
    return row is not baseline and row["speedup"] > slack * speedup_bound(row, baseline)


def spread(values: Sequence[float]) -> tuple[float, float] | None:
    """(lowest, highest), None for fewer than two values."""
    return (min(values), max(values)) if len(values) > 1 else None


def kind(config_class: Any) -> str:
    """What drafts, from the method's capability flags: ``model-free``, ``draft model``, with
    ``example plugin`` for the template's teaching method."""
    if config_class is None:
        return "-"
    what = "model-free" if config_class.model_free else "draft model"
    return f"example plugin, {what}" if getattr(config_class, "example_plugin", False) else what


def shown_on(config_class: Any, device: str) -> bool:
    """False for a method built for an accelerator when the demo runs on ``device`` "cpu"
    (there it would only repeat its host twin's numbers)."""
    return not (device == "cpu" and getattr(config_class, "accelerator_only", False))


def sort_rows(rows: Sequence[dict]) -> list[dict]:
    """Fastest first (tokens/s), the baseline where its speed puts it."""
    return sorted(rows, key=lambda r: -r["tokens_per_s"])


def fastest(rows: Sequence[dict], baseline: dict) -> dict | None:
    """The fastest row whose speedup is plausible (None when no method beats the baseline)."""
    ok = [r for r in rows if r is not baseline and not implausible(r, baseline) and r["speedup"] > 1.0]
    return max(ok, key=lambda r: r["tokens_per_s"]) if ok else None


def speedup_cell(row: dict, baseline: dict) -> str:
    """``1.42x``, its range over the prompt rounds (each prompt through every engine once, the
    speedup against the baseline's run of that prompt), ``!`` when implausible."""
    if row is baseline:
        return "1.00x"
    cell = f"{row['speedup']:.2f}x"
    low_high = spread(row.get("turn_speedups") or [])
    if low_high is not None:
        cell += f" ({low_high[0]:.2f}-{low_high[1]:.2f})"
    return cell + (" !" if implausible(row, baseline) else "")


def passes_cell(row: dict, baseline: dict) -> str:
    """``312 (-49%)``: the row's target passes and how many fewer than the baseline's."""
    if row is baseline or not baseline["target_steps"]:
        return str(row["target_steps"])
    change = row["target_steps"] / baseline["target_steps"] - 1
    return f"{row['target_steps']} ({change:+.0%})"


def best_prompt(row: dict) -> float:
    """The row's best speedup over its prompts (its overall speedup where none were kept)."""
    return max(row.get("turn_speedups") or [row["speedup"]])


def summary_lines(rows: Sequence[dict], baseline: dict) -> list[str]:
    """Which method is fastest, and a line per flagged row saying what its passes allow."""
    lines = []
    best = fastest(rows, baseline)
    if best is None:
        lines.append("fastest: no method beat the baseline here")
    else:
        lines.append(f"fastest: {best['method']} ({best['speedup']:.2f}x the baseline, "
                     f"{best['tokens_per_s']:.1f} tok/s)")
    weak = [r for r in rows if r is not baseline and "draft model" in r.get("kind", "")
            and best_prompt(r) < WORTH_DEFAULT]
    if weak:
        named = ", ".join(f"{r['method']} (best prompt {best_prompt(r):.2f}x)" for r in weak)
        lines.append(f"not a default for this target: {named}: below {WORTH_DEFAULT:.2f}x on every prompt, "
                     "their drafters do not pay here (the adaptive draft length backs them off to plain decoding); "
                     "train one for it with `specpath train` or use a method above")
    for r in rows:
        if implausible(r, baseline):
            lines.append(f"! {r['method']}: {r['speedup']:.2f}x is more than its target passes allow "
                         f"(at most {speedup_bound(r, baseline):.2f}x: {r['target_steps']} passes against the "
                         f"baseline's {baseline['target_steps']}): the timing was disturbed (load), rerun it")
    return lines
