"""Training recipes of the shipped drafts (run as ``python -m specpath_train.recipes.draft_model``).

A draft only earns its keep if it predicts what *the target* will emit, so every recipe learns
from text the target generates, not from the corpus alone:

``generate``  the target (through ``specpath_engine``) continues random windows of the stdlib
              training split, greedily and sampled; the sequences are saved once and shared.
``ar``        an autoregressive draft of the target's byte vocabulary, distilled on those
              sequences: KL to the target's soft labels (computed on the fly) plus CE.
``pard``      the same architecture trained for PARD: each sequence is replicated with
              ``depth`` copies whose inputs are all the mask token; copy ``c`` at position ``i``
              sees the real tokens up to ``i - c`` and its own masks, and predicts token
              ``i + 1`` (draft depth ``c + 1``). One block-structured mask does all depths.
``bpe``       a BPE vocabulary (``tokenizers``) trained on the corpus, and a draft trained in that
              vocabulary on the target's sequences, for ``use_heterogeneous_vocab``.

Each run writes an HF checkpoint (``config.json`` + ``model.safetensors``) whose
``config.json`` records the recipe, its arguments, the seed, the target and the measured
held-out quality under ``"specpath_draft"``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from specpath_draft_model.config import PARD_TOKEN_KEY
from specpath_draft_model.vocab import build_bpe_tokenizer
from specpath_train.recipes.draft_model_arch import batched_logits, initial_draft
from specpath_train.trainer import warmup_cosine

SOFT_LABELS = 16
"""How many of the target's likeliest next tokens (with probabilities) are kept per generated
position for distillation."""

PARD_MASK_TOKEN = 255
"""The byte 0xFF never occurs in UTF-8 text, so the PARD draft uses it as its mask token (the
vocabulary stays the target's 256 bytes, as the plain draft_model vocabulary check requires)."""


# ----------------------------------------------------------------------------- common
def _seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _plain(args: argparse.Namespace) -> dict[str, Any]:
    """The recipe's arguments, for the checkpoint's record (plain values only, so the data file
    loads with ``torch.load(weights_only=True)``)."""
    plain = (str, int, float, bool, type(None))
    return {k: v if isinstance(v, plain) else str(v) for k, v in vars(args).items() if k != "func"}


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _target_info(target: str) -> dict[str, Any]:
    weights = Path(target) / "model.safetensors"
    return {"path": str(target), "weights_sha256_16": _file_sha(weights) if weights.is_file() else None}


PAD = -1
"""Padding of windows past a sequence's end: clamped to 0 as an input, ignored as a label."""


def _windows(sequences: list[list[int]], length: int, batch: int, rng: random.Random) -> torch.Tensor:
    """``batch`` random windows of ``length + 1`` tokens (shorter sequences padded with PAD)."""
    rows = []
    for _ in range(batch):
        seq = sequences[rng.randrange(len(sequences))]
        if len(seq) > length + 1:
            start = rng.randrange(len(seq) - length)
            seq = seq[start : start + length + 1]
        rows.append(seq + [PAD] * (length + 1 - len(seq)))
    return torch.tensor(rows, dtype=torch.long)


WARMUP = 50
"""Warm-up steps of every draft-model recipe."""


def _train_loop(model, loss_fn, *, minutes: float, max_steps: int, lr: float, log) -> int:
    """AdamW until the time budget or ``max_steps``; ``loss_fn(step) -> loss``. Returns steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05, betas=(0.9, 0.95))
    deadline = time.monotonic() + 60 * minutes
    # The schedule needs a length: estimate it from the first steps' speed.
    t0, step, total = time.monotonic(), 0, max_steps
    model.train()
    while step < total and time.monotonic() < deadline:
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(step, (step - WARMUP) / max(1, total - WARMUP), peak=lr, warmup=WARMUP)
        loss = loss_fn(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step == 20:
            per_step = (time.monotonic() - t0) / 20
            total = min(max_steps, int(60 * minutes / per_step))
            log(f"~{per_step * 1000:.0f} ms/step: planning {total} steps")
        if step % 100 == 0:
            log(f"step {step}/{total} loss {loss.item():.4f} ({time.monotonic() - t0:.0f}s)")
    model.eval()
    return step


def _save(model, out: Path, meta: dict[str, Any], extra_config: dict[str, Any] | None = None) -> None:
    model.save_pretrained(out, extra_config={**(extra_config or {}), "specpath_draft": meta})


def _log_to(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    return log


# --------------------------------------------------------------------------- generate
@torch.no_grad()
def sample_continuations(model, prompts: torch.Tensor, new_tokens: int, temperature: float,
                         generator: torch.Generator, top: int = SOFT_LABELS):
    """Equal-length prompts continued by ``model`` (greedy when ``temperature`` is 0) with a
    static per-batch KV cache: the target's own layers, batched, without the serving engine's
    scheduling (built for ragged traffic, not bulk text). Returns the sequences ``[B, P + N]``
    and, for every generated position, the target's ``top`` likeliest tokens and their
    probabilities ``[B, N, top]`` (soft labels for distillation, free at generation time)."""
    backbone = model.model
    batch, prompt_len = prompts.shape
    length = prompt_len + new_tokens
    cfg = model.config
    caches = [(torch.zeros(batch, length, cfg.num_key_value_heads, cfg.head_dim),
               torch.zeros(batch, length, cfg.num_key_value_heads, cfg.head_dim)) for _ in backbone.layers]

    def step(ids: torch.Tensor, start: int) -> torch.Tensor:
        count = ids.shape[1]
        positions = torch.arange(start, start + count)
        cos, sin = backbone.rotary_emb(positions)
        mask = torch.arange(start + count)[None, :] <= positions[:, None]
        h = backbone.embed_tokens(ids)
        for layer, (ck, cv) in zip(backbone.layers, caches):
            def attend(q, k, v, ck=ck, cv=cv):
                ck[:, start : start + count], cv[:, start : start + count] = k, v
                out = F.scaled_dot_product_attention(
                    q.transpose(1, 2), ck[:, : start + count].transpose(1, 2), cv[:, : start + count].transpose(1, 2),
                    attn_mask=mask, enable_gqa=True)
                return out.transpose(1, 2)

            h = layer(h, cos, sin, attend)
        return model.lm_head(backbone.norm(h[:, -1])).float()

    out = [prompts]
    soft_ids, soft_probs = [], []
    logits = step(prompts, 0)
    for i in range(new_tokens):
        probs, ids = torch.softmax(logits, -1).topk(top, dim=-1)
        soft_ids.append(ids.to(torch.int16))
        soft_probs.append(probs.to(torch.float16))
        if temperature > 0:
            token = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)
        else:
            token = logits.argmax(-1, keepdim=True)
        out.append(token)
        if i + 1 < new_tokens:
            logits = step(token, prompt_len + i)
    return torch.cat(out, dim=1), torch.stack(soft_ids, 1), torch.stack(soft_probs, 1)


def generate(args: argparse.Namespace) -> None:
    """Continuations of stdlib windows by the target: greedy for most batches, sampled for the rest."""
    from specpath_engine.corpus import stdlib_documents
    from specpath_engine.model import LlamaModel

    _seed(args.seed)
    rng = random.Random(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    log = _log_to(Path(args.out).with_suffix(".log"))
    target = LlamaModel.from_pretrained(args.target).eval()
    docs = [text for _, text in stdlib_documents("train") if len(text) > args.prompt_max + 8]
    t0 = time.monotonic()
    sequences, kinds, soft = [], [], []
    for b in range(0, args.num_prompts, args.batch):
        length = rng.randint(args.prompt_min, args.prompt_max)
        rows = []
        for _ in range(args.batch):
            text = docs[rng.randrange(len(docs))]
            start = rng.randrange(len(text) - length)
            rows.append(list(text[start : start + length]))
        temperature = args.temperature if (b // args.batch) % 3 == 2 else 0.0  # one batch in three sampled
        out, ids, probs = sample_continuations(target, torch.tensor(rows), args.new_tokens, temperature, generator)
        sequences += out.tolist()
        kinds += [(length, temperature)] * args.batch
        soft += [(i, p) for i, p in zip(ids, probs)]
        log(f"{len(sequences)}/{args.num_prompts} sequences ({time.monotonic() - t0:.0f}s)")
    long_docs = [text for text in docs if len(text) > args.window]
    # Corpus windows labelled by the target (one batched forward per window: far cheaper per
    # token than generating), for contexts the draft would otherwise see too few of.
    for b in range(0, args.corpus_windows, args.batch):
        rows = []
        for _ in range(args.batch):
            text = long_docs[rng.randrange(len(long_docs))]
            start = rng.randrange(len(text) - args.window)
            rows.append(list(text[start : start + args.window]))
        ids = torch.tensor(rows)
        with torch.no_grad():
            probs, top = torch.softmax(target.forward_batch(ids)[:, :-1], -1).topk(SOFT_LABELS, dim=-1)
        sequences += rows
        kinds += [(1, -1.0)] * args.batch  # soft labels from position 0; temperature -1 = corpus text
        soft += [(i.to(torch.int16), p.to(torch.float16)) for i, p in zip(top, probs)]
        log(f"{b + args.batch}/{args.corpus_windows} labelled corpus windows ({time.monotonic() - t0:.0f}s)")
    torch.save({"sequences": sequences, "kinds": kinds, "soft": soft, "target": _target_info(args.target),
                "args": _plain(args)}, args.out)
    log(f"saved {len(sequences)} sequences, {sum(map(len, sequences))} bytes to {args.out}")


def _load_data(path: str, heldout: int) -> tuple[list[list[int]], list[list[int]], list[tuple[int, float]], dict]:
    """(training sequences, held-out sequences, held-out (prompt length, temperature), all)."""
    data = torch.load(path, weights_only=True)  # tensors and plain containers only: never unpickle code
    seqs, kinds = data["sequences"], data["kinds"]
    return seqs[heldout:], seqs[:heldout], kinds[:heldout], data


# ---------------------------------------------------------------------------------- ar
@torch.no_grad()
def greedy_agreement(model, sequences: list[list[int]], kinds: list[tuple[int, float]]) -> float:
    """Fraction of greedy continuation positions where the draft's argmax is the target's
    token (= P(first draft accepted) on the target's own greedy text)."""
    hits = total = 0
    for seq, (prompt_len, temperature) in zip(sequences, kinds):
        if temperature != 0:  # greedy continuations only
            continue
        ids = torch.tensor(seq[:-1])[None]
        pred = batched_logits(model, ids, torch.arange(ids.shape[1]), None)[0].argmax(-1)
        labels = torch.tensor(seq[1:])
        hits += int((pred[prompt_len - 1 :] == labels[prompt_len - 1 :]).sum())
        total += len(seq) - prompt_len
    return hits / max(1, total)


def _distillation_batch(data: dict, first: int, length: int, batch: int, rng: random.Random):
    """Random windows of ``length + 1`` tokens and, where the target generated the next token, its
    stored soft labels: (ids ``[B, L+1]``, label ids ``[B, L, S]``, label probs ``[B, L, S]``)."""
    seqs, kinds, soft = data["sequences"], data["kinds"], data["soft"]
    ids = torch.full((batch, length + 1), PAD, dtype=torch.long)
    label_ids = torch.zeros(batch, length, SOFT_LABELS, dtype=torch.long)
    label_probs = torch.zeros(batch, length, SOFT_LABELS)
    for row in range(batch):
        i = rng.randrange(first, len(seqs))
        seq, prompt_len = seqs[i], kinds[i][0]
        start = rng.randrange(max(1, len(seq) - length))
        window = seq[start : start + length + 1]
        ids[row, : len(window)] = torch.tensor(window)
        # window position t predicts sequence position start + t + 1, generated index g
        lo = max(0, prompt_len - 1 - start)
        hi = min(len(window) - 1, prompt_len - 1 - start + soft[i][0].shape[0])
        if hi > lo:
            g = slice(start + lo + 1 - prompt_len, start + hi + 1 - prompt_len)
            label_ids[row, lo:hi] = soft[i][0][g].long()
            label_probs[row, lo:hi] = soft[i][1][g].float()
    return ids, label_ids, label_probs


def train_ar(args: argparse.Namespace) -> None:
    _seed(args.seed)
    rng = random.Random(args.seed)
    log = _log_to(Path(args.log))
    train, held, held_kinds, data = _load_data(args.data, args.heldout)
    model = initial_draft(args, 256, log)
    positions = torch.arange(args.context)

    def loss_fn(step: int) -> torch.Tensor:
        ids, label_ids, label_probs = _distillation_batch(data, args.heldout, args.context, args.batch, rng)
        log_q = F.log_softmax(batched_logits(model, ids[:, :-1].clamp_min(0), positions, None), -1)
        loss = F.nll_loss(log_q.flatten(0, 1), ids[:, 1:].flatten(), ignore_index=PAD)
        if args.kd > 0:  # cross-entropy to the target's top soft labels (renormalised)
            p = label_probs / label_probs.sum(-1, keepdim=True).clamp_min(1e-6)
            has = label_probs.sum(-1) > 0
            kd = -(p * log_q.gather(-1, label_ids)).sum(-1)
            loss = loss + args.kd * (kd * has).sum() / has.sum().clamp_min(1)
        return loss

    steps = _train_loop(model, loss_fn, minutes=args.minutes, max_steps=args.max_steps, lr=args.lr, log=log)
    agreement = greedy_agreement(model, held, held_kinds)
    log(f"held-out greedy agreement (first-draft acceptance proxy) {agreement:.4f}")
    meta = {"recipe": "ar", "script": "python -m specpath_train.recipes.draft_model ar", "args": _plain(args),
            "seed": args.seed, "steps": steps, "target": data["target"],
            "heldout_greedy_agreement": round(agreement, 4), "num_parameters": model.config.num_parameters}
    _save(model, Path(args.out), meta)
    log(f"saved {args.out}")


# -------------------------------------------------------------------------------- pard
def pard_layout(length: int, depth: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(positions ``[N]``, attention mask ``[N, N]``, valid ``[N]``) for ``depth + 1`` copies of
    a ``length``-token window: copy 0 is the real sequence; copy ``c`` holds mask tokens and at
    position ``i`` sees real tokens ``<= i - c`` and its own masks ``i - c + 1 .. i``."""
    copies = depth + 1
    pos = torch.arange(length).repeat(copies)
    copy = torch.arange(copies).repeat_interleave(length)
    qi, qc = pos[:, None], copy[:, None]
    kj, kc = pos[None, :], copy[None, :]
    real = (kc == 0) & (kj <= qi - qc)
    own = (kc == qc) & (qc > 0) & (kj > qi - qc) & (kj <= qi)
    valid = pos - copy >= 0
    return pos, real | own, valid


@torch.no_grad()
def pard_agreement(model, sequences, kinds, depth: int) -> list[float]:
    """Per-depth fraction of greedy positions where the draft's argmax is the target's token."""
    hits, totals = [0] * (depth + 1), [0] * (depth + 1)
    for seq, (prompt_len, temperature) in zip(sequences, kinds):
        if temperature != 0:  # greedy continuations only
            continue
        n = len(seq) - 1
        positions, mask, valid = pard_layout(n, depth)
        ids = torch.tensor(seq[:-1]).repeat(depth + 1)
        ids[n:] = PARD_MASK_TOKEN
        pred = batched_logits(model, ids[None], positions, mask)[0].argmax(-1).view(depth + 1, n)
        labels = torch.tensor(seq[1:])
        for c in range(depth + 1):
            lo = max(prompt_len - 1, c)
            hits[c] += int((pred[c, lo:] == labels[lo:]).sum())
            totals[c] += n - lo
    return [h / max(1, t) for h, t in zip(hits, totals)]


def train_pard(args: argparse.Namespace) -> None:
    _seed(args.seed)
    rng = random.Random(args.seed)
    log = _log_to(Path(args.log))
    train, held, held_kinds, data = _load_data(args.data, args.heldout)
    model = initial_draft(args, 256, log)  # --init: the autoregressive draft (depth 1 already learned)
    positions, mask, valid = pard_layout(args.context, args.depth)
    n = args.context

    def loss_fn(step: int) -> torch.Tensor:
        batch = _windows(train, args.context, args.batch, rng)
        ids = batch[:, :-1].clamp_min(0).repeat(1, args.depth + 1)
        ids[:, n:] = PARD_MASK_TOKEN
        labels = batch[:, 1:].repeat(1, args.depth + 1)
        logits = batched_logits(model, ids, positions, mask)
        loss = F.cross_entropy(logits[:, valid].flatten(0, 1), labels[:, valid].flatten(), ignore_index=PAD)
        return loss

    steps = _train_loop(model, loss_fn, minutes=args.minutes, max_steps=args.max_steps, lr=args.lr, log=log)
    agreement = pard_agreement(model, held[:24], held_kinds[:24], args.depth)
    log("held-out greedy agreement by depth " + " ".join(f"{a:.3f}" for a in agreement))
    meta = {"recipe": "pard", "script": "python -m specpath_train.recipes.draft_model pard", "args": _plain(args),
            "seed": args.seed, "steps": steps, "target": data["target"],
            "heldout_greedy_agreement_by_depth": [round(a, 4) for a in agreement],
            "num_parameters": model.config.num_parameters}
    _save(model, Path(args.out), meta, {PARD_TOKEN_KEY: PARD_MASK_TOKEN})
    log(f"saved {args.out}")


# --------------------------------------------------------------------------------- bpe
def train_tokenizer(vocab_size: int, max_bytes: int, seed: int):
    """The BPE vocabulary of the shipped draft: shuffled stdlib training files up to ``max_bytes``."""
    from specpath_engine.corpus import stdlib_documents

    docs = [text for _, text in stdlib_documents("train")]
    random.Random(seed).shuffle(docs)
    texts, size = [], 0
    for text in docs:
        texts.append(text)
        size += len(text)
        if size >= max_bytes:
            break
    return build_bpe_tokenizer(texts, vocab_size)


def train_bpe(args: argparse.Namespace) -> None:
    from specpath_draft_model.vocab import TOKENIZER_FILE, ByteStringVocab

    _seed(args.seed)
    rng = random.Random(args.seed)
    log = _log_to(Path(args.log))
    train, held, held_kinds, data = _load_data(args.data, args.heldout)
    if args.init:  # continue an earlier BPE draft: keep its vocabulary
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(Path(args.init) / TOKENIZER_FILE))
    else:
        tokenizer = train_tokenizer(args.vocab, args.tokenizer_bytes, args.seed)
    vocab = ByteStringVocab(tokenizer)
    train_ids = vocab.encode_batch(train)
    ratio = sum(map(len, train)) / sum(map(len, train_ids))
    log(f"tokenizer: {vocab.size} tokens, {ratio:.2f} bytes/token on the target's text")
    model = initial_draft(args, vocab.size, log)
    positions = torch.arange(args.context)

    def loss_fn(step: int) -> torch.Tensor:
        batch = _windows(train_ids, args.context, args.batch, rng)
        logits = batched_logits(model, batch[:, :-1].clamp_min(0), positions, None)
        return F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), ignore_index=PAD)

    steps = _train_loop(model, loss_fn, minutes=args.minutes, max_steps=args.max_steps, lr=args.lr, log=log)
    held_ids = vocab.encode_batch(held)
    with torch.no_grad():
        hits = total = 0
        for ids in held_ids:
            x = torch.tensor(ids)
            pred = batched_logits(model, x[None, :-1], torch.arange(len(ids) - 1), None)[0].argmax(-1)
            hits += int((pred == x[1:]).sum())
            total += len(ids) - 1
    accuracy = hits / max(1, total)
    log(f"held-out next-token accuracy (draft vocabulary) {accuracy:.4f}")
    meta = {"recipe": "bpe", "script": "python -m specpath_train.recipes.draft_model bpe", "args": _plain(args),
            "seed": args.seed, "steps": steps, "target": data["target"], "bytes_per_token": round(ratio, 3),
            "heldout_token_accuracy": round(accuracy, 4), "num_parameters": model.config.num_parameters,
            "tokenizer": "BPE (tokenizers) over the byte-level alphabet; encode to_alphabet(bytes)"}
    out = Path(args.out)
    _save(model, out, meta)
    tokenizer.save(str(out / TOKENIZER_FILE))
    log(f"saved {args.out}")


# ---------------------------------------------------------------------------------- cli
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specpath_train.recipes.draft_model", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="recipe", required=True)
    default_target = None
    try:
        from specpath_engine.model import default_model_path

        default_target = str(default_model_path())
    except ImportError:  # pragma: no cover - the engine ships with specpath
        pass

    g = sub.add_parser("generate", help="sample continuations from the target")
    g.add_argument("--target", default=default_target)
    g.add_argument("--out", default="runs/draft_model/target_text.pt")
    g.add_argument("--num-prompts", type=int, default=1024)
    g.add_argument("--prompt-min", type=int, default=32)
    g.add_argument("--prompt-max", type=int, default=192)
    g.add_argument("--new-tokens", type=int, default=256)
    g.add_argument("--temperature", type=float, default=0.8)
    g.add_argument("--corpus-windows", type=int, default=4096, help="corpus windows labelled by the target")
    g.add_argument("--window", type=int, default=256, help="bytes per corpus window")
    g.add_argument("--batch", type=int, default=32)
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=generate)

    def common(p, out, layers=1, hidden=128, ffn=384, context=256, lr=3e-3):
        p.add_argument("--data", default="runs/draft_model/target_text.pt")
        p.add_argument("--out", default=out)
        p.add_argument("--log", default=f"runs/draft_model/{p.prog.split()[-1]}.log")
        p.add_argument("--layers", type=int, default=layers)
        p.add_argument("--hidden", type=int, default=hidden)
        p.add_argument("--ffn", type=int, default=ffn)
        p.add_argument("--context", type=int, default=context)
        p.add_argument("--batch", type=int, default=16)
        p.add_argument("--lr", type=float, default=lr)
        p.add_argument("--minutes", type=float, default=10.0)
        p.add_argument("--max-steps", type=int, default=100_000)
        p.add_argument("--heldout", type=int, default=48, help="sequences kept out of training for evaluation")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--init", help="start from this checkpoint instead of random weights")

    from specpath_draft_model.config import CHECKPOINTS as here  # the plugin's shipped drafts

    a = sub.add_parser("ar", help="autoregressive draft distilled from the target")
    common(a, str(here / "ar"))
    a.add_argument("--kd", type=float, default=1.0, help="weight of the soft-label cross-entropy next to CE")
    a.add_argument("--max-positions", type=int, default=1024)
    a.set_defaults(func=train_ar)

    p = sub.add_parser("pard", help="PARD parallel draft (mask tokens)")
    common(p, str(here / "pard"), context=128)
    p.add_argument("--depth", type=int, default=7, help="mask copies: drafts up to depth + 1 tokens per pass")
    p.add_argument("--max-positions", type=int, default=1024)
    p.set_defaults(func=train_pard)

    b = sub.add_parser("bpe", help="a different-vocabulary (BPE) draft for TLI")
    common(b, str(here / "bpe"), context=128)
    b.add_argument("--vocab", type=int, default=1024)
    b.add_argument("--tokenizer-bytes", type=int, default=3_000_000)
    b.add_argument("--max-positions", type=int, default=1024)
    b.set_defaults(func=train_bpe)

    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("SPECPATH_TRAIN_THREADS", "1")))
    args.func(args)
    return 0


if __name__ == "__main__":
    from specpath_train.trainer import run_recipe

    raise SystemExit(run_recipe(main, "specpath_train.recipes.draft_model"))
