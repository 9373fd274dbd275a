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

MODEL_FREE_OPTIONS = {"ngram": {"prompt_lookup_min": 2, "prompt_lookup_max": 5}}
"""Options of a model-free method beside a drafter (n-gram: matches from 2 tokens, as the
drafter covers what short matches miss)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3,mtp,dspark,dflash,draft_model")
    ap.add_argument("--model-free", default="suffix,ngram")
    ap.add_argument("--min-tokens", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    args = ap.parse_args()

    import torch

    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import WARM_UP_PROMPT, machine_load, time_chat_prompts, wait_for_quiet
    from specpath_engine.llm import LLM, SamplingParams
    from specpath_engine.metrics import SpecMetrics

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

    def fresh_engines() -> dict:
        """Every engine new: suffix decoding's global tree would remember an earlier round's answers."""
        engines = {name: llm(config) for name, config in configs.items()}
        warm = SamplingParams(max_tokens=8, ignore_eos=True)
        for engine in engines.values():
            engine.generate([WARM_UP_PROMPT], warm)
        return engines

    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=args.ignore_eos)
    rounds, shares, load = [], {name: [0, 0] for name in configs}, None
    for _ in range(args.rounds):
        engines = fresh_engines()
        load = wait_for_quiet(args.max_load) if load is None else load
        warmed = {name: getattr(e.speculator, "num_model_free_drafts", 0) for name, e in engines.items()}
        result = time_chat_prompts(engines, REAL_DEMO_PROMPTS, params)
        for name, engine in engines.items():
            shares[name][0] += getattr(engine.speculator, "num_model_free_drafts", 0) - warmed[name]
            shares[name][1] += sum(o.metrics.num_steps for o in result[name].outputs)
        rounds.append(result)
        del engines
    base = sum(r["plain"].tokens for r in rounds) / sum(r["plain"].seconds for r in rounds)
    n = len(REAL_DEMO_PROMPTS) * len(rounds)
    for name in configs:
        rate = sum(r[name].tokens for r in rounds) / sum(r[name].seconds for r in rounds)
        metrics = SpecMetrics.total([o.metrics for r in rounds for o in r[name].outputs], elapsed_s=0.0)
        same = sum(o.token_ids == p.token_ids for r in rounds for o, p in zip(r[name].outputs, r["plain"].outputs))
        share = f"{shares[name][0] / shares[name][1]:.2f}" if "model_free_drafter" in (configs[name] or {}) else "-"
        per_prompt = " ".join(f"{sum(r[name].rates[i] for r in rounds) / len(rounds):.0f}"
                              for i in range(len(REAL_DEMO_PROMPTS)))
        print(f"{name:22s} {rate:6.1f} tok/s  {rate / base:.2f}x  τ {metrics.mean_acceptance_length:.2f}  "
              f"model-free steps {share:>4s}  greedy = plain {same}/{n}  per prompt: {per_prompt}")
    print(f"\nSmolLM2 {args.dtype}, {args.threads} threads, {len(REAL_DEMO_PROMPTS)} prompts x up to {args.max_tokens} "
          f"tokens ({'EOS ignored' if args.ignore_eos else 'EOS ends a reply'}), K={args.k}, model-free drafts from "
          f"{args.min_tokens} tokens, {args.rounds} round(s); load average per core {load:.2f} before, "
          f"{machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
