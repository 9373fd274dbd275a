"""One- and three-module MTP beside every other installed method, on the demo prompts.

    python3 builtin_methods/mtp/benchmarks/mtp_demo.py [--max-tokens 128] [--json]

The same setting as ``specpath demo`` (embedded default target, batch 1, greedy, one prompt at
a time, a warm-up call per configuration, one torch thread), with several MTP configurations
instead of one: the shipped ``mtp1`` checkpoint at K = 1..4 and ``mtp3`` at K = 3 and 6. Other
methods run with their own ``demo_config`` (K = 4 where they take the default). Prints τ
(tokens per target step, bonus included), acceptance by position, tokens/s, and the speedup:
each prompt runs without and with speculation back to back (load on a shared machine drifts),
and the speedup is the ratio of the summed times of those pairs. Also checks that the tokens
equal plain greedy decoding's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def mtp_configs(mtp1: str | None = None, mtp3: str | None = None) -> list[tuple[str, dict]]:
    from specpath_mtp.config import MTP1, MTP3

    mtp1, mtp3 = mtp1 or MTP1, mtp3 or MTP3
    runs = [(f"mtp1 K={k}", {"method": "mtp", "model": str(mtp1), "num_speculative_tokens": k}) for k in (1, 2, 3, 4)]
    runs += [(f"mtp3 K={k}", {"method": "mtp", "model": str(mtp3), "num_speculative_tokens": k}) for k in (3, 6)]
    return runs


def run(max_tokens: int, skip_others: bool, model: str | None = None, mtp1: str | None = None,
        mtp3: str | None = None) -> list[dict]:
    import torch

    from specpath.engine.cli_run import DEFAULT_DEMO_K, DEMO_PROMPTS, demo_configs
    from specpath.engine.llm import LLM, SamplingParams
    from specpath.engine.metrics import SpecMetrics

    torch.set_num_threads(1)
    others = [] if skip_others else [(n, c) for n, c in demo_configs(DEFAULT_DEMO_K)[0] if n != "mtp"]
    runs = others + mtp_configs(mtp1, mtp3)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    plain = LLM(model, None)
    plain.generate([DEMO_PROMPTS[0]], SamplingParams(max_tokens=8, ignore_eos=True))  # warm-up
    baseline = [o.token_ids for o in plain.generate(list(DEMO_PROMPTS), params)]
    rows = []
    for name, config in runs:
        try:
            llm = LLM(model, config)
            llm.generate([DEMO_PROMPTS[0]], SamplingParams(max_tokens=8, ignore_eos=True))  # warm-up
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the table
            print(f"skipped {name}: {' '.join(str(exc).split())}", file=sys.stderr)
            continue
        # Load on a shared machine drifts: each prompt runs plain and speculative back to back,
        # and the speedup is the ratio of the summed times of those pairs.
        parts, tokens, elapsed, plain_elapsed = [], [], 0.0, 0.0
        for prompt in DEMO_PROMPTS:
            start = time.perf_counter()
            plain.generate([prompt], params)
            plain_elapsed += time.perf_counter() - start
            start = time.perf_counter()
            out = llm.generate([prompt], params)[0]
            elapsed += time.perf_counter() - start
            parts.append(out.metrics)
            tokens.append(out.token_ids)
        total = SpecMetrics.total(parts, elapsed_s=elapsed)
        k = llm.engine_config.speculative_config.num_speculative_tokens
        rows.append({"method": name, "K": k, "tau": total.mean_acceptance_length,
                     "acceptance_by_position": total.acceptance_rate_by_position,
                     "tokens_per_s": total.tokens_per_s,
                     "baseline_tokens_per_s": total.num_generated_tokens / plain_elapsed,
                     "speedup": plain_elapsed / elapsed, "greedy_identical": tokens == baseline})
        print(f"{name}: tau {total.mean_acceptance_length:.2f} {plain_elapsed / elapsed:.2f}x", file=sys.stderr)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--only-mtp", action="store_true", help="baseline and the MTP configurations only")
    p.add_argument("--json", action="store_true")
    p.add_argument("--model", help="target checkpoint (default: the embedded model; others: use --only-mtp)")
    p.add_argument("--mtp1", help="one-module checkpoint (default: the shipped one)")
    p.add_argument("--mtp3", help="three-module checkpoint (default: the shipped one)")
    args = p.parse_args()
    rows = run(args.max_tokens, args.only_mtp, args.model, args.mtp1, args.mtp3)
    if args.json:
        print(json.dumps(rows))
        return 0
    print("| method | K | τ | acceptance by position | tokens/s (plain) | speedup | greedy identical |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        rates = " ".join(f"{x:.2f}" for x in r["acceptance_by_position"]) or "-"
        print(f"| {r['method']} | {r['K'] or '-'} | {r['tau']:.2f} | {rates} | {r['tokens_per_s']:.0f} ({r['baseline_tokens_per_s']:.0f}) | "
              f"{r['speedup']:.2f}x | {'yes' if r['greedy_identical'] else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
