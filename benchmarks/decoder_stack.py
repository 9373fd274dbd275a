"""What the native decoder stack buys: every target layer in one native call against one call per
layer half, side by side in one process.

Each ``--methods`` engine (plus plain decoding) runs SmolLM2 bf16 on the demo's six prompts
(``--max-tokens`` new tokens, EOS ignored so every run does the same work), prompt by prompt,
once with the stack and once with ``LlamaModel._native_stack`` switched off (the per-layer
path: the same kernels, the same bits), alternating which goes first per round, after the
quiet-machine gate. Prints tok/s per engine and path, the ratio, each engine's ratio to plain
decoding on the same path, and whether the tokens of both paths are identical. Not part of the
tests.

    python benchmarks/decoder_stack.py --methods eagle3,mtp
"""

from __future__ import annotations

import argparse
import time

from specpath_engine.harness import add_chat_benchmark_arguments


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3")
    add_chat_benchmark_arguments(ap, rounds=2)
    args = ap.parse_args()

    import torch

    from specpath_engine import model
    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import machine_load, wait_for_quiet, warm_llms
    from specpath_engine.llm import LLM, SamplingParams

    torch.set_num_threads(args.threads)
    configs = {"plain": None, **{m: {"method": m, "num_speculative_tokens": 4} for m in args.methods.split(",")}}
    engines = warm_llms(configs, lambda c: LLM("smollm2-135m", c, dtype="bfloat16", num_threads=args.threads))
    stack, per_layer = model.LlamaModel._native_stack, lambda *_: None
    paths = {"stack": stack, "per layer": per_layer}
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    load = wait_for_quiet(args.max_load)
    totals = {(name, path): [0, 0.0] for name in engines for path in paths}
    tokens: dict[tuple[str, str, int], list[int]] = {}
    try:
        for r in range(args.rounds):
            for i, (kind, prompt) in enumerate(REAL_DEMO_PROMPTS):
                for name, engine in engines.items():
                    for path in (list(paths) if r % 2 == 0 else list(reversed(paths))):
                        model.LlamaModel._native_stack = paths[path]
                        start = time.perf_counter()
                        out = (engine.chat(prompt, params) if kind == "chat" else engine.generate([prompt], params))[0]
                        totals[name, path][1] += time.perf_counter() - start
                        totals[name, path][0] += len(out.token_ids)
                        tokens[name, path, i] = out.token_ids
    finally:
        model.LlamaModel._native_stack = stack
    rate = {key: n / s for key, (n, s) in totals.items()}
    for name in engines:
        same = sum(tokens[name, "stack", i] == tokens[name, "per layer", i] for i in range(len(REAL_DEMO_PROMPTS)))
        print(f"{name:10s} stack {rate[name, 'stack']:6.1f} tok/s ({rate[name, 'stack'] / rate['plain', 'stack']:.2f}x plain)"
              f"   per layer {rate[name, 'per layer']:6.1f} tok/s ({rate[name, 'per layer'] / rate['plain', 'per layer']:.2f}x plain)"
              f"   stack / per layer {rate[name, 'stack'] / rate[name, 'per layer']:.2f}x   same tokens {same}/{len(REAL_DEMO_PROMPTS)}")
    print(f"\nSmolLM2 bf16, {args.threads} threads, {len(REAL_DEMO_PROMPTS)} prompts x {args.max_tokens} tokens (EOS ignored), "
          f"K=4, {args.rounds} rounds; load average per core {load:.2f} before, {machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
