"""What weight-only quantised drafters buy, measured side by side.

Each method runs on SmolLM2 with its shipped drafter held as loaded (bf16, pre-packed or on the
native kernels) and with ``speculative_config.quantization`` int8 and int4 (the engine holds the
drafter's matrices weight-only quantised; verification is unchanged, so greedy output stays the
plain target's: checked here per prompt). The target is bf16, or ``--target-quantization int4``.
``--threads`` threads, the demo's six prompts x ``--max-tokens`` (EOS ignored), interleaved
prompt by prompt (every engine in turn), ``--rounds`` rounds after the quiet-machine gate;
prints tok/s, the ratio to plain decoding of the same target and τ per engine, overall and per
prompt. Not part of the tests.

    python benchmarks/drafter_quantization.py --methods eagle3,mtp,draft_model
"""

from __future__ import annotations

import argparse


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3,mtp,dspark,dflash,draft_model")
    ap.add_argument("--quantizations", default="int8,int4", help="drafter quantizations beside the unquantised one")
    ap.add_argument("--target-quantization", default=None, choices=[None, "int8", "int4"])
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    args = ap.parse_args()

    import torch

    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import machine_load, time_chat_prompts, wait_for_quiet
    from specpath_engine.llm import LLM, SamplingParams
    from specpath_engine.metrics import SpecMetrics

    torch.set_num_threads(args.threads)

    def llm(config):
        return LLM("smollm2-135m", config, dtype="bfloat16", num_threads=args.threads,
                   quantization=args.target_quantization)

    engines = {"plain": llm(None)}
    for method in args.methods.split(","):
        for quantization in [None, *args.quantizations.split(",")]:
            config = {"method": method, "num_speculative_tokens": args.k}
            if quantization:
                config["quantization"] = quantization
            engines[f"{method}, drafter {quantization or 'as loaded'}"] = llm(config)
    warm = SamplingParams(max_tokens=8, ignore_eos=True)
    for engine in engines.values():
        engine.generate(["def f(x):\n"], warm)
    load = wait_for_quiet(args.max_load)
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    rounds = [time_chat_prompts(engines, REAL_DEMO_PROMPTS, params) for _ in range(args.rounds)]
    base = sum(r["plain"].tokens for r in rounds) / sum(r["plain"].seconds for r in rounds)
    for name in engines:
        rate = sum(r[name].tokens for r in rounds) / sum(r[name].seconds for r in rounds)
        metrics = SpecMetrics.total([o.metrics for r in rounds for o in r[name].outputs], elapsed_s=0.0)
        same = sum(o.token_ids == p.token_ids for r in rounds for o, p in zip(r[name].outputs, r["plain"].outputs))
        per_prompt = " ".join(f"{sum(r[name].rates[i] for r in rounds) / len(rounds):.0f}"
                              for i in range(len(REAL_DEMO_PROMPTS)))
        print(f"{name:30s} {rate:6.1f} tok/s  {rate / base:.2f}x  τ {metrics.mean_acceptance_length:.2f}  "
              f"greedy = plain {same}/{len(REAL_DEMO_PROMPTS) * len(rounds)}  per prompt: {per_prompt}")
    target = args.target_quantization or "bf16"
    print(f"\nSmolLM2 target {target}, {args.threads} threads, {len(REAL_DEMO_PROMPTS)} prompts x {args.max_tokens} "
          f"tokens, K={args.k}, {args.rounds} round(s); load average per core {load:.2f} before, "
          f"{machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
