"""What `specpath train`'s data stages cost on this machine: generation by batch size, feature capture.

The target answers the same built-in prompts (the corpus `specpath train` uses by default) at
each ``--batches`` value of ``max_num_seqs`` through ``specpath_train.target_text.generate``
on the model ``generation_model`` prepares (what the trainer drives: bf16 fused and packed for
the native kernels; ``--unprepared``: the model as loaded, what the trainer ran before), greedy, ``--max-new-tokens`` each (EOS ends a reply); then one
feature capture (``features_with_topk``: the recipe's taps and the target's top-k in one
forward per batch of windows) over the generated text. Prints new tokens per second for each
batch size and its ratio to batch 1, all measured in this run one after the other, and the
capture's tokens per second (on the plain model, as the trainer captures). ``--attention torch``
keeps a batch's attention on the torch path (the reference the native batched attention
replaced), to measure what that kernel buys. Not part of the tests.

    python benchmarks/train_throughput.py --batches 1 16 32 64 --prompts 64
"""

from __future__ import annotations

import argparse
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="smollm2-135m")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16, 32, 64])
    ap.add_argument("--prompts", type=int, default=64, help="prompts per batch size (batch 1 runs a quarter, at least 4)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 15, 27], help="taps captured (EAGLE-3's for SmolLM2)")
    ap.add_argument("--unprepared", action="store_true", help="generate on the model as loaded (no native layers)")
    ap.add_argument("--attention", choices=["native", "torch"], default="native",
                    help="a batch's attention: the native batched kernel or the torch path")
    ap.add_argument("--no-features", action="store_true", help="skip the feature capture")
    args = ap.parse_args()

    import torch

    from specpath_engine.harness import machine_load
    from specpath_engine.model import LlamaModel
    from specpath_engine.modeling.named_models import NAMED_MODELS, hf_checkpoint_dir, resolve_model_path
    from specpath_engine.tokenizer import load_tokenizer
    from specpath_train.prompts import builtin_prompts, render
    from specpath_train.target_text import features_with_topk, generate, generation_model, pack_windows

    torch.set_num_threads(args.threads)
    path = hf_checkpoint_dir(args.target) if args.target in NAMED_MODELS else resolve_model_path(args.target)
    dtype = getattr(torch, args.dtype)
    if args.attention == "torch":
        from specpath_engine.attention import PagedAttention

        PagedAttention._native_batch = lambda *a: None
    target = LlamaModel.from_pretrained(path, dtype=dtype) if args.unprepared else generation_model(path, dtype)
    tok = load_tokenizer(path)
    prompts = render(builtin_prompts("train", args.prompts, seed=0), tok, max_tokens=256, source="built-in corpus")
    import json

    eos = json.loads((path / "config.json").read_text()).get("eos_token_id")
    eos_ids = [eos] if isinstance(eos, int) else list(eos or ())
    engine = "unprepared" if args.unprepared else f"prepared, {args.attention} batch attention"
    print(f"target {args.target} {args.dtype} ({engine}), {args.threads} threads, {len(prompts)} prompts x "
          f"{args.max_new_tokens} new tokens; load per core before {machine_load():.2f}")
    rates, seqs_all = {}, []
    for b in args.batches:
        part = prompts if b > 1 else prompts[:max(4, len(prompts) // 4)]
        t0 = time.perf_counter()
        seqs = generate(target, part, max_new_tokens=args.max_new_tokens, temperatures=(0.0,), eos_token_ids=eos_ids,
                        seed=0, max_num_seqs=b, max_model_len=256 + args.max_new_tokens + 8)
        dt = time.perf_counter() - t0
        new = sum(len(s) for s in seqs) - sum(len(p) for p in part)
        rates[b] = new / dt
        seqs_all = seqs
        base = rates.get(args.batches[0], rates[b])
        print(f"generate batch {b:3d}: {new:6d} new tokens in {dt:6.1f} s = {rates[b]:7.1f} tok/s "
              f"({rates[b] / base:.2f}x batch {args.batches[0]})", flush=True)
    if args.no_features:
        print(f"load per core after {machine_load():.2f}")
        return 0
    windows = pack_windows(seqs_all, 256)
    target = LlamaModel.from_pretrained(path, dtype=dtype)  # the trainer captures on the plain model
    t0 = time.perf_counter()
    features_with_topk(target, windows, args.layers, k=8, batch=8)
    dt = time.perf_counter() - t0
    print(f"features: {windows.numel()} tokens ({windows.shape[0]} windows x 256, taps {args.layers}) in {dt:.1f} s "
          f"= {windows.numel() / dt:.0f} tok/s; load per core after {machine_load():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
