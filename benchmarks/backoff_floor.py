"""Is speculative decoding ever slower than plain decoding where drafting does not pay?

Issue 30's floor: with the adaptive draft-length policy, a method should run at about plain
decoding's speed where drafting loses (batch 8 on a CPU) and keep its speed-up where drafting
pays (batch 1 on code). This script builds plain decoding and each model-based method (each
``{"method": X}``, its shipped SmolLM2 drafter) on SmolLM2-135M in one process and times them in
interleaved rounds (the order rotates every round, so a busy machine hits every engine alike),
greedy, ``--tokens`` per request with EOS ignored, on the built-in workloads. Batch B sends B
consecutive items at once; batch 1 sends ``--b1-items`` items one after another. Each row prints
the median (and best) time over ``--rounds`` rounds and the speed-up against plain decoding's
median (best) in the same process, plus what the engine's guard chose.

Usage::

    python benchmarks/backoff_floor.py                       # all five methods, chat and code, b8 and b1
    python benchmarks/backoff_floor.py --methods eagle3 mtp --workloads code --batches 1
    python benchmarks/backoff_floor.py --rounds 5 --json out.json

Name the CPU and the load (printed) with any number taken from it; run it on a quiet machine:
the engines share the cores with everything else.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

METHODS = ("eagle3", "mtp", "dflash", "dspark", "draft_model")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def send(llm, items, tokens):
    """One call of ``items`` at once (completion prompts or conversations)."""
    from specpath_engine.llm import SamplingParams

    params = [SamplingParams(max_tokens=tokens, ignore_eos=True) for _ in items]
    if all(isinstance(i, str) for i in items):
        return llm.generate(list(items), params)
    return llm.chat(list(items), params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--workloads", nargs="+", default=["chat", "code"])
    ap.add_argument("--batches", nargs="+", type=int, default=[8, 1])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--b1-items", type=int, default=3)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()

    import torch

    from specpath_engine.bench.workloads import BUILTIN
    from specpath_engine.llm import LLM

    torch.manual_seed(0)
    names = ["plain", *args.methods]
    engines = {}
    for name in names:
        engines[name] = LLM(args.model, None if name == "plain" else {"method": name})
        send(engines[name], [BUILTIN["code"].items[0]], 8)  # warm up kernels
    print(f"# CPU: {cpu_name()}, {os.cpu_count()} cores; load at start: {os.getloadavg()}")
    rows = []
    for workload in args.workloads:
        items = list(BUILTIN[workload].items)
        for batch in args.batches:
            if batch == 1:
                calls = [[items[i % len(items)]] for i in range(args.b1_items)]
            else:
                calls = [[items[i % len(items)] for i in range(batch)]]
            for name in names:  # a warm-up round: the engines learn what pays here
                for c in calls:
                    send(engines[name], c, args.tokens)
            times = {n: [] for n in names}
            for r in range(args.rounds):
                order = names[r % len(names):] + names[: r % len(names)]
                for name in order:
                    start = time.perf_counter()
                    for c in calls:
                        send(engines[name], c, args.tokens)
                    times[name].append(time.perf_counter() - start)
            plain_med, plain_best = statistics.median(times["plain"]), min(times["plain"])
            for name in names:
                med, best = statistics.median(times[name]), min(times[name])
                costs = engines[name].metrics.step_costs or {}
                row = {"workload": workload, "batch": batch, "method": name, "median_s": round(med, 3),
                       "best_s": round(best, 3), "speedup_median": round(plain_med / med, 3),
                       "speedup_best": round(plain_best / best, 3),
                       "guard_backing_off": costs.get("guard_backing_off"),
                       "guard_drafting_vs_plain": costs.get("guard_drafting_vs_plain"),
                       "draft_tokens": engines[name].metrics.num_draft_tokens}
                rows.append(row)
                print(f"{workload:5s} b{batch:<2d} {name:12s} median {med:6.3f}s best {best:6.3f}s  "
                      f"x{row['speedup_median']:.3f} (best x{row['speedup_best']:.3f})  "
                      f"drafts {row['draft_tokens']:5d}  guard off={row['guard_backing_off']} "
                      f"ratio={row['guard_drafting_vs_plain']}", flush=True)
    print(f"# load at end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
