"""DFlash and DSpark against EAGLE-3 at equal K and against plain decoding, in one run.

Workload: ``specpath demo``'s code-completion prompts (``specpath.engine.cli_run.DEMO_PROMPTS``),
batch 1, greedy, ``--max-tokens`` each, on the embedded default target (or ``--model``), one
torch thread. Every method gets a warm-up, then ``--repeats`` rounds that interleave the methods
so background load hits all alike. Printed: τ (tokens per target step, bonus included),
acceptance rate by draft position (of the drafts verified at depth i, the fraction accepted),
drafts verified per step, tokens/s and speedup over the baseline of the same round (median over
rounds), and whether the output is identical to the baseline.

    python3 builtin_methods/dspark/benchmarks/block_drafters.py [--k 4] [--max-tokens 128] [--repeats 3]
        [--dflash DIR] [--dspark DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def methods(args: argparse.Namespace) -> list[tuple[str, dict | None]]:
    k = args.k
    dflash = {"method": "dflash", "num_speculative_tokens": k, **({"model": args.dflash} if args.dflash else {})}
    dspark = {"method": "dspark", "num_speculative_tokens": k, **({"model": args.dspark} if args.dspark else {})}
    rows = [
        ("baseline", None),
        ("eagle3", {"method": "eagle3", "num_speculative_tokens": k}),
        ("dflash", dflash),
        ("dspark", dspark),
        ("dspark+sched", {**dspark, "enable_adaptive_verification": True}),
        ("dspark+thr0.5", {**dspark, "enable_adaptive_verification": True, "adaptive_verification_threshold": 0.5}),
    ]
    only = set(args.methods.split(",")) if args.methods else None
    return [(n, c) for n, c in rows if n == "baseline" or only is None or n in only]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="target checkpoint (default: the embedded model)")
    p.add_argument("--dflash", default=None, help="DFlash drafter (default: the shipped one)")
    p.add_argument("--dspark", default=None, help="DSpark drafter (default: the shipped one)")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--methods", default=None, help="comma-separated subset (baseline always runs)")
    p.add_argument("--json", default=None)
    args = p.parse_args()

    import torch

    from specpath.engine.cli_run import DEMO_PROMPTS
    from specpath.engine.llm import LLM, SamplingParams
    from specpath.engine.metrics import SpecMetrics

    torch.set_num_threads(1)
    runs = methods(args)
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    engines = {}
    for name, config in runs:
        try:
            engines[name] = LLM(args.model, config, num_threads=1)
            engines[name].generate([DEMO_PROMPTS[0]], SamplingParams(max_tokens=16, ignore_eos=True))  # warm-up
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            print(f"skipped {name}: {' '.join(str(exc).split())}")
    results: dict[str, dict] = {name: {"tps": [], "speedup": []} for name in engines}
    for _ in range(args.repeats):
        round_tps = {}
        for name, llm in engines.items():
            parts, tokens, elapsed = [], [], 0.0
            for prompt in DEMO_PROMPTS:
                start = time.perf_counter()
                out = llm.generate([prompt], params)[0]
                elapsed += time.perf_counter() - start
                parts.append(out.metrics)
                tokens.append(out.token_ids)
            total = SpecMetrics.total(parts, elapsed_s=elapsed)
            round_tps[name] = total.tokens_per_s
            results[name].update(metrics=total, tokens=tokens)
            results[name]["tps"].append(total.tokens_per_s)
        for name in engines:
            results[name]["speedup"].append(round_tps[name] / round_tps["baseline"])
    baseline_tokens = results["baseline"]["tokens"]
    rows = []
    for name, config in runs:
        if name not in results:
            continue
        r, m = results[name], results[name]["metrics"]
        rows.append({
            "method": name, "config": config,
            "tau": m.mean_acceptance_length if name != "baseline" else 1.0,
            "acceptance_by_position": m.acceptance_rate_by_position,
            "drafts_per_step": m.num_draft_tokens / max(1, m.num_steps) if name != "baseline" else 0.0,
            "tokens_per_s": statistics.median(r["tps"]),
            "speedup": statistics.median(r["speedup"]),
            "identical": r["tokens"] == baseline_tokens,
        })
    header = f"{'method':<14} {'τ':>5} {'acceptance by position':<30} {'drafts/step':>11} {'tok/s':>7} {'speedup':>8} identical"
    print(header)
    print("-" * len(header))
    for row in rows:
        acc = " ".join(f"{a:.2f}" for a in row["acceptance_by_position"]) or "-"
        print(f"{row['method']:<14} {row['tau']:>5.2f} {acc:<30} {row['drafts_per_step']:>11.2f} "
              f"{row['tokens_per_s']:>7.0f} {row['speedup']:>7.2f}x {'yes' if row['identical'] else 'NO'}")
    print(f"\n{len(DEMO_PROMPTS)} demo prompts x {args.max_tokens} tokens, batch 1, greedy, K={args.k}, "
          f"1 torch thread; medians of {args.repeats} interleaved rounds.")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"k": args.k, "max_tokens": args.max_tokens, "repeats": args.repeats, "rows": rows}, f, indent=2,
                      default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
