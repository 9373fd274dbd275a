"""Decode speed on a real model (SmolLM2-135M by default): fp32, bf16, weight-only int8/int4, ± ngram.

Same GGUF, same six prompts (three code completions of held-out standard-library source, three
chat requests through the model's template), greedy, exactly ``--new-tokens`` new tokens (EOS
ignored so every mode does the same work), batch 1. Every engine is built first; then prompts
run prompt-major (each prompt through every mode in turn) so machine noise hits all modes alike.
Prints, side by side: tok/s by wall time and by process CPU time, the speedup over bf16 plain,
the share of each step spent in the model's forward (the rest is per-step Python work), tokens
per target step, and how often greedy output differs from the reference mode's on the same
prompt (bf16 vs fp32, speculative vs plain in the same dtype). Per-prompt rows follow.

The figure printed first says whether the machine was quiet (load average against cores);
on a shared machine the absolute numbers are indicative, the ratios less so.

    python benchmarks/real_model.py [--model smollm2-135m] [--new-tokens 128] [--threads 2]
        [--modes fp32,bf16,int8,bf16+ngram4,int8+ngram4] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time

import torch

MODES = {
    "fp32": {"dtype": "float32"},
    "bf16": {"dtype": "bfloat16"},
    "int8": {"dtype": "bfloat16", "quantization": "int8"},
    "fp32+ngram4": {"dtype": "float32", "spec": {"method": "ngram", "num_speculative_tokens": 4}},
    "bf16+ngram4": {"dtype": "bfloat16", "spec": {"method": "ngram", "num_speculative_tokens": 4}},
    "int8+ngram4": {"dtype": "bfloat16", "quantization": "int8",
                    "spec": {"method": "ngram", "num_speculative_tokens": 4}},
    "int4": {"dtype": "bfloat16", "quantization": "int4"},
    "int4+ngram4": {"dtype": "bfloat16", "quantization": "int4",
                    "spec": {"method": "ngram", "num_speculative_tokens": 4}},
}
"""Mode -> LLM arguments. A speculative mode is compared with the plain mode of its dtype."""

CHAT_REQUESTS = (
    "Refactor this function so it is easier to read, and explain the change:\n\n"
    "def f(l):\n    r = []\n    for i in range(len(l)):\n        if l[i] % 2 == 0:\n"
    "            r.append(l[i] * l[i])\n    return r\n",
    "Summarise in two sentences: The Python standard library contains modules for file I/O, "
    "networking, data compression, dates and times, text processing, testing and much more. Many "
    "of them are written in Python itself, so reading their source is a good way to learn idiomatic "
    "code. Some, like json and csv, are used in nearly every project.",
    "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
)


def machine_state() -> tuple[bool, str]:
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    quiet = load < 0.75 * cores
    return quiet, f"load average {load:.1f} on {cores} cores: {'quiet' if quiet else 'NOT quiet, figures are indicative'}"


def prompts(tokenizer, n_code: int = 3, code_chars: int = 700) -> list[tuple[str, str]]:
    """(kind, prompt text): code windows of held-out stdlib files, then chat requests rendered."""
    from specpath_engine.chat import render_chat
    from specpath_engine.modeling.named_models import embedded_model_path

    heldout = embedded_model_path().parent / "stdlib_heldout.jsonl.gz"
    with gzip.open(heldout, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    texts = [t for t in texts if len(t) > 4 * code_chars]
    out = []
    for i in range(n_code):
        text = texts[(i * 7) % len(texts)]
        start = text.find("\ndef ", len(text) // 3)
        start = start + 1 if start >= 0 else len(text) // 3
        out.append(("code", text[start : start + code_chars]))
    for request in CHAT_REQUESTS:
        out.append(("chat", render_chat(tokenizer.chat_template, [{"role": "user", "content": request}],
                                        bos_token=tokenizer.bos_token, eos_token=tokenizer.eos_token)))
    return out


class ForwardTimer:
    """Wraps ``model.forward`` to add up the seconds spent inside it."""

    def __init__(self, model) -> None:
        self.seconds = 0.0
        self._forward = model.forward
        model.forward = self  # instance attribute: only this model object

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self._forward(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", default="fp32,bf16,int8,bf16+ngram4,int8+ngram4")
    parser.add_argument("--prompts", type=int, default=6, help="use the first N of the six prompts")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from specpath_engine.llm import LLM, SamplingParams

    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}; known: {', '.join(MODES)}")
    quiet_before, state_before = machine_state()
    print(f"before: {state_before}", flush=True)
    engines = {}
    for mode in modes:
        kw = dict(MODES[mode])
        spec = kw.pop("spec", None)
        start = time.perf_counter()
        engines[mode] = LLM(args.model, spec, max_model_len=1024, **kw)
        print(f"built {mode} in {time.perf_counter() - start:.1f} s", flush=True)
    first = next(iter(engines.values()))
    work = prompts(first.tokenizer)[: args.prompts]
    params = SamplingParams(max_tokens=args.new_tokens, ignore_eos=True)
    timers, by_model = {}, {}  # engines of one dtype share the weights (and so one timer)
    for mode, llm in engines.items():
        llm.generate(["def f(x):\n"], SamplingParams(max_tokens=8, ignore_eos=True))  # warm-up
        timers[mode] = by_model.setdefault(id(llm.model), None) or ForwardTimer(llm.model)
        by_model[id(llm.model)] = timers[mode]
    results: dict[str, list[dict]] = {mode: [] for mode in modes}
    for i, (kind, text) in enumerate(work):
        for mode, llm in engines.items():
            timer = timers[mode]
            before = timer.seconds
            wall, cpu = time.perf_counter(), time.process_time()
            out = llm.generate([text], params)[0]
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            results[mode].append({
                "prompt": i, "kind": kind, "prompt_tokens": len(out.prompt_token_ids),
                "wall_s": wall, "cpu_s": cpu, "forward_s": timer.seconds - before,
                "steps": out.metrics.num_steps, "tokens": out.token_ids,
            })
            print(f"prompt {i} ({kind}, {len(out.prompt_token_ids)} tok) {mode:12s} "
                  f"{len(out.token_ids) / wall:6.1f} tok/s", flush=True)
    quiet_after, state_after = machine_state()

    def reference(mode: str) -> str | None:
        if "+" in mode:
            base = mode.split("+")[0]
            return base if base in results else None
        if mode != "fp32" and "fp32" in results and "quantization" not in MODES[mode]:
            return "fp32"
        return None

    base_mode = "bf16" if "bf16" in results else modes[0]
    base_tps = sum(len(r["tokens"]) for r in results[base_mode]) / sum(r["wall_s"] for r in results[base_mode])
    rows = []
    for mode in modes:
        rs = results[mode]
        tokens = sum(len(r["tokens"]) for r in rs)
        ref = reference(mode)
        diverged = None if ref is None else sum(a["tokens"] != b["tokens"] for a, b in zip(rs, results[ref]))
        tps = tokens / sum(r["wall_s"] for r in rs)
        rows.append({
            "mode": mode,
            "tok_s_wall": tps,
            "tok_s_cpu": tokens / sum(r["cpu_s"] for r in rs),
            "speedup_vs_" + base_mode: tps / base_tps,
            "forward_share": sum(r["forward_s"] for r in rs) / sum(r["wall_s"] for r in rs),
            "tokens_per_step": tokens / sum(r["steps"] for r in rs),
            "compared_with": ref,
            "prompts_differing": diverged,
            "per_prompt_tok_s": [len(r["tokens"]) / r["wall_s"] for r in rs],
        })
    print(f"\nafter: {state_after}")
    print(f"{args.model}, {len(work)} prompts ({', '.join(k for k, _ in work)}), {args.new_tokens} new tokens, "
          f"batch 1, greedy, {args.threads} threads\n")
    header = f"{'mode':12s} {'tok/s':>7s} {'tok/s cpu':>9s} {'vs ' + base_mode:>8s} {'fwd share':>9s} " \
             f"{'tok/step':>8s}  greedy differs"
    print(header)
    for r in rows:
        differs = "-" if r["compared_with"] is None else f"{r['prompts_differing']}/{len(work)} vs {r['compared_with']}"
        print(f"{r['mode']:12s} {r['tok_s_wall']:7.1f} {r['tok_s_cpu']:9.1f} "
              f"{r['speedup_vs_' + base_mode]:7.2f}x {r['forward_share']:9.0%} {r['tokens_per_step']:8.2f}  {differs}")
    print("\nper prompt tok/s:")
    for r in rows:
        print(f"  {r['mode']:12s} " + " ".join(f"{v:6.1f}" for v in r["per_prompt_tok_s"])
              + f"   median {statistics.median(r['per_prompt_tok_s']):.1f}")
    if not (quiet_before and quiet_after):
        print("\nthe machine was not quiet during the run: treat absolute tok/s as indicative")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"state": [state_before, state_after], "rows": rows,
                       "results": {m: [{k: v for k, v in r.items() if k != "tokens"} for r in rs]
                                   for m, rs in results.items()}}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
