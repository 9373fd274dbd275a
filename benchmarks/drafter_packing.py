"""What pre-packing the drafters' linears buys, measured side by side.

Each method runs twice on SmolLM2 in bf16: its drafter packed (the default: the engine's
``SpeculatorContext.prepare_module``) and unpacked (``prepare_module`` None); the target is packed
in both. One thread, the demo's six prompts x ``--max-tokens`` (EOS ignored), interleaved prompt
by prompt (every engine in turn), one round, after the quiet-machine gate. Prints tok/s and the
ratio to plain decoding per engine, overall and per prompt. Not part of the tests.

    python benchmarks/drafter_packing.py --methods eagle3,dspark,mtp
"""

from __future__ import annotations

import argparse


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3,dspark,mtp")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    args = ap.parse_args()

    import attrs
    import torch

    import specpath_engine.llm_engine as llm_engine
    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import machine_load, time_chat_prompts, wait_for_quiet
    from specpath_engine.llm import LLM, SamplingParams

    torch.set_num_threads(1)
    packed_context = llm_engine.speculator_context

    def unpacked_context(*a, **kw):
        return attrs.evolve(packed_context(*a, **kw), prepare_module=None)

    def llm(config):
        return LLM("smollm2-135m", config, dtype="bfloat16", num_threads=1)

    engines = {"baseline": llm(None)}
    for method in args.methods.split(","):
        config = {"method": method, "num_speculative_tokens": args.k}
        engines[f"{method}, packed drafter"] = llm(config)
        llm_engine.speculator_context = unpacked_context  # LLMEngine.from_config looks it up per call
        try:
            engines[f"{method}, unpacked drafter"] = llm(config)
        finally:
            llm_engine.speculator_context = packed_context
    warm = SamplingParams(max_tokens=8, ignore_eos=True)
    for engine in engines.values():
        engine.generate(["def f(x):\n"], warm)
    load = wait_for_quiet(args.max_load)
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    timings = time_chat_prompts(engines, REAL_DEMO_PROMPTS, params)
    base = timings["baseline"].tokens / timings["baseline"].seconds
    for name, t in timings.items():
        per_prompt = " ".join(f"{r:.0f}" for r in t.rates)
        print(f"{name:28s} {t.tokens / t.seconds:6.1f} tok/s  {t.tokens / t.seconds / base:.2f}x   per prompt: {per_prompt}")
    print(f"\nSmolLM2 bf16, 1 thread, {len(REAL_DEMO_PROMPTS)} prompts x {args.max_tokens} tokens, K={args.k}; "
          f"load average per core {load:.2f} before, {machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
