"""What run-time thread adaptation costs on a quiet machine (``specpath_engine.adaptive_threads``).

One engine per method, its generations alternating between the adapter (kept across calls, as an
``LLM`` keeps it) and the count fixed at what it starts from, so both sides see the machine
alike; printed: median tokens/s of each, their ratio, the adapter's probes and switches, and the
load average::

    python benchmarks/thread_adaptation_cost.py --model smollm2-135m --methods plain,suffix --max-tokens 256

Run it alone (nothing else measuring on the machine): on a busy machine the
adapter is meant to differ.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

PROMPT = "def quicksort(items):\n    \"\"\"Sort a list of numbers with quicksort.\"\"\"\n"


def measure(model: str, method: str, max_tokens: int, rounds: int) -> str:
    import torch

    from specpath_engine.llm import LLM, SamplingParams

    config = None if method == "plain" else {"method": method, "num_speculative_tokens": 4}
    llm = LLM(model, config)
    adapter = llm.engine.thread_adapter
    if adapter is None:
        return f"{method}: the thread count does not adapt here ({llm.threads.reason}, {llm.engine_config.model_config.dtype})"
    fixed_count = adapter.current
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    llm.generate([PROMPT], params)  # warm-up (suffix's tree then holds the reply, on both sides alike)
    speeds: dict[str, list[float]] = {"adaptive": [], "fixed": []}
    for r in range(rounds):
        for side in (("adaptive", "fixed") if r % 2 == 0 else ("fixed", "adaptive")):
            llm.engine.thread_adapter = adapter if side == "adaptive" else None
            torch.set_num_threads(adapter.num_threads if side == "adaptive" else fixed_count)
            start = time.perf_counter()
            n = len(llm.generate([PROMPT], params)[0].token_ids)
            speeds[side].append(n / (time.perf_counter() - start))
    a, f = statistics.median(speeds["adaptive"]), statistics.median(speeds["fixed"])
    s = adapter.stats()
    return (f"{model} {method:<7} adaptive {a:6.1f} tok/s, fixed at {fixed_count} {f:6.1f} tok/s: ratio {a / f:.3f} "
            f"(rounds: adaptive {', '.join(f'{x:.1f}' for x in speeds['adaptive'])}; fixed "
            f"{', '.join(f'{x:.1f}' for x in speeds['fixed'])}); {s['num_probes']} probes, {s['num_switches']} switches, "
            f"now {s['num_threads']}; load {os.getloadavg()[0]:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--methods", default="plain,suffix")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"{cpu}, {os.cpu_count()} CPUs; {args.max_tokens} tokens, greedy, batch 1, median of {args.rounds} rounds; "
          f"load average at start {os.getloadavg()[0]:.2f}", flush=True)
    for method in args.methods.split(","):
        print(measure(args.model, method, args.max_tokens, args.rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
