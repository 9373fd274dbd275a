"""What a model-free method beside a drafter buys (``speculative_config.model_free_drafter``).

Each ``--methods`` drafter runs on SmolLM2 (bf16 unless ``--dtype``) with its shipped weights
alone and with each ``--model-free`` method beside it (a request whose model-free draft is at
least ``--min-tokens`` long is verified with it, every other with the drafter's); the model-free
methods also run alone. The demo's six prompts (code completion and chat), EOS ends each answer
as in ``specpath demo`` (``--ignore-eos`` for fixed lengths), batch 1, ``--threads`` threads,
interleaved prompt by prompt, ``--rounds`` rounds after the quiet-machine gate, each on new
engines (suffix decoding's global tree would otherwise remember an earlier round's answers). Prints per
engine tok/s, the ratio to plain decoding, τ, the share of steps drafted model-free, greedy
identity with plain decoding, and tok/s per prompt. Not part of the tests.

    python benchmarks/hybrid_drafting.py --methods eagle3,mtp --model-free suffix,ngram
"""

from __future__ import annotations

import argparse

from specpath_engine.harness import add_chat_benchmark_arguments

MODEL_FREE_OPTIONS = {"ngram": {"prompt_lookup_min": 2, "prompt_lookup_max": 5}}
"""Options of a model-free method beside a drafter (n-gram: matches from 2 tokens, as the
drafter covers what short matches miss)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3,mtp,dspark,dflash,draft_model")
    ap.add_argument("--model-free", default="suffix,ngram")
    ap.add_argument("--min-tokens", type=int, default=2)
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16")
    add_chat_benchmark_arguments(ap)
    args = ap.parse_args()

    import torch

    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import chat_row, machine_load, time_chat_prompts, wait_for_quiet, warm_llms
    from specpath_engine.llm import LLM, SamplingParams

    torch.set_num_threads(args.threads)

    def llm(config):
        return LLM("smollm2-135m", config, dtype=args.dtype, num_threads=args.threads)

    free_methods = args.model_free.split(",")
    configs: dict[str, dict | None] = {"plain": None}
    for name in free_methods:
        configs[name] = {"method": name, "num_speculative_tokens": args.k, **MODEL_FREE_OPTIONS.get(name, {})}
    for method in args.methods.split(","):
        configs[method] = {"method": method, "num_speculative_tokens": args.k}
        for name in free_methods:
            configs[f"{method} + {name}"] = {
                "method": method, "num_speculative_tokens": args.k, "model_free_min_tokens": args.min_tokens,
                "model_free_drafter": {"method": name, **MODEL_FREE_OPTIONS.get(name, {})}}

    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=args.ignore_eos)
    rounds, shares, load = [], {name: [0, 0] for name in configs}, None
    for _ in range(args.rounds):
        engines = warm_llms(configs, llm)  # new each round: suffix decoding's global tree would remember answers
        load = wait_for_quiet(args.max_load) if load is None else load
        warmed = {name: getattr(e.speculator, "num_model_free_drafts", 0) for name, e in engines.items()}
        result = time_chat_prompts(engines, REAL_DEMO_PROMPTS, params)
        for name, engine in engines.items():
            shares[name][0] += getattr(engine.speculator, "num_model_free_drafts", 0) - warmed[name]
            shares[name][1] += sum(o.metrics.num_steps for o in result[name].outputs)
        rounds.append(result)
        del engines
    for name in configs:
        row = chat_row(rounds, name)
        share = f"{shares[name][0] / shares[name][1]:.2f}" if "model_free_drafter" in (configs[name] or {}) else "-"
        print(row.line(name, width=22, middle=f"model-free steps {share:>4s}  "))
    print(f"\nSmolLM2 {args.dtype}, {args.threads} threads, {len(REAL_DEMO_PROMPTS)} prompts x up to {args.max_tokens} "
          f"tokens ({'EOS ignored' if args.ignore_eos else 'EOS ends a reply'}), K={args.k}, model-free drafts from "
          f"{args.min_tokens} tokens, {args.rounds} round(s); load average per core {load:.2f} before, "
          f"{machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
