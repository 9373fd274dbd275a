"""``specpath export DIR --format vllm|sglang|speculators OUT``: a specpath drafter in a serving
engine's layout (:mod:`specpath_train.export`).

The command belongs to specpath-train, not the engine: writing each method's layout needs the
method plugins' checkpoint code (the heads' tensor tables), which specpath-train already
depends on and the engine must not (it never imports a method plugin).
"""

from __future__ import annotations

import argparse
import sys
import time


def cmd_export(args: argparse.Namespace) -> int:
    from specpath_engine.modeling.checkpoint import CheckpointError
    from specpath_train.export import ExportError, export_checkpoint

    start = time.perf_counter()
    try:
        written = export_checkpoint(args.checkpoint, args.format, args.output, target=args.target,
                                    num_speculative_tokens=args.num_speculative_tokens, overwrite=args.overwrite)
    except (ExportError, CheckpointError, OSError) as exc:
        print(f"specpath export: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in written) / 2**20
    print(f"wrote {args.output} ({args.format}: {', '.join(p.name for p in written)}; {size:.1f} MiB) "
          f"in {time.perf_counter() - start:.1f} s")
    return 0


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    from specpath_train.export import FORMATS

    p = sub.add_parser("export", help="write a specpath drafter in vLLM's, SpecForge's (SGLang) or the speculators layout")
    p.add_argument("checkpoint", metavar="DIR", help="a specpath drafter checkpoint (config.json + model.safetensors)")
    p.add_argument("output", metavar="OUT", help="directory to write (must be absent or empty unless --overwrite)")
    p.add_argument("--format", required=True, choices=FORMATS, help="the serving engine's layout")
    p.add_argument("--target", default=None, metavar="MODEL",
                   help="the target (HF directory or named model): materialises a shared embedding; speculators' verifier")
    p.add_argument("--num-speculative-tokens", type=int, default=4, metavar="K",
                   help="speculators: the proposal's speculative_tokens (default 4)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT")
    p.set_defaults(func=cmd_export)
