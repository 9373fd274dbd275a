"""Token-tree verification against chains, side by side in one run, on the agentic workloads.

For each drafter that can propose trees, the same workloads (``benchmarks/agentic.py``: edit
sessions, tool-call logs, prose) run twice on a fresh engine: chains only
(``LLM(tree_verification=False)``, the drafter's path mode / top-1 chain) and trees (suffix
decoding's tree drafts; DSpark with ``xpress_topc``). Printed per workload and configuration:
tokens per target step over all decode steps (what the speedup follows), τ over the steps that
verified drafts (bonus included), nodes verified per step, tok/s, the tree/chain ratios of tokens
per step and of tok/s, and whether the output equals plain decoding's. Tokens per step and τ do
not depend on timing; tok/s does (the load average is printed beside it).

    python3 benchmarks/tree_verification.py [--model DIR] [--max-tokens 128] [--workloads edit,json,chat]
        [--configs suffix,dspark] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import agentic  # noqa: E402  (the workload builders)

CONFIGS: dict[str, list[tuple[str, dict, dict]]] = {
    # name, speculative config, the tree variant's extra fields
    "suffix": [("suffix k8", {"method": "suffix", "num_speculative_tokens": 8}, {}),
               ("suffix k24", {"method": "suffix"}, {})],
    "dspark": [("dspark k4 c2", {"method": "dspark"}, {"xpress_topc": 2}),
               ("dspark k4 c3", {"method": "dspark"}, {"xpress_topc": 3}),
               ("dspark k8 c2", {"method": "dspark", "num_speculative_tokens": 8}, {"xpress_topc": 2}),
               ("dspark k8 c3", {"method": "dspark", "num_speculative_tokens": 8}, {"xpress_topc": 3})],
}


def run(args_model, config, trees, workload, params):
    from specpath_engine.llm import LLM
    from specpath_engine.metrics import SpecMetrics
    from specpath_engine.llm import SamplingParams

    llm = LLM(args_model, config, num_threads=1, tree_verification=trees)
    llm.generate(["def f(x):\n    return x\n"], SamplingParams(max_tokens=8, ignore_eos=True))
    cache = getattr(llm.engine.runner.speculator, "cache", None)
    for req_id in cache.cached_requests if cache is not None else ():
        cache.evict(req_id)  # the warm-up must not seed suffix decoding's global tree
    parts, tokens, elapsed = agentic.run_workload(llm, workload, params)
    return SpecMetrics.total(parts, elapsed_s=elapsed), tokens


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="target checkpoint (default: the embedded model)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--workloads", default="edit,json,chat")
    p.add_argument("--configs", default="suffix,dspark")
    p.add_argument("--json", default=None)
    args = p.parse_args()

    import torch

    from specpath_engine.llm import SamplingParams

    torch.set_num_threads(1)
    files = agentic.heldout_files()
    context = 1024 if args.model is None else 2048
    budget = context - args.max_tokens * 3 - 64
    workloads = {
        "edit": lambda: agentic.edit_sessions(files, 4, 3, budget),
        "json": lambda: agentic.tool_call_prompts(files, 8),
        "chat": lambda: agentic.prose_prompts(files, 8),
    }
    chosen = [w for w in args.workloads.split(",") if w in workloads]
    configs = [c for group in args.configs.split(",") for c in CONFIGS.get(group, [])]
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True)
    rows = []
    for w in chosen:
        workload = workloads[w]()
        base, base_tokens = run(args.model, None, False, workload, params)
        print(f"\n{w}: {len(base_tokens)} requests x {args.max_tokens} tokens; plain {base.tokens_per_s:.0f} tok/s")
        print(f"  {'config':<14} {'mode':<6} {'tok/step':>8} {'τ':>5} {'nodes/step':>10} {'tok/s':>7} "
              f"{'step ratio':>10} {'tok/s ratio':>11} identical")
        for name, config, extra in configs:
            pair = {}
            for mode, trees, fields in (("chain", False, config), ("tree", True, {**config, **extra})):
                start = time.perf_counter()
                m, tokens = run(args.model, fields, trees, workload, params)
                per_step = m.num_generated_tokens / max(m.num_steps, 1)
                row = {"workload": w, "config": name, "mode": mode, "fields": fields, "tokens_per_step": per_step,
                       "tau": m.mean_acceptance_length, "nodes_per_step": m.num_draft_tokens / max(m.num_steps, 1),
                       "tokens_per_s": m.tokens_per_s, "identical": tokens == base_tokens,
                       "wall_s": time.perf_counter() - start, "load": os.getloadavg()[0]}
                pair[mode] = row
                rows.append(row)
            for mode in ("chain", "tree"):
                r = pair[mode]
                ratio = r["tokens_per_step"] / pair["chain"]["tokens_per_step"]
                speed = r["tokens_per_s"] / pair["chain"]["tokens_per_s"]
                print(f"  {name:<14} {mode:<6} {r['tokens_per_step']:>8.3f} {r['tau']:>5.2f} {r['nodes_per_step']:>10.2f} "
                      f"{r['tokens_per_s']:>7.0f} {ratio:>9.3f}x {speed:>10.2f}x {'yes' if r['identical'] else 'NO'}",
                      flush=True)
    print(f"\nmodel {args.model or 'embedded default'}, batch 1, greedy, 1 torch thread; load average now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"max_tokens": args.max_tokens, "model": args.model, "rows": rows}, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
