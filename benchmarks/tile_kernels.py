"""What the AMX tile kernel buys end to end: the same engines with bf16 layers on the AVX512-BF16
kernel and on the AMX tiles, side by side.

SmolLM2 bf16, plain decoding and each ``--configs`` method (the shipped drafters), every engine
built twice: once with ``NativeKernels.tiles`` off (``rows_matmul.c``), once on
(``tiled_matmul.c``; only where the CPU has AMX-BF16). The demo's six prompts, EOS ends each
reply, batch 1, ``--threads`` threads, interleaved prompt by prompt after the quiet-machine gate.
Prints tok/s, the ratio to the same kernel's plain decoding and to the AVX512 engine of the same
method, τ, greedy identity with plain decoding on the same kernel, and tok/s per prompt. Not part
of the tests.

    python benchmarks/tile_kernels.py --configs eagle3,mtp,eagle3+ngram
"""

from __future__ import annotations

import argparse


def config_of(name: str, k: int) -> dict | None:
    """``plain``, ``method`` or ``method+model_free`` as a speculative config."""
    if name == "plain":
        return None
    method, _, free = name.partition("+")
    config = {"method": method, "num_speculative_tokens": k}
    if free:
        config["model_free_drafter"] = {"method": free, **({"prompt_lookup_min": 2} if free == "ngram" else {})}
    return config


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="eagle3,mtp,dflash,draft_model,eagle3+ngram")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    args = ap.parse_args()

    import torch

    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import WARM_UP_PROMPT, machine_load, time_chat_prompts, wait_for_quiet
    from specpath_engine.llm import LLM, SamplingParams
    from specpath_engine.metrics import SpecMetrics
    from specpath_engine.modeling import native

    torch.set_num_threads(args.threads)
    kernels = native.kernels()
    if kernels is None or not kernels.tiles:
        print(f"no AMX tiles here ({native.unavailable_reason() or 'this CPU has no AMX-BF16'}): nothing to compare")
        return 1
    names = ["plain", *args.configs.split(",")]
    engines = {}
    for kind, tiles in (("avx512", False), ("amx", True)):
        kernels.tiles = tiles  # layers read the flag when they are built
        for name in names:
            engines[f"{name} [{kind}]"] = LLM("smollm2-135m", config_of(name, args.k), dtype="bfloat16",
                                              num_threads=args.threads)
    kernels.tiles = True
    warm = SamplingParams(max_tokens=8, ignore_eos=True)
    for engine in engines.values():
        engine.generate([WARM_UP_PROMPT], warm)
    load = wait_for_quiet(args.max_load)
    result = time_chat_prompts(engines, REAL_DEMO_PROMPTS, SamplingParams(max_tokens=args.max_tokens))
    rate = {name: t.tokens / t.seconds for name, t in result.items()}
    for name in names:
        for kind in ("avx512", "amx"):
            key, plain = f"{name} [{kind}]", f"plain [{kind}]"
            t = result[key]
            metrics = SpecMetrics.total([o.metrics for o in t.outputs], elapsed_s=0.0)
            same = sum(o.token_ids == p.token_ids for o, p in zip(t.outputs, result[plain].outputs))
            print(f"{key:24s} {rate[key]:6.1f} tok/s  {rate[key] / rate[plain]:.2f}x plain  "
                  f"{rate[key] / rate[f'{name} [avx512]']:.2f}x avx512  τ {metrics.mean_acceptance_length:.2f}  "
                  f"greedy = plain {same}/{len(t.outputs)}  per prompt: " + " ".join(f"{r:.0f}" for r in t.rates))
    print(f"\nSmolLM2 bf16, {args.threads} threads, {len(REAL_DEMO_PROMPTS)} prompts x up to {args.max_tokens} tokens "
          f"(EOS ends a reply), K={args.k}; load average per core {load:.2f} before, {machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
