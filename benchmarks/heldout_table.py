"""Issue 30's table: every method against plain decoding on held-out code and code-writing chat,
bf16 and int4 targets, every engine interleaved in one process.

    python benchmarks/heldout_table.py [--batch 1] [--temperature 0] [--out result.json]

Prompts: ``--num`` (6) code completions and ``--num`` chat requests about code from the held-out
split of the built-in corpus (``specpath_train.target_text``: stdlib files no drafter's training
text came from; seed 99 by default), ``--max-tokens`` (128) new tokens with EOS ignored. Engines:
plain bf16 (the reference), each of ``--methods`` with its shipped drafter and configuration (what
``specpath demo`` and ``specpath bench`` run; ngram with K=4); then plain int4 and each of
``--int4-methods`` over it; and last in each group its plain engine again, built a second time
and measured like a method (``--no-control`` leaves it out): plain against plain, its ratio is
the noise floor of the group's (at batch 8, where every round is one batch of ~4 s, a round's
ratio swings by +-5% when the engines run it one after another). Within each group every batch
runs in every engine at once, one engine step each in turn (``--interleave step``; ``batch``: one
engine after another), ``--repeats`` rounds, the order rotated each round
(:mod:`specpath_engine.bench.measure`); a
speedup is the median over rounds of the ratio to the group's plain engine within a round (int4
plain against bf16 plain: the two groups' medians, measured one after the other). Prints the
table (speedup and τ per workload, greedy identity with the engine's own plain decoding) and,
with ``--out``, writes every row (per-prompt speedups, acceptance by position, step costs) as
JSON. Waits for a quiet machine first (``--max-load``, as ``specpath bench``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BF16 = "bf16 plain"
INT4 = "int4 plain"


def workloads(num: int, seed: int):
    """(completion, chat) workloads from the corpus's held-out split."""
    from specpath_engine.bench.workloads import Workload
    from specpath_train.target_text import chat_instructions, code_snippets

    code = code_snippets("heldout", num, seed=seed)
    chat = chat_instructions("heldout", num, seed=seed + 1)
    return (Workload(name="completion", items=tuple(code)),
            Workload(name="chat", items=tuple([{"role": "user", "content": m}] for m in chat)))


def engines(model: str, methods: list[str], int4_methods: list[str], threads: int, progress,
            control: bool = True) -> list[list]:
    """Two groups of ``(label, config, llm)``: bf16 plain (the group's reference) and its methods;
    int4 plain and its methods; with ``control``, each group ends with a second plain engine of its
    target, measured like a method: its "speedup" is the noise floor of the group's ratios."""
    from specpath.config.model import ModelConfig
    from specpath_engine.bench.measure import build_engines
    from specpath_engine.cli_run import demo_configs
    from specpath_engine.modeling.named_models import resolve_model_path

    target = ModelConfig(model=str(resolve_model_path(model)))
    out = []
    for label, quantization, only in ((BF16, None, methods), (INT4, "int4", int4_methods)):
        runs, skipped = demo_configs(None, set(only), target=target)
        if skipped:
            raise SystemExit(f"not run: {skipped}")
        if "ngram" in only:  # its K: ngram declares none
            runs = [(m, {**c, "num_speculative_tokens": 4} if m == "ngram" else c) for m, c in runs]
        runs = [(label, None)] + [(m if quantization is None else f"int4 + {m}", c) for m, c in runs
                                  if m in only] + ([(f"{label} again", None)] if control else [])
        built, failed = build_engines(runs, model=model, progress=progress, engine_kwargs={
            "dtype": "bfloat16", "num_threads": threads, "quantization": quantization})
        if failed:
            raise SystemExit(f"failed to build: {failed}")
        out.append(built)
    return out


def table(rows: list[dict]) -> str:
    """The issue's table: per method, each workload's speedup (over its own target's plain) and τ."""
    by = {(r["method"], r["workload"], r["batch_size"], r["temperature"]): r for r in rows}
    settings = sorted({(r["batch_size"], r["temperature"]) for r in rows})
    names = list(dict.fromkeys(r["method"] for r in rows))
    kinds = list(dict.fromkeys(r["workload"] for r in rows))
    lines = []
    for b, t in settings:
        lines += [f"\nbatch {b}, temperature {t:g}: speedup over its own plain (tau; greedy-identical requests)",
                  "| method | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
        for name in names:
            cells = []
            for kind in kinds:
                r, bf16 = by.get((name, kind, b, t)), by.get((BF16, kind, b, t))
                if r is None:
                    cells.append("-")
                elif name in (BF16, INT4):
                    cells.append(f"{r['tokens_per_s']:.0f} tok/s" + (
                        f" ({r['tokens_per_s'] / bf16['tokens_per_s']:.2f}x bf16)" if name == INT4 and bf16 else ""))
                else:
                    same = "" if r["identical_requests"] is None else f"; {r['identical_requests']}/{r['num_requests']}"
                    cells.append(f"{r['speedup']:.2f}x ({r['mean_acceptance_length']:.2f}{same})")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("per prompt (per batch above batch 1), over its own plain, median of the rounds:")
        for name in names:
            if name not in (BF16, INT4):
                lines.append(f"  {name}: " + "; ".join(
                    f"{kind} " + " ".join(f"{x:.2f}" for x in by[(name, kind, b, t)]["per_batch_speedup"])
                    for kind in kinds if (name, kind, b, t) in by))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--methods", default="suffix,ngram,mtp,eagle3,dflash,dspark,draft_model")
    p.add_argument("--int4-methods", default="suffix,eagle3,mtp")
    p.add_argument("--num", type=int, default=6, help="prompts per workload")
    p.add_argument("--seed", type=int, default=99)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--batch", type=int, nargs="+", default=[1])
    p.add_argument("--temperature", type=float, nargs="+", default=[0.0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--batched-repeats", type=int, default=None,
                   help="rounds at batch sizes above 1 (default --repeats): a batch of 8 is a few seconds an "
                        "engine and its rounds spread by a few percent, so more of them are cheap and tell more")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-load", type=float, default=0.5)
    p.add_argument("--wait", type=float, default=120.0)
    p.add_argument("--interleave", choices=("step", "batch"), default="step",
                   help="step: every engine runs each batch at once, a step each in turn; batch: one after another")
    p.add_argument("--out", type=Path)
    p.add_argument("--no-control", dest="control", action="store_false",
                   help="leave out the second plain engine per group (the noise floor: plain against plain)")
    args = p.parse_args(argv)

    from specpath_engine.bench.measure import Setting, measure
    from specpath_engine.harness import machine_load, wait_for_quiet

    def progress(what: str) -> None:
        print(f"  {what}", file=sys.stderr, end="\r")

    load = wait_for_quiet(args.max_load, timeout_s=args.wait, log=lambda m: print(m, file=sys.stderr)) \
        if args.wait > 0 else machine_load()
    groups = engines(args.model, args.methods.split(","), args.int4_methods.split(","), args.threads, progress,
                     control=args.control)
    rows = []
    for w in workloads(args.num, args.seed):
        for b in args.batch:
            for t in args.temperature:
                for group in groups:
                    repeats = args.batched_repeats if b > 1 and args.batched_repeats else args.repeats
                    rows += measure(group, Setting(workload=w, batch_size=b, temperature=t,
                                                   max_tokens=args.max_tokens), repeats=repeats, progress=progress,
                                    interleave=args.interleave)
    print(f"\nload per core {load:.2f} at start, {machine_load():.2f} at the end")
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps({"argv": sys.argv[1:], "load": [load, machine_load()], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
