"""``specpath convert IN.gguf OUT_DIR``: a GGUF file as a Hugging Face checkpoint directory."""

from __future__ import annotations

import argparse
import time

CONVERT_DTYPES = ("float32", "bfloat16", "float16")


def cmd_convert(args: argparse.Namespace) -> int:
    import torch

    from specpath_engine.modeling.gguf import convert_gguf, read_gguf

    start = time.perf_counter()
    checkpoint = read_gguf(args.input)
    out = convert_gguf(args.input, args.output, dtype=getattr(torch, args.dtype), overwrite=args.overwrite)
    types: dict[str, int] = {}
    for kind in checkpoint.tensor_types().values():
        types[kind] = types.get(kind, 0) + 1
    summary = ", ".join(f"{n} {kind}" for kind, n in sorted(types.items()))
    print(
        f"wrote {out} ({checkpoint.architecture}, {checkpoint.config['num_hidden_layers']} layers, "
        f"vocab {checkpoint.config['vocab_size']}, {args.dtype}; tensors: {summary}) "
        f"in {time.perf_counter() - start:.1f} s"
    )
    return 0


def add_subcommands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="write a Hugging Face checkpoint (config, safetensors, tokenizer, chat template) from a GGUF file",
    )
    p.add_argument("input", metavar="IN.gguf", help="GGUF file (llama or qwen3 architecture)")
    p.add_argument("output", metavar="OUT_DIR", help="directory to write (created if missing; must be empty)")
    p.add_argument("--overwrite", action="store_true", help="replace the contents of a non-empty OUT_DIR")
    p.add_argument("--dtype", choices=CONVERT_DTYPES, default="float32", help="dtype of the written weights")
    p.set_defaults(func=cmd_convert)
