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
from typing import Any

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

    Each config class declares ``SpeculatorConfig.demo_config()``: a config dict (run as method
    ``name``; K is ``k`` unless it says), or None to be left out.
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
        config = cls.demo_config()
        if config is None:
            skipped.append((name, "no demo config"))
            continue
        runs.append((name, {"num_speculative_tokens": k, **config, "method": name}))
    return runs, skipped


def run_demo(args: argparse.Namespace, *, progress: bool = True) -> tuple[list[dict], list[tuple[str, str]]]:
    """Every method's engine against the baseline, through the one benchmark harness
    (:mod:`specpath.engine.harness`): one round, prompt-major, so load on a shared machine
    affects every method alike."""
    from tqdm import tqdm

    from specpath.engine import harness

    only = set(args.methods.split(",")) if args.methods else None
    runs, skipped = demo_configs(args.num_speculative_tokens, only)
    bar = tqdm(total=(len(runs) + 1) * (len(harness.DEMO_PROMPTS) + 1), desc="specpath demo", unit="run",
               disable=not progress, file=sys.stderr)

    def step(what: str) -> None:
        bar.set_postfix_str(what)
        bar.update(1)

    rows, failed = harness.compare(runs, model=args.model, threads=args.threads, max_tokens=args.max_tokens,
                                   enable_prefix_caching=args.enable_prefix_caching, progress=step)
    bar.close()
    return rows, skipped + failed


def cmd_demo(args: argparse.Namespace) -> int:
    rows, skipped = run_demo(args, progress=not args.json)
    if args.json:
        print(json.dumps({"rows": rows, "skipped": [{"method": m, "reason": r} for m, r in skipped]}))
        return 0
    from specpath.engine.harness import DEMO_PROMPTS, format_table

    print(format_table(rows))
    print(f"\n{len(DEMO_PROMPTS)} prompts, {args.max_tokens} tokens each, batch 1, greedy; "
          "τ = tokens per verification step (bonus included).")
    for name, reason in skipped:
        print(f"skipped {name}: {reason}")
    return 0
