"""Suffix decoding against n-gram on agentic-style workloads, side by side in one run.

Three workloads built from real text (the held-out standard-library files shipped with the
embedded model, so the target never trained on them), each a sequence of requests run one at
a time (batch 1, greedy) through one engine per method, so that later requests can reuse what
earlier ones produced (suffix decoding's global tree; n-gram sees only its own request):

  edit   multi-turn edit sessions: the model is shown a function ("# original") and writes it
         out again ("# revised"); the next turn shows the original and the last revision and
         asks for another one. Three turns per function.
  json   tool-call logs: each prompt is a list of JSON tool calls over stdlib file names with
         small changes (paths, line numbers), and the model writes the next calls.
  chat   plain prose for contrast: the opening of a module docstring, continued.

Printed per workload and method: τ (mean acceptance length over the steps that verified drafts,
bonus included, vLLM's convention), tokens per target step (over all decode steps: what the
speedup follows), drafts per step,
tokens/s, speedup over plain decoding of the same round (median over interleaved rounds), and
whether the output equals plain decoding's. A fresh engine per (round, method, workload), so no
round sees responses of an earlier one.

    python3 benchmarks/agentic.py [--model DIR] [--max-tokens 128] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import random
import statistics
import time
from importlib import resources

METHODS: list[tuple[str, dict | None]] = [
    ("baseline", None),
    ("ngram k4", {"method": "ngram", "num_speculative_tokens": 4}),
    ("ngram k8 2..5", {"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_min": 2,
                       "prompt_lookup_max": 5}),
    ("suffix k8", {"method": "suffix", "num_speculative_tokens": 8}),
    ("suffix", {"method": "suffix"}),  # K = tree depth (24), a maximum
]


def heldout_files() -> list[dict]:
    with resources.files("specpath").joinpath("assets/stdlib_heldout.jsonl.gz").open("rb") as raw:
        return [json.loads(line) for line in gzip.open(raw, "rt", encoding="utf-8")]


def functions(files: list[dict], count: int, max_chars: int) -> list[str]:
    """Top-level functions and methods of the held-out files, short enough to show twice."""
    found = []
    for record in files:
        try:
            tree = ast.parse(record["text"])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                src = ast.get_source_segment(record["text"], node)
                if src and 120 <= len(src) <= max_chars and "\t" not in src:
                    found.append(src)
    random.Random(0).shuffle(found)
    return found[:count]


def edit_sessions(files: list[dict], sessions: int, turns: int, budget: int):
    """Yields prompt builders: each turn's prompt depends on the previous turn's output."""
    out = []
    for src in functions(files, sessions, budget // 3):
        def turn(i: int, previous: str | None, src=src) -> str:
            if previous is None:
                return f"# original\n{src}\n\n\n# revised\n"
            return f"# original\n{src}\n\n\n# revised (turn {i})\n{previous}\n\n\n# revised (turn {i + 1})\n"
        out.append([turn] * turns)
    return out


def tool_call_prompts(files: list[dict], count: int) -> list[str]:
    rng = random.Random(1)
    paths = [r["path"] for r in files]
    tools = ["read_file", "grep", "read_file", "list_dir"]
    prompts = []
    for _ in range(count):
        lines = []
        for _ in range(6):
            tool = rng.choice(tools)
            args = {"path": f"Lib/{rng.choice(paths)}"}
            if tool == "read_file":
                start = rng.randrange(1, 400)
                args.update(start=start, end=start + rng.choice([20, 40, 80]))
            elif tool == "grep":
                args.update(pattern=rng.choice(["def ", "class ", "import ", "return "]))
            lines.append(json.dumps({"tool": tool, "arguments": args}))
        prompts.append("# tool calls\n" + "\n".join(lines) + "\n")
    return prompts


def prose_prompts(files: list[dict], count: int) -> list[str]:
    out = []
    for record in files:
        try:
            doc = ast.get_docstring(ast.parse(record["text"]))
        except SyntaxError:
            continue
        if doc and len(doc) > 200:
            out.append(doc[:300])
    return out[:count]


def run_workload(llm, workload, params) -> tuple[list, list[list[int]], float]:
    """Run every request of a workload in order; edit sessions feed outputs forward."""
    metrics, tokens, elapsed = [], [], 0.0
    for item in workload:
        if isinstance(item, str):
            turns = [lambda i, p, item=item: item]
        else:
            turns = item
        previous = None
        for i, make in enumerate(turns):
            prompt = make(i, previous)
            start = time.perf_counter()
            out = llm.generate([prompt], params)[0]
            elapsed += time.perf_counter() - start
            metrics.append(out.metrics)
            tokens.append(out.token_ids)
            previous = out.text if hasattr(out, "text") else llm.tokenizer.decode(out.token_ids)
    return metrics, tokens, elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="target checkpoint (default: the embedded model)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workloads", default="edit,json,chat")
    p.add_argument("--json", default=None)
    args = p.parse_args()

    import torch

    from specpath.engine.llm import LLM, SamplingParams
    from specpath.engine.metrics import SpecMetrics

    torch.set_num_threads(1)
    files = heldout_files()
    context = 1024 if args.model is None else 2048
    budget = context - args.max_tokens * 3 - 64
    workloads = {
        "edit": edit_sessions(files, 4, 3, budget),
        "json": tool_call_prompts(files, 8),
        "chat": prose_prompts(files, 8),
    }
    chosen = [w for w in args.workloads.split(",") if w in workloads]
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    results: dict = {w: {name: {"speedup": [], "tps": []} for name, _ in METHODS} for w in chosen}
    for _ in range(args.repeats):
        for w in chosen:
            round_tps = {}
            for name, config in METHODS:
                llm = LLM(args.model, config, num_threads=1)
                llm.generate(["def f(x):\n    return x\n"], SamplingParams(max_tokens=8, ignore_eos=True))
                cache = getattr(llm.engine.runner.speculator, "cache", None)
                for req_id in cache.cached_requests if cache is not None else ():
                    cache.evict(req_id)  # the warm-up must not seed suffix decoding's global tree
                parts, tokens, elapsed = run_workload(llm, workloads[w], params)
                total = SpecMetrics.total(parts, elapsed_s=elapsed)
                round_tps[name] = total.tokens_per_s
                r = results[w][name]
                r.update(metrics=total, tokens=tokens)
                r["tps"].append(total.tokens_per_s)
            for name, _ in METHODS:
                results[w][name]["speedup"].append(round_tps[name] / round_tps["baseline"])
    rows = []
    for w in chosen:
        base_tokens = results[w]["baseline"]["tokens"]
        print(f"\n{w}: {len(results[w]['baseline']['tokens'])} requests x {args.max_tokens} tokens")
        header = f"  {'method':<14} {'τ':>5} {'tok/step':>8} {'drafts/step':>11} {'tok/s':>7} {'speedup':>8} identical"
        print(header)
        for name, config in METHODS:
            r, m = results[w][name], results[w][name]["metrics"]
            tau = m.mean_acceptance_length if config else 1.0
            drafts = m.num_draft_tokens / max(m.num_steps, 1) if config else 0.0
            per_step = m.num_generated_tokens / max(m.num_steps, 1)
            row = {"workload": w, "method": name, "config": config, "tau": tau, "tokens_per_step": per_step,
                   "drafts_per_step": drafts,
                   "tokens_per_s": statistics.median(r["tps"]), "speedup": statistics.median(r["speedup"]),
                   "speedups": r["speedup"], "identical": r["tokens"] == base_tokens}
            rows.append(row)
            print(f"  {name:<14} {tau:>5.2f} {per_step:>8.2f} {drafts:>11.2f} {row['tokens_per_s']:>7.0f} {row['speedup']:>7.2f}x "
                  f"{'yes' if row['identical'] else 'NO'}")
    print(f"\nmodel {args.model or 'embedded default'}, batch 1, greedy, 1 torch thread; medians of "
          f"{args.repeats} interleaved rounds; load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"max_tokens": args.max_tokens, "repeats": args.repeats, "rows": rows}, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
