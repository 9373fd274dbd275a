"""EAGLE, EAGLE-3 and P-EAGLE against plain decoding, next to ngram and draft_model, in one run.

Workload: ``specpath demo``'s code-completion prompts (``specpath.engine.cli_run.DEMO_PROMPTS``),
batch 1 (one prompt at a time, the latency setting), greedy, ``--max-tokens`` each, on the
embedded default target (or ``--model``), one torch thread. Every method gets a warm-up, then
``--repeats`` rounds; rounds interleave the methods so background load hits all alike. Printed:
τ (tokens per target step, bonus included), acceptance rate by draft position (of the drafts
proposed at depth i, the fraction accepted), tokens/s and speedup over the baseline of the same round (median over
rounds), target forward calls, and whether the output is identical to the baseline.

    python3 benchmarks/eagle.py [--k 4] [--max-tokens 128] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def methods(k: int, only: set[str] | None) -> list[tuple[str, dict | None]]:
    from specpath import plugins
    from specpath.registry import get_registry

    plugins.load_all()
    registry = get_registry()
    rows: list[tuple[str, dict | None]] = [("baseline", None)]
    candidates = [
        ("ngram", {"method": "ngram", "num_speculative_tokens": k}),
        ("draft_model", None),
        ("eagle", {"method": "eagle", "num_speculative_tokens": k}),
        ("eagle3", {"method": "eagle3", "num_speculative_tokens": k}),
        ("p-eagle", {"method": "eagle3", "num_speculative_tokens": k, "parallel_drafting": True}),
    ]
    for name, config in candidates:
        if only is not None and name not in only:
            continue
        method = config["method"] if config else name
        registration = registry.get(method)
        if registration is None:
            print(f"skipped {name}: not installed")
            continue
        if config is None:
            hook = getattr(registration.config_class, "demo_config", None)
            config = hook() if callable(hook) else None
            if config is None:
                print(f"skipped {name}: no demo config")
                continue
            config = {**config, "num_speculative_tokens": k}
        rows.append((name, config))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="target checkpoint (default: the embedded model)")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--methods", default=None, help="comma-separated subset (baseline always runs)")
    p.add_argument("--json", default=None, help="also write the rows here")
    args = p.parse_args()

    import torch

    from specpath.engine.cli_run import DEMO_PROMPTS
    from specpath.engine.llm import LLM, SamplingParams
    from specpath.engine.metrics import SpecMetrics

    torch.set_num_threads(1)
    only = set(args.methods.split(",")) if args.methods else None
    runs = methods(args.k, only)
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
            "method": name,
            "config": config,
            "tau": m.mean_acceptance_length if name != "baseline" else 1.0,
            "acceptance_by_position": m.acceptance_rate_by_position,
            "tokens_per_s": statistics.median(r["tps"]),
            "speedup": statistics.median(r["speedup"]),
            "target_steps": m.num_steps,
            "identical": r["tokens"] == baseline_tokens,
        })
    header = f"{'method':<12} {'τ':>5} {'acceptance by position':<28} {'tok/s':>7} {'speedup':>8} {'steps':>6} identical"
    print(header)
    print("-" * len(header))
    for row in rows:
        acc = " ".join(f"{a:.2f}" for a in row["acceptance_by_position"]) or "-"
        print(f"{row['method']:<12} {row['tau']:>5.2f} {acc:<28} {row['tokens_per_s']:>7.0f} "
              f"{row['speedup']:>7.2f}x {row['target_steps']:>6} {'yes' if row['identical'] else 'NO'}")
    print(f"\n{len(DEMO_PROMPTS)} demo prompts x {args.max_tokens} tokens, batch 1, greedy, K={args.k}, "
          f"1 torch thread; medians of {args.repeats} interleaved rounds.")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"k": args.k, "max_tokens": args.max_tokens, "repeats": args.repeats,
                       "rows": [{k: v for k, v in r.items()} for r in rows]}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
