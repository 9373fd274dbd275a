"""DFlash and DSpark against EAGLE-3 at equal K and against plain decoding, in one run.

Workload and table: the benchmark harness (:mod:`specpath_engine.harness`), with drafts
verified per step beside τ, acceptance by draft position, tokens/s, speedup (medians over
interleaved rounds), per-prompt tokens/s and greedy identity.

    python3 benchmarks/block_drafters.py [--k 4] [--max-tokens 128] [--repeats 3]
        [--dflash DIR] [--dspark DIR] [--json out.json]
"""

from __future__ import annotations

import argparse


def main() -> int:
    from specpath_engine import harness

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--dflash", default=None, help="DFlash drafter (default: the shipped one)")
    p.add_argument("--dspark", default=None, help="DSpark drafter (default: the shipped one)")
    harness.add_benchmark_arguments(p)
    args = p.parse_args()
    k = args.k
    dflash = {"method": "dflash", "num_speculative_tokens": k, **({"model": args.dflash} if args.dflash else {})}
    dspark = {"method": "dspark", "num_speculative_tokens": k, **({"model": args.dspark} if args.dspark else {})}
    runs = [
        ("eagle3", {"method": "eagle3", "num_speculative_tokens": k}),
        ("dflash", dflash),
        ("dspark", dspark),
        ("dspark+sched", {**dspark, "enable_adaptive_verification": True}),
        ("dspark+thr0.5", {**dspark, "enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5}),
    ]
    harness.run_benchmark(args, runs, note=f"K={k}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
