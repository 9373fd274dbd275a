"""``specpath bench``: the benchmark users run on their own model and prompts.

    specpath bench --model smollm2-135m --methods suffix,eagle3 --workload code --workload chat \\
        --batch 1 8 --temperature 0 0.8 --repeats 2 --out bench-out/

Prints one table per (workload, batch, temperature), fastest first; ``--out DIR`` also writes
result.json, report.md, report.html and the plots (PNG and SVG).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

DEFAULT_WORKLOADS_CHAT = ("code", "code-chat", "chat", "edit")
DEFAULT_WORKLOADS_PLAIN = ("code",)


def add_subcommands(subparsers: Any) -> None:
    from specpath_engine.bench.workloads import BUILTIN
    from specpath_engine.cli_run import _add_engine_args

    p = subparsers.add_parser("bench", help="measure methods side by side on your model and prompts (tables, plots)")
    _add_engine_args(p)
    p.add_argument("--methods", help="comma-separated methods, each with its shipped drafter for this target "
                                     "(default: every installed method that resolves for it)")
    p.add_argument("--config", action="append", default=[], metavar="LABEL=JSON",
                   help="also run this speculative config under LABEL (repeatable)")
    p.add_argument("--workload", action="append", default=[], metavar="KIND|FILE.jsonl",
                   help=f"built-in kind ({', '.join(BUILTIN)}) or a .jsonl file of {{\"prompt\"}} / {{\"messages\"}} "
                        "lines (repeatable; default: every kind the model can run)")
    p.add_argument("--batch", type=int, nargs="+", default=[1], help="concurrent requests per call (default 1)")
    p.add_argument("--temperature", type=float, nargs="+", default=[0.0], help="default 0 (greedy)")
    p.add_argument("--max-tokens", type=int, default=128, help="new tokens per request (default 128)")
    p.add_argument("--honour-eos", action="store_true", help="stop at EOS (default: every reply is --max-tokens long)")
    p.add_argument("--num-speculative-tokens", type=int, default=None,
                   help="K for every method in --methods (default: each method's own, its shipped drafter's K and "
                        "draft tree, else 4)")
    p.add_argument("--repeats", type=int, default=2, help="interleaved rounds (default 2)")
    p.add_argument("--interleave", choices=("step", "batch"), default="step",
                   help="step (default): every engine runs each batch at once, one step each in turn, so the "
                        "machine's load falls on all alike; batch: one engine after another")
    p.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core (default 0.5)")
    p.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the gate (default 120; 0: no gate)")
    p.add_argument("--seed", type=int, default=0, help="request i samples with seed+i in every engine (default 0)")
    p.add_argument("--out", type=Path, help="directory for result.json, report.md, report.html and the plots")
    p.add_argument("--title", help="a heading for this result (docs/benchmarks.md sections use it)")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    p.set_defaults(func=cmd_bench)


class BenchError(ValueError):
    """A bench argument that cannot be used (one line)."""


def _positive(name: str, values: list, lo: float) -> None:
    for v in values:
        if not v >= lo:
            raise BenchError(f"{name} must be >= {lo:g}, got {v!r}")


def _runs(args: argparse.Namespace, model: str | None, chat_model: bool) -> tuple[list, list]:
    from specpath_engine.cli_run import demo_configs

    only = set(args.methods.split(",")) if args.methods else None
    target = None
    if model is not None:
        from specpath.config.model import ModelConfig
        from specpath_engine.modeling.named_models import resolve_model_path

        target = ModelConfig(model=str(resolve_model_path(model)))
    runs, skipped = demo_configs(args.num_speculative_tokens, only, target=target) if only != set() else ([], [])
    if only is not None:
        missing = only - {label for label, _ in runs} - {label for label, _ in skipped}
        if missing:
            raise BenchError(f"unknown method(s) {', '.join(sorted(missing))}: see `specpath methods`")
    for text in args.config:
        label, sep, body = text.partition("=")
        if not sep or not label:
            raise BenchError(f"--config {text!r}: expected LABEL=JSON")
        try:
            config = json.loads(body)
        except json.JSONDecodeError as exc:
            raise BenchError(f"--config {label}: not JSON ({exc})") from None
        if not isinstance(config, dict):
            raise BenchError(f"--config {label}: expected a JSON object")
        runs.append((label, config))
    return [("baseline", None), *runs], skipped


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_bench(args: argparse.Namespace, *, progress: bool = True) -> dict:
    from tqdm import tqdm

    from specpath_engine.bench.measure import Setting, build_engines, measure, runs_per_batch
    from specpath_engine.bench.workloads import load_workload
    from specpath_engine.cli_run import _engine_kwargs, demo_target
    from specpath_engine.harness import machine_load, wait_for_quiet
    from specpath_engine.modeling.named_models import resolve_model_path
    from specpath_engine.tokenizer import load_tokenizer

    _positive("--batch", args.batch, 1)
    _positive("--temperature", args.temperature, 0)
    _positive("--repeats", [args.repeats], 1)
    _positive("--max-tokens", [args.max_tokens], 1)
    model, note = demo_target(args.model)
    args.model = model
    chat_model = load_tokenizer(resolve_model_path(model)).chat_template is not None
    specs = args.workload or list(DEFAULT_WORKLOADS_CHAT if chat_model else DEFAULT_WORKLOADS_PLAIN)
    workloads = [load_workload(s) for s in specs]
    skipped: list[tuple[str, str]] = [("(model)", note)] if note else []
    if not chat_model:
        for w in [w for w in workloads if w.needs_chat_template]:
            skipped.append((f"workload {w.name}", "the model has no chat template (give prompts, or a chat model)"))
        workloads = [w for w in workloads if not w.needs_chat_template]
        if not workloads:
            raise BenchError("no workload this model can run: it has no chat template (use --workload code "
                             "or a file of prompts)")
    runs, not_run = _runs(args, model, chat_model)
    skipped += not_run
    load = wait_for_quiet(args.max_load, timeout_s=args.wait, log=lambda m: print(m, file=sys.stderr)) \
        if args.wait > 0 else machine_load()
    settings = [Setting(workload=w, batch_size=b, temperature=t, max_tokens=args.max_tokens,
                        ignore_eos=not args.honour_eos, seed=args.seed)
                for w in workloads for b in args.batch for t in args.temperature]
    def total(engines: int) -> int:
        return len(runs) + sum(runs_per_batch(engines, args.interleave) * args.repeats
                               * -(-len(s.workload.items) // s.batch_size)
                               for s in settings)

    bar = tqdm(total=total(len(runs)), desc="specpath bench", unit="run", disable=not progress, file=sys.stderr)

    def step(what: str) -> None:
        bar.set_postfix_str(what)
        bar.update(1)

    try:
        engines, failed = build_engines(runs, model=model, engine_kwargs=_engine_kwargs(args), progress=step)
        skipped += failed
        bar.total = total(len(engines))
        rows: list[dict] = []
        for s in settings:
            rows += measure(engines, s, repeats=args.repeats, progress=step, interleave=args.interleave)
    finally:
        bar.close()
    llm = engines[0][2]
    return {
        "title": args.title,
        "command": _command(args, specs),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "load_at_start": load,
                    "gated": args.wait > 0, "max_load": args.max_load},
        "settings": {"model": model or "embedded", "dtype": str(llm.engine_config.model_config.dtype),
                     "quantization": args.quantization, "threads": _threads_used(),
                     "workloads": specs, "batch": args.batch, "temperature": args.temperature,
                     "max_tokens": args.max_tokens, "ignore_eos": not args.honour_eos, "repeats": args.repeats,
                     "interleave": args.interleave},
        "rows": rows,
        "skipped": skipped,
    }


def _command(args: argparse.Namespace, specs: list[str]) -> str:
    """The command line that reproduces this run (what docs/benchmarks.md shows)."""
    import shlex

    parts = ["specpath", "bench", "--model", args.model or "embedded"]
    if args.methods:
        parts += ["--methods", args.methods]
    for c in args.config:
        parts += ["--config", c]
    for w in specs:
        parts += ["--workload", w]
    parts += ["--batch", *map(str, args.batch), "--temperature", *(f"{t:g}" for t in args.temperature),
              "--max-tokens", str(args.max_tokens), "--repeats", str(args.repeats)]
    if args.interleave != "step":
        parts += ["--interleave", args.interleave]
    for flag, value in (("--dtype", args.dtype if args.dtype != "auto" else None), ("--quantization", args.quantization),
                        ("--threads", args.threads)):
        if value is not None:
            parts += [flag, str(value)]
    if args.honour_eos:
        parts.append("--honour-eos")
    return shlex.join(parts)


def _threads_used() -> int:
    import torch

    return torch.get_num_threads()


def cmd_bench(args: argparse.Namespace) -> int:
    from specpath_engine.bench import report
    from specpath_engine.bench.workloads import WorkloadError

    try:
        result = run_bench(args, progress=not args.json)
    except (BenchError, WorkloadError) as exc:
        print(f"specpath: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(report.markdown(result).splitlines()[0])
        for key, rows in report.groups(result["rows"]).items():
            print(f"\n{report.title(key)}\n{report.text_table(rows)}\n{report.fastest(rows)}")
        print("\n" + report.NOTES)
        for name, reason in result["skipped"]:
            print(f"skipped {name}: {reason}")
    if args.out is not None:
        written = report.write_outputs(result, args.out)
        print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0
