"""``specpath run`` and ``specpath demo``: the reference engine from the command line.

``run`` generates for one prompt, with or without speculation. ``demo`` runs fixed Python
code-completion prompts through the no-speculation baseline and through every installed
method that resolves with its demo defaults, then prints τ, acceptance by position, tokens/s,
the speedup over the baseline and whether greedy output is identical to the baseline's.

Only the standard library is imported at module level (the core CLI builds its parser from
here); torch and the engine load inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

DEMO_PROMPTS: tuple[str, ...] = (
    'import os\nimport sys\n\n\ndef main(argv=None):\n    """Parse the command line and run."""\n',
    "class Queue:\n    def __init__(self, maxsize=0):\n        self.maxsize = maxsize\n        self.queue = []\n\n    def put(self, item):\n",
    "def _read_file(path, encoding='utf-8'):\n    with open(path, encoding=encoding) as f:\n",
    "    def __repr__(self):\n        return '%s(%r)' % (self.__class__.__name__, self.",
    "import unittest\n\n\nclass TestParser(unittest.TestCase):\n\n    def test_empty(self):\n        self.assertEqual(",
    "def split_lines(text):\n    lines = []\n    for line in text.splitlines():\n        line = line.strip()\n        if not line:\n",
)
"""Code-completion prompts in the style of the standard library (the default model's corpus)."""

DEFAULT_DEMO_K = 4


def add_subcommands(subparsers: Any) -> None:
    """Register ``run`` and ``demo`` on the ``specpath`` CLI."""
    from specpath.config.args import add_speculative_args

    p = subparsers.add_parser("run", help="generate with the reference engine (default: the embedded model)")
    p.add_argument("--prompt", required=True, help="prompt text")
    add_speculative_args(p)
    _add_engine_args(p)
    p.add_argument("--max-tokens", type=int, default=128, help="most tokens to generate (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print one JSON object: text, token_ids, metrics")
    p.set_defaults(func=cmd_run)

    p = subparsers.add_parser("demo", help="every installed method on fixed code prompts, against the baseline")
    _add_engine_args(p)
    p.add_argument("--max-tokens", type=int, default=128, help="tokens per prompt (default 128)")
    p.add_argument("--num-speculative-tokens", type=int, default=DEFAULT_DEMO_K,
                   help=f"K for methods without a demo config of their own (default {DEFAULT_DEMO_K})")
    p.add_argument("--methods", help="comma-separated subset of methods to run")
    p.add_argument("--json", action="store_true", help="print the result rows as JSON")
    p.set_defaults(func=cmd_demo)


def _add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="target checkpoint directory (default: the embedded model)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: tiny models lose time in thread barriers)")
    p.add_argument("--enable-prefix-caching", action="store_true")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow code named by the configuration to run (custom_class proposers)")


def _speculative_input(args: argparse.Namespace) -> dict | None:
    from specpath.config.args import load_speculative_config_text, merge_legacy, normalize_keys

    data = load_speculative_config_text(args.speculative_config) if args.speculative_config else {}
    data = merge_legacy(
        normalize_keys(data), spec_method=args.spec_method, spec_model=args.spec_model, spec_tokens=args.spec_tokens
    )
    return data or None


def cmd_run(args: argparse.Namespace) -> int:
    from specpath.engine.llm import LLM, SamplingParams

    llm = LLM(
        args.model,
        _speculative_input(args),
        num_threads=args.threads,
        enable_prefix_caching=args.enable_prefix_caching,
        trust_remote_code=args.trust_remote_code,
    )
    params = SamplingParams(
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed
    )
    out = llm.generate([args.prompt], params)[0]
    metrics = out.metrics.as_dict()
    if args.json:
        keys = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "mean_acceptance_length",
                "acceptance_rate_by_position", "tokens_per_s")
        print(json.dumps({"text": out.text, "token_ids": out.token_ids,
                          "finish_reason": out.finish_reason, "metrics": {k: metrics[k] for k in keys}}))
    else:
        sys.stdout.write(args.prompt + out.text + "\n")
        print(
            f"[{len(out.token_ids)} tokens, {metrics['tokens_per_s']:.1f} tok/s, "
            f"tau {metrics['mean_acceptance_length']:.2f}, finish: {out.finish_reason}]",
            file=sys.stderr,
        )
    return 0


# ---------------------------------------------------------------------------------------- demo
def demo_configs(k: int, only: set[str] | None = None) -> tuple[list[tuple[str, dict]], list[tuple[str, str]]]:
    """(method, config) for every installed method that drafts, and (method, reason) skipped.

    A method's config class may define ``demo_config()`` returning a config dict (or None to be
    left out); otherwise the method runs as ``{"method": name, "num_speculative_tokens": k}``.
    """
    from specpath import plugins
    from specpath.registry import get_registry

    plugins.load_all()
    registry = get_registry()
    runs, skipped = [], []
    for name in registry.names():
        if only is not None and name not in only:
            continue
        cls = registry.get(name).config_class
        if not cls.proposes_draft_tokens:
            skipped.append((name, "proposes no draft tokens"))
            continue
        hook = getattr(cls, "demo_config", None)
        config = hook() if callable(hook) else {"method": name, "num_speculative_tokens": k}
        if config is None:
            skipped.append((name, "no demo config"))
            continue
        runs.append((name, dict(config)))
    return runs, skipped


def _fmt_rates(rates: list[float]) -> str:
    return " ".join(f"{r:.2f}" for r in rates) if rates else "-"


def run_demo(args: argparse.Namespace, *, progress: bool = True) -> tuple[list[dict], list[tuple[str, str]]]:
    """Build every method's engine, then run the prompts round-robin (prompt-major), so load on a
    shared machine affects every method alike."""
    from tqdm import tqdm

    from specpath.engine.llm import LLM, SamplingParams
    from specpath.engine.metrics import SpecMetrics

    only = set(args.methods.split(",")) if args.methods else None
    runs, skipped = demo_configs(args.num_speculative_tokens, only)
    runs = [("baseline", None)] + runs
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    bar = tqdm(total=len(runs) * (len(DEMO_PROMPTS) + 1), desc="specpath demo", unit="run",
               disable=not progress, file=sys.stderr)
    engines = []
    for name, config in runs:
        bar.set_postfix_str(f"loading {name}")
        try:
            llm = LLM(args.model, config, num_threads=args.threads, enable_prefix_caching=args.enable_prefix_caching,
                      trust_remote_code=args.trust_remote_code)
            llm.generate([DEMO_PROMPTS[0]], SamplingParams(max_tokens=8, ignore_eos=True))  # warm-up
            engines.append((name, config, llm))
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the demo
            if name == "baseline":
                raise
            skipped.append((name, " ".join(str(exc).split()) or type(exc).__name__))
            bar.total -= len(DEMO_PROMPTS)
        bar.update(1)
    parts: dict[str, list] = {name: [] for name, _, _ in engines}
    tokens: dict[str, list] = {name: [] for name, _, _ in engines}
    elapsed: dict[str, float] = {name: 0.0 for name, _, _ in engines}
    for prompt in DEMO_PROMPTS:  # batch 1, one prompt at a time: the latency setting
        for name, _, llm in engines:
            bar.set_postfix_str(name)
            start = time.perf_counter()
            out = llm.generate([prompt], params)[0]
            elapsed[name] += time.perf_counter() - start
            parts[name].append(out.metrics)
            tokens[name].append(out.token_ids)
            bar.update(1)
    bar.close()
    baseline_tps = SpecMetrics.total(parts["baseline"], elapsed_s=elapsed["baseline"]).tokens_per_s
    rows: list[dict] = []
    for name, config, _ in engines:
        total = SpecMetrics.total(parts[name], elapsed_s=elapsed[name])
        rows.append({
            "method": name,
            "config": config,
            "mean_acceptance_length": total.mean_acceptance_length,
            "acceptance_rate_by_position": total.acceptance_rate_by_position,
            "tokens_per_s": total.tokens_per_s,
            "speedup": total.tokens_per_s / baseline_tps if baseline_tps else 0.0,
            "target_steps": total.num_steps,
            "greedy_identical": tokens[name] == tokens["baseline"],
        })
    return rows, skipped


def cmd_demo(args: argparse.Namespace) -> int:
    rows, skipped = run_demo(args, progress=not args.json)
    if args.json:
        print(json.dumps({"rows": rows, "skipped": [{"method": m, "reason": r} for m, r in skipped]}))
        return 0
    header = ["method", "τ", "acceptance by position", "tokens/s", "speedup", "greedy identical"]
    table = [
        [
            r["method"],
            f"{r['mean_acceptance_length']:.2f}",
            _fmt_rates(r["acceptance_rate_by_position"]),
            f"{r['tokens_per_s']:.0f}",
            f"{r['speedup']:.2f}x",
            "yes" if r["greedy_identical"] else "NO",
        ]
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    print(line(header))
    print(line(["-" * w for w in widths]))
    for cells in table:
        print(line(cells))
    print(f"\n{len(DEMO_PROMPTS)} prompts, {args.max_tokens} tokens each, batch 1, greedy; "
          "τ = tokens per verification step (bonus included).")
    for name, reason in skipped:
        print(f"skipped {name}: {reason}")
    return 0
