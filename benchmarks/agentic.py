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
  chat   plain prose for contrast: the opening of a module docstring, continued (through the
         model's chat template, as a request to explain it, where the model has one).

Printed per workload and method: τ (mean acceptance length over the steps that verified drafts,
bonus included, vLLM's convention), acceptance by position, tokens per target step (over all
decode steps: what the speedup follows where a verify step costs what a plain step does), drafts
per step, tokens/s, speedup over plain decoding and over the faster n-gram setting of the same
round (medians over interleaved rounds), per-request tokens per step, and whether the output
equals plain decoding's. A fresh engine per (round, method, workload), so no round sees
responses of an earlier one. Waits for a quiet machine first (``--max-load``, ``--wait``, as the
other benchmarks).

    python3 benchmarks/agentic.py [--model smollm2-135m|DIR] [--quick] [--max-tokens 128] [--repeats 3]
                                  [--dtype bfloat16] [--json out.json]

``--model`` takes what ``LLM`` takes (a named model such as ``smollm2-135m``, an HF checkpoint
directory such as ``~/.cache/specpath/models/smollm2-135m-float32``); a real model runs in bf16 unless ``--dtype``
says otherwise (the embedded model keeps its own dtype). ``--quick``: fewer, shorter requests
and one round (about five minutes for SmolLM2 on a quiet 2-core machine).
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
    with resources.files("specpath_engine").joinpath("assets/stdlib_heldout.jsonl.gz").open("rb") as raw:
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


def chat_prompts(tokenizer, texts: list[str]) -> list[str]:
    """``texts`` as one-turn chats through the model's template (unchanged without one)."""
    from specpath_engine.chat import render_chat

    if not getattr(tokenizer, "chat_template", None):
        return texts
    return [render_chat(tokenizer.chat_template,
                        [{"role": "user", "content": f"Explain what this module does:\n\n{text}"}],
                        bos_token=tokenizer.bos_token, eos_token=tokenizer.eos_token) for text in texts]


def build_workloads(files: list[dict], *, quick: bool, budget: int) -> dict[str, list]:
    sessions, turns, calls, prose = (2, 2, 3, 3) if quick else (4, 3, 8, 8)
    return {
        "edit": edit_sessions(files, sessions, turns, budget),
        "json": tool_call_prompts(files, calls),
        "chat": prose_prompts(files, prose),
    }


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


def fresh_engine(model, config, *, dtype: str, max_model_len: int):
    """A warmed-up engine whose suffix global tree (if any) holds nothing from the warm-up."""
    from specpath_engine.llm import LLM, SamplingParams

    llm = LLM(model, config, num_threads=1, dtype=dtype, max_model_len=max_model_len)
    llm.generate(["def f(x):\n    return x\n"], SamplingParams(max_tokens=8, ignore_eos=True))
    cache = getattr(llm.engine.runner.speculator, "cache", None)
    for req_id in cache.cached_requests if cache is not None else ():
        cache.evict(req_id)
    return llm


def per_step(m) -> float:
    return m.num_generated_tokens / max(m.num_steps, 1)


COLUMNS = (
    ("method", lambda r: r["method"]),
    ("τ", lambda r: f"{r['tau']:.2f}"),
    ("acceptance by position", lambda r: " ".join(f"{x:.2f}" for x in r["acceptance_by_position"][:8]) or "-"),
    ("tok/step", lambda r: f"{r['tokens_per_step']:.2f}"),
    ("drafts/step", lambda r: f"{r['drafts_per_step']:.2f}"),
    ("tok/s", lambda r: f"{r['tokens_per_s']:.1f}"),
    ("speedup", lambda r: f"{r['speedup']:.2f}x"),
    ("vs ngram", lambda r: f"{r['vs_ngram']:.2f}x" if r["vs_ngram"] is not None else "-"),
    ("per-request tok/step", lambda r: " ".join(f"{x:.1f}" for x in r["request_tokens_per_step"])),
    ("identical", lambda r: "yes" if r["identical"] else "NO"),
)


def main() -> int:
    from specpath_engine import harness

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_benchmark_arguments(p, repeats=3)
    p.add_argument("--workloads", default="edit,json,chat")
    p.add_argument("--dtype", default=None, help="target dtype (default: bfloat16 for --model, else auto)")
    p.add_argument("--quick", action="store_true", help="2 edit sessions x 2 turns, 3 tool logs, 3 chats, "
                   "64 tokens, one round (unless --max-tokens / --repeats say otherwise)")
    p.set_defaults(max_tokens=None, repeats=None)
    args = p.parse_args()
    args.max_tokens = args.max_tokens or (64 if args.quick else 128)
    args.repeats = args.repeats or (1 if args.quick else 3)
    dtype = args.dtype or ("bfloat16" if args.model else "auto")

    import torch

    from specpath_engine.llm import SamplingParams
    from specpath_engine.metrics import SpecMetrics

    torch.set_num_threads(1)
    only = set(args.methods.split(",")) if args.methods else None
    methods = [(n, c) for n, c in METHODS if n == harness.BASELINE or only is None or n in only]
    files = heldout_files()
    context = 1024 if args.model is None else 2048
    workloads = build_workloads(files, quick=args.quick, budget=context - args.max_tokens * 3 - 64)
    chosen = [w for w in args.workloads.split(",") if w in workloads]
    load = harness.wait_for_quiet(args.max_load, timeout_s=args.wait)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0.0)
    results: dict = {w: {name: {"speedup": [], "vs_ngram": [], "tps": []} for name, _ in methods} for w in chosen}
    started = time.perf_counter()
    for _ in range(args.repeats):
        for w in chosen:
            round_tps = {}
            for name, config in methods:
                llm = fresh_engine(args.model, config, dtype=dtype, max_model_len=context)
                work = workloads[w]
                if w == "chat":
                    work = chat_prompts(llm.tokenizer, work)
                parts, tokens, elapsed = run_workload(llm, work, params)
                total = SpecMetrics.total(parts, elapsed_s=elapsed)
                round_tps[name] = total.tokens_per_s
                results[w][name].update(metrics=total, parts=parts, tokens=tokens)
                results[w][name]["tps"].append(total.tokens_per_s)
                model_name = f"{args.model or 'embedded default'} ({llm.engine_config.model_config.dtype})"
            ngram = max((t for n, t in round_tps.items() if n.startswith("ngram")), default=None)
            for name, _ in methods:
                results[w][name]["speedup"].append(round_tps[name] / round_tps[harness.BASELINE])
                results[w][name]["vs_ngram"].append(round_tps[name] / ngram if ngram else None)
    rows = []
    for w in chosen:
        base_tokens = results[w][harness.BASELINE]["tokens"]
        table = []
        for name, config in methods:
            r, m = results[w][name], results[w][name]["metrics"]
            vs = [x for x in r["vs_ngram"] if x is not None]
            table.append({
                "workload": w, "method": name, "config": config,
                "tau": m.mean_acceptance_length if config else 1.0,
                "acceptance_by_position": m.acceptance_rate_by_position if config else [],
                "tokens_per_step": per_step(m),
                "drafts_per_step": m.num_draft_tokens / max(m.num_steps, 1) if config else 0.0,
                "tokens_per_s": statistics.median(r["tps"]), "speedup": statistics.median(r["speedup"]),
                "speedups": r["speedup"], "vs_ngram": statistics.median(vs) if vs else None,
                "request_tokens_per_step": [per_step(x) for x in r["parts"]],
                "request_tau": [x.mean_acceptance_length for x in r["parts"]],
                "identical": r["tokens"] == base_tokens,
                "identical_requests": sum(a == b for a, b in zip(r["tokens"], base_tokens)),
            })
        print(f"\n{w}: {len(base_tokens)} requests, at most {args.max_tokens} tokens each")
        print(harness.format_table(table, COLUMNS))
        rows += table
    print(f"\nmodel {model_name}, batch 1, greedy, 1 torch thread; medians of {args.repeats} interleaved "
          f"round(s); {time.perf_counter() - started:.0f} s; load {load:.2f} per core at the start"
          f"{' (noisy)' if load > args.max_load else ''}, average now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"model": model_name, "max_tokens": args.max_tokens, "repeats": args.repeats,
                       "load_per_core": load, "rows": rows}, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
