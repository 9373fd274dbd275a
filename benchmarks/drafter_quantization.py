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

from specpath_engine.harness import add_chat_benchmark_arguments


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3,mtp,dspark,dflash,draft_model")
    ap.add_argument("--quantizations", default="int8,int4", help="drafter quantizations beside the unquantised one")
    ap.add_argument("--target-quantization", default=None, choices=[None, "int8", "int4"])
    ap.add_argument("--k", type=int, default=4)
    add_chat_benchmark_arguments(ap)
    args = ap.parse_args()

    import torch

    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import chat_row, machine_load, time_chat_prompts, wait_for_quiet, warm_llms
    from specpath_engine.llm import LLM, SamplingParams

    torch.set_num_threads(args.threads)

    def llm(config):
        return LLM("smollm2-135m", config, dtype="bfloat16", num_threads=args.threads,
                   quantization=args.target_quantization)

    configs: dict[str, dict | None] = {"plain": None}
    for method in args.methods.split(","):
        for quantization in [None, *args.quantizations.split(",")]:
            config = {"method": method, "num_speculative_tokens": args.k}
            if quantization:
                config["quantization"] = quantization
            configs[f"{method}, drafter {quantization or 'as loaded'}"] = config
    engines = warm_llms(configs, llm)
    load = wait_for_quiet(args.max_load)
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    rounds = [time_chat_prompts(engines, REAL_DEMO_PROMPTS, params) for _ in range(args.rounds)]
    for name in engines:
        print(chat_row(rounds, name).line(name))
    target = args.target_quantization or "bf16"
    print(f"\nSmolLM2 target {target}, {args.threads} threads, {len(REAL_DEMO_PROMPTS)} prompts x {args.max_tokens} "
          f"tokens, K={args.k}, {args.rounds} round(s); load average per core {load:.2f} before, "
          f"{machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
