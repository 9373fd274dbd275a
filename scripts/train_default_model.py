#!/usr/bin/env python3
"""Train the embedded default model: a byte-level Llama on the Python standard library's source.

    nohup nice -n 5 python3 scripts/train_default_model.py --max-minutes 75 \
        --export-dir engine/specpath_engine/assets/default_model > runs/train.log 2>&1 &

AdamW + linear warm-up + cosine decay to 10 %. The cosine runs over ``--steps`` if given
(reproducible), otherwise over the wall-clock budget ``--max-minutes`` (the machine is shared, so
a step budget would either overrun or end with a high learning rate). Every ``--eval-every``
minutes it logs held-out bits/byte on a fixed sample of windows and saves a checkpoint (and, with
``--export-dir``, exports it), so a usable model exists even if stopped early. At the end it
evaluates the whole shipped held-out file and writes ``train_log.jsonl`` next to the export.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specpath_engine import corpus
from specpath_engine.modeling.checkpoint import TOKENIZER_CONFIG_NAME
from specpath_engine.model import LlamaModel
from specpath_engine.model_config import LlamaConfig
from specpath_engine.tokenizer import ByteTokenizer
from specpath_train.trainer import warmup_cosine  # the LR schedule every recipe shares

LN2 = math.log(2)


def model_config(args: argparse.Namespace) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=256,
        hidden_size=args.hidden,
        intermediate_size=args.ffn,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // args.head_dim,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        max_position_embeddings=args.max_positions,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


def windows(stream: torch.Tensor, length: int, count: int) -> torch.Tensor:
    """``count`` evenly spaced windows of ``length + 1`` bytes (inputs and shifted targets)."""
    starts = torch.linspace(0, len(stream) - length - 2, count).long()
    return torch.stack([stream[s : s + length + 1] for s in starts.tolist()])


@torch.no_grad()
def bits_per_byte(model: LlamaModel, batches: torch.Tensor, batch_size: int = 8) -> float:
    """Mean next-byte cross-entropy in bits over all target bytes of the given windows."""
    model.eval()
    total, count = 0.0, 0
    for chunk in batches.split(batch_size):
        logits = model.forward_batch(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += chunk[:, 1:].numel()
    model.train()
    return total / count / LN2


def init_weights(model: LlamaModel, num_layers: int) -> None:
    """GPT-2 style: N(0, 0.02), residual output projections scaled by 1/sqrt(2 * layers)."""
    for name, p in model.named_parameters():
        if p.dim() == 2:
            std = 0.02 / math.sqrt(2 * num_layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
            torch.nn.init.normal_(p, mean=0.0, std=std)


def lr_at(progress: float, step: int, args: argparse.Namespace) -> float:
    return warmup_cosine(step, progress, peak=args.lr, warmup=args.warmup, floor=args.min_lr_ratio)


def export(model: LlamaModel, directory: Path, args: argparse.Namespace, summary: dict) -> None:
    note = {
        "script": "scripts/train_default_model.py",
        "seed": args.seed,
        "corpus": "Python standard library source (tests, site-packages and encodings/ excluded); "
        f"held out: sha1(relpath) % {corpus.HELDOUT_MODULUS} == 0",
        "python": platform.python_version(),
        "tokenizer": "bytes (vocab 256, UTF-8); NUL (0) = BOS/EOS/pad, the document separator",
        "train_context": args.context,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in sorted(vars(args).items())},
        **summary,
    }
    model.save_pretrained(directory, extra_config={"specpath": note})
    tokenizer_config = json.dumps(ByteTokenizer().config_dict(), indent=2) + "\n"
    (directory / TOKENIZER_CONFIG_NAME).write_text(tokenizer_config, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--hidden", type=int, default=192)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--context", type=int, default=512, help="training window (bytes)")
    p.add_argument("--max-positions", type=int, default=1024, help="max_position_embeddings in config.json")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=None, help="step budget (cosine over steps)")
    p.add_argument("--max-minutes", type=float, default=50.0, help="wall-clock budget (cosine over time)")
    p.add_argument("--eval-every", type=float, default=4.0, help="minutes between evals/checkpoints")
    p.add_argument("--eval-windows", type=int, default=48)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("runs/default_model"))
    p.add_argument("--export-dir", type=Path, default=None, help="also export HF files here at each eval")
    p.add_argument("--write-heldout", action="store_true", help="write the held-out asset file")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t_start = time.time()

    train_docs = corpus.stdlib_documents("train")
    heldout_docs = corpus.stdlib_documents("heldout")
    if args.write_heldout:
        print(f"wrote {corpus.write_heldout_asset(heldout_docs)}", flush=True)
    train = torch.frombuffer(bytearray(corpus.join_documents(train_docs)), dtype=torch.uint8).long()
    heldout = torch.frombuffer(bytearray(corpus.join_documents(heldout_docs)), dtype=torch.uint8).long()
    eval_batches = windows(heldout, args.context, args.eval_windows)
    print(
        f"corpus: {len(train_docs)} train files ({len(train):,} bytes), "
        f"{len(heldout_docs)} held-out files ({len(heldout):,} bytes)",
        flush=True,
    )

    config = model_config(args)
    model = LlamaModel(config)
    init_weights(model, config.num_hidden_layers)
    model.train()
    print(f"model: {config.num_parameters:,} parameters, {config}", flush=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )
    generator = torch.Generator().manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / "train_log.jsonl"
    log = log_path.open("w", encoding="utf-8")
    budget_s = args.max_minutes * 60
    t0 = time.time()
    next_eval = 0.0
    step, bytes_seen, losses = 0, 0, []

    def record(kind: str, **fields) -> dict:
        entry = {"kind": kind, "step": step, "bytes": bytes_seen, "minutes": round((time.time() - t0) / 60, 2), **fields}
        log.write(json.dumps(entry) + "\n")
        log.flush()
        print(json.dumps(entry), flush=True)
        return entry

    def checkpoint(summary: dict) -> None:
        model.eval()
        export(model, args.out / "checkpoint", args, summary)
        if args.export_dir is not None:
            export(model, args.export_dir, args, summary)
        model.train()

    while True:
        elapsed = time.time() - t0
        done = step >= args.steps if args.steps else elapsed >= budget_s
        if elapsed / 60 >= next_eval or done:
            bpb = bits_per_byte(model, eval_batches)
            train_loss = sum(losses) / len(losses) if losses else float("nan")
            losses.clear()
            entry = record("eval", heldout_bpb=round(bpb, 4), train_bpb=round(train_loss / LN2, 4))
            if step:
                checkpoint({"steps": step, "train_bytes": bytes_seen, "sample_heldout_bpb": entry["heldout_bpb"]})
            next_eval += args.eval_every
        if done:
            break
        progress = step / args.steps if args.steps else elapsed / budget_s
        lr = lr_at(progress, step, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train) - args.context - 1, (args.batch,), generator=generator)
        batch = torch.stack([train[s : s + args.context + 1] for s in starts.tolist()])
        logits = model.forward_batch(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        bytes_seen += batch[:, 1:].numel()
        losses.append(loss.item())
        if step % 50 == 0:
            rate = bytes_seen / (time.time() - t0)
            print(f"step {step} loss {loss.item() / LN2:.3f} bits/byte lr {lr:.2e} {rate:,.0f} bytes/s", flush=True)

    # Final: the whole shipped held-out file, in non-overlapping context windows.
    shipped = torch.frombuffer(
        bytearray(corpus.join_documents(corpus.read_heldout_asset())), dtype=torch.uint8
    ).long()
    full = shipped[: (len(shipped) - 1) // args.context * args.context + 1]
    windows_full = torch.stack([full[i : i + args.context + 1] for i in range(0, len(full) - 1, args.context)])
    final_bpb = bits_per_byte(model, windows_full)
    summary = {
        "steps": step,
        "train_bytes": bytes_seen,
        "train_minutes": round((time.time() - t0) / 60, 1),
        "heldout_bpb": round(final_bpb, 4),
        "heldout_bytes": int(windows_full[:, 1:].numel()),
    }
    record("final", **summary)
    log.close()
    checkpoint(summary)
    if args.export_dir is not None:
        (args.export_dir / "train_log.jsonl").write_text(log_path.read_text(encoding="utf-8"), encoding="utf-8")
    print(f"done in {(time.time() - t_start) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
