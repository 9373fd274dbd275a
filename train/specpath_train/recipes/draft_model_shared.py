"""A small draft that borrows the target's embedding and LM head (``python -m specpath_train.recipes.draft_model_shared``).

For a large-vocabulary target (SmolLM2-135M: 49,152 x 576, 28 M of its 135 M parameters) a
draft's own embedding would outweigh its layers many times over. This draft has the target's
layer shape and only ``--layers`` decoder layers plus a final norm of its own; its checkpoint
omits ``model.embed_tokens.weight`` and declares ``shares_target_embeddings`` in config.json, and
the draft_model speculator lends it the target's (tied) embedding at load time.

Recipe (distillation on the target's own text and features, a ``specpath_train.target_text``
cache): the layers start as copies of the target's first ones (``--init-layers``); the draft's
pre-norm output at every position regresses the target's last-layer output there (SmoothL1,
EAGLE's feature loss) and, through the shared head, matches the target's next-token distribution
(soft cross-entropy over the ``--train-vocab`` most frequent training tokens: scoring all 49,152
would cost several times the layers themselves). AdamW, warm-up and cosine decay over a
wall-clock budget, resumable (``specpath_train.trainer.train_loop``).

With ``--pard-depth D`` the same draft learns PARD as well: every window is replicated with D
copies whose inputs are the mask token ``--pard-token`` (``specpath_train.recipes.draft_model.pard_layout``:
copy ``c`` at position ``i`` sees the real tokens up to ``i - c`` and its own masks), and every
copy is scored against the target's distribution at ``i``. Copy 0 is the autoregressive
objective, so one checkpoint serves both ``parallel_drafting`` and plain drafting. ``--init``
starts from a trained draft (such as the autoregressive one) instead of the target's layers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from specpath_train.recipes.draft_model_arch import hidden_states

SHARES_TARGET_EMBEDDINGS = "shares_target_embeddings"
"""config.json key: the checkpoint has no embedding of its own; the target's is lent at load."""


def draft_from_target(target, layers: list[int]):
    """A LlamaModel with the target's shape, ``len(layers)`` layers copied from the target's
    ``layers``, the target's final norm, and the target's embedding (tied head)."""
    import attrs

    from specpath_engine.model import LlamaModel

    draft = LlamaModel(attrs.evolve(target.config, num_hidden_layers=len(layers), tie_word_embeddings=True))
    with torch.no_grad():
        for mine, i in zip(draft.model.layers, layers):
            mine.load_state_dict(target.model.layers[i].state_dict())
        draft.model.norm.weight.copy_(target.model.norm.weight)
        draft.model.embed_tokens.weight = target.model.embed_tokens.weight
    draft.model.embed_tokens.weight.requires_grad_(False)
    draft.lm_head.weight = draft.model.embed_tokens.weight
    return draft


def distill_loss(draft, norm_w: torch.Tensor, rows: torch.Tensor, eps: float, *, reg_weight: float):
    from specpath_train.trainer import soft_cross_entropy, target_probs_from_final

    def loss_fn(tokens: torch.Tensor, taps: torch.Tensor):
        final = taps[:, :, -1]
        h = hidden_states(draft, tokens)
        probs = target_probs_from_final(norm_w, rows, final, eps)
        logits = (draft.model.norm(h) @ rows.T).float()
        ce = soft_cross_entropy(logits, probs)
        reg = F.smooth_l1_loss(h, final)
        acc = (logits.argmax(-1) == probs.argmax(-1)).float().mean().item()
        return ce + reg_weight * reg, {"ce": ce.item(), "reg": reg.item(), "acc": acc}

    return loss_fn


def pard_distill_loss(draft, norm_w: torch.Tensor, rows: torch.Tensor, eps: float, *, reg_weight: float,
                      depth: int, mask_token: int, window: int):
    """:func:`distill_loss` over PARD's ``depth + 1`` copies of each window (see the module
    docstring); ``acc{c}`` is the top-1 agreement of draft depth ``c + 1``."""
    from specpath_train.recipes.draft_model import pard_layout
    from specpath_train.trainer import soft_cross_entropy, target_probs_from_final

    positions, mask, valid = pard_layout(window, depth)
    copies = depth + 1
    which = (torch.arange(window * copies) // window)[valid]  # the copy (depth - 1) of each scored position

    def loss_fn(tokens: torch.Tensor, taps: torch.Tensor):
        final = taps[:, :, -1]
        ids = tokens.repeat(1, copies)
        ids[:, window:] = mask_token
        h = hidden_states(draft, ids, positions, mask)[:, valid]
        probs = target_probs_from_final(norm_w, rows, final, eps)
        want = probs.repeat(1, copies, 1)[:, valid]
        logits = (draft.model.norm(h) @ rows.T).float()
        ce = soft_cross_entropy(logits, want)
        reg = F.smooth_l1_loss(h, final.repeat(1, copies, 1)[:, valid])
        hit = (logits.argmax(-1) == want.argmax(-1)).float().mean(0)
        info = {"ce": ce.item(), "reg": reg.item()}
        for c in range(copies):
            info[f"acc{c}"] = hit[which == c].mean().item()
        return ce + reg_weight * reg, info

    return loss_fn


def choose_pard_token(target_dir: str | Path, tokens: torch.Tensor, vocab_size: int,
                      reserved: tuple[int | None, ...] = ()) -> int:
    """PARD's mask token for ``--pard-token auto``: an id the training windows ``tokens`` never
    hold, so a mask input means nothing but "a draft goes here" -- the highest unused special
    token of the target's ``tokenizer.json`` (SmolLM2: 16, ``<empty_output>``), else the highest
    unused id (a byte-level target: 255, never in UTF-8 text); never bos/eos/pad (``reserved``)."""
    seen = torch.zeros(vocab_size, dtype=torch.bool)
    seen[tokens.reshape(-1).long()] = True
    for r in reserved:
        if r is not None and 0 <= r < vocab_size:
            seen[r] = True
    specials: list[int] = []
    tokenizer = Path(target_dir) / "tokenizer.json"
    if tokenizer.is_file():
        added = json.loads(tokenizer.read_text(encoding="utf-8")).get("added_tokens") or []
        specials = [a["id"] for a in added if a.get("special") and isinstance(a.get("id"), int) and 0 <= a["id"] < vocab_size]
    for candidates in (sorted(specials, reverse=True), range(vocab_size - 1, -1, -1)):
        for i in candidates:
            if not seen[i]:
                return int(i)
    raise ValueError("--pard-token auto: every id of the target's vocabulary occurs in the training text; "
                     "give --pard-token ID")


def load_draft_layers(draft, path: str | Path) -> None:
    """Copy a saved shared-embedding draft's own weights (its layers and norm) into ``draft``."""
    from safetensors.torch import load_file

    state = load_file(str(Path(path) / "model.safetensors"))
    own = {k: v.float() for k, v in state.items() if k not in ("model.embed_tokens.weight", "lm_head.weight")}
    result = draft.load_state_dict(own, strict=False)
    if result.unexpected_keys or any(k.startswith("model.layers") or k == "model.norm.weight" for k in result.missing_keys):
        raise ValueError(f"{path}: not a draft of {len(draft.model.layers)} layers of this shape "
                         f"(missing {result.missing_keys}, unexpected {result.unexpected_keys})")


def save_shared_draft(draft, out: str | Path, *, extra: dict, dtype: torch.dtype = torch.float16) -> Path:
    """HF checkpoint without the borrowed embedding (config.json says so)."""
    from specpath_engine.modeling import checkpoint

    state = {k: v.detach().to(dtype).contiguous() for k, v in draft.state_dict().items()
             if k not in ("model.embed_tokens.weight", "lm_head.weight")}
    config = {**draft.config.to_hf_dict(), SHARES_TARGET_EMBEDDINGS: True, **extra,
              "torch_dtype": str(dtype).removeprefix("torch.")}
    return checkpoint.save_checkpoint(out, config=config, state_dict=state)


def _weights_digest(target: Path) -> str:
    """The single weights file's digest (as recorded so far), else the sharded checkpoint's."""
    from specpath_train.trainer import file_digest

    if (target / "model.safetensors").is_file():
        return file_digest(target / "model.safetensors")
    from specpath_train.selfdistill import target_digest

    return target_digest(target)


def _parser() -> argparse.ArgumentParser:
    """The recipe's command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--data", required=True, help="a specpath_train.target_text cache holding the target's last layer")
    p.add_argument("--out", required=True, help="run directory (log, resume state, checkpoint)")
    p.add_argument("--export", default=None, help="also write the float16 checkpoint here")
    p.add_argument("--init-layers", type=int, nargs="+", default=[0, 1], help="target layers the draft's start from")
    p.add_argument("--train-vocab", type=int, default=8192)
    p.add_argument("--vocab-corpus", type=int, default=0, help="also rank the training vocabulary on N stdlib slices")
    p.add_argument("--reg-weight", type=float, default=0.1)
    p.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget (0 with --steps: none)")
    p.add_argument("--steps", type=int, default=None, help="optimizer-step budget (repeatable runs)")
    p.add_argument("--progress", action="store_true", help="a progress bar on stderr")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--warmup", type=int, default=50, help="learning-rate warm-up steps")
    p.add_argument("--eval-every", type=float, default=60.0, help="seconds between held-out evaluations (and at the end)")
    p.add_argument("--bf16", action="store_true", help="train under torch.autocast(bfloat16) (see specpath_drafting)")
    p.add_argument("--init", default=None, help="start from this shared-embedding draft checkpoint")
    p.add_argument("--pard-depth", type=int, default=0, help="PARD: also train draft depths 2..D+1 from mask tokens")
    p.add_argument("--pard-token", default=None,
                   help="PARD: the mask token's input id (a special token), or 'auto' (choose_pard_token)")
    return p


def main(argv: list[str] | None = None) -> int:
    from specpath_engine.model import LlamaModel
    from specpath_train.target_text import load_dataset
    from specpath_train.trainer import save_and_export, start_run, train_loop, train_vocab_record, vocab_by_frequency

    p = _parser()
    args = p.parse_args(argv)
    if args.pard_depth and args.pard_token is None:
        p.error("--pard-depth needs --pard-token (the id of a token the target's text never holds)")
    out, log = start_run(args)
    target = LlamaModel.from_pretrained(args.target)
    n = target.config.num_hidden_layers
    data = load_dataset(args.data, (n - 1,))
    tokens, taps, held = data["tokens"], data["taps"], data["heldout"]
    log(f"draft (shared embeddings): target {args.target}, layers from {args.init_layers}, "
        f"data {tuple(tokens.shape)} ({held} held out), args {vars(args)}")
    extra = None
    if args.vocab_corpus:
        from specpath_train.target_text import corpus_token_counts

        extra = corpus_token_counts(args.target, num_code=args.vocab_corpus, num_chat=max(1, args.vocab_corpus // 6),
                                    cache=Path(args.data) / f"corpus_counts_{args.vocab_corpus}.pt")
    ids = vocab_by_frequency(tokens[held:], target.config.vocab_size, args.train_vocab, extra_counts=extra)
    rows = target.lm_head.weight.detach()[ids]
    norm_w = target.model.norm.weight.detach().clone()
    draft = draft_from_target(target, args.init_layers)
    init_record = None
    if args.init:
        load_draft_layers(draft, args.init)
        init_record = json.loads((Path(args.init) / "config.json").read_text()).get("specpath_draft")
        log(f"draft: initialised from {args.init}")
    if args.pard_depth:
        if args.pard_token == "auto":
            hf = json.loads((Path(args.target) / "config.json").read_text())
            reserved = tuple(i for k in ("bos_token_id", "eos_token_id", "pad_token_id")
                             for i in (hf.get(k) if isinstance(hf.get(k), list) else [hf.get(k)]) if isinstance(i, int))
            args.pard_token = choose_pard_token(args.target, tokens, target.config.vocab_size, reserved)
            log(f"draft: PARD mask token {args.pard_token} (never in the training text)")
        elif not str(args.pard_token).isdigit():
            p.error(f"--pard-token must be an id or 'auto' (got {args.pard_token!r})")
        args.pard_token = int(args.pard_token)
        if not 0 <= args.pard_token < target.config.vocab_size:
            p.error(f"--pard-token {args.pard_token} is not an id of the target's vocabulary")
        loss_fn = pard_distill_loss(draft, norm_w, rows, target.config.rms_norm_eps, reg_weight=args.reg_weight,
                                    depth=args.pard_depth, mask_token=args.pard_token, window=tokens.shape[1])
    else:
        loss_fn = distill_loss(draft, norm_w, rows, target.config.rms_norm_eps, reg_weight=args.reg_weight)
    t0 = time.time()
    metrics = train_loop(draft, loss_fn, tokens[held:], taps[held:], minutes=args.minutes, batch=args.batch,
                         lr=args.lr, seed=args.seed, log=log, heldout=(tokens[:held], taps[:held]),
                         resume=out / "resume.pt" if args.resume else None, warmup=args.warmup, eval_every_s=args.eval_every,
                         bf16=args.bf16, max_steps=args.steps, progress=args.progress)
    log(f"draft: trained {metrics.get('steps')} steps in {time.time() - t0:.0f}s; held-out {metrics}")
    extra = {"specpath_draft": {"recipe": "shared_embeddings", "script": "python -m specpath_train.recipes.draft_model_shared",
                                "seed": args.seed, "minutes": args.minutes, "argv": sys.argv[1:] if argv is None else argv,
                                "init_layers": args.init_layers, "init": args.init, "train_vocab": args.train_vocab,
                                "pard_depth": args.pard_depth, "init_record": init_record,
                                "vocab_corpus": args.vocab_corpus,
                                "target": {"path": str(args.target),
                                           "weights_sha256_16": _weights_digest(Path(args.target))},
                                "data": data["meta"].get("key"), "heldout": metrics,
                                "heldout_note": "top-1 agreement within the training vocabulary, teacher forced"},
             # the ids the head was scored on, where serving reads them (specpath_drafting.vocab)
             "specpath_training": {"script": "specpath_train.recipes.draft_model_shared", **train_vocab_record(ids)}}
    if args.pard_depth:
        from specpath_draft_model.config import PARD_TOKEN_KEY

        # the mask token it learned, and that it was trained to draft in parallel (served so by default)
        extra.update({PARD_TOKEN_KEY: args.pard_token, "parallel_drafting": True})
    def save(model, path, *, extra_config, dtype=torch.float32):  # the run's copy in full precision
        save_shared_draft(model, path, extra=extra_config, dtype=dtype)

    save_and_export(save, draft, out / "checkpoint", args, log, "draft", extra=extra)
    return 0


if __name__ == "__main__":
    from specpath_train.trainer import run_recipe

    sys.exit(run_recipe(main, "specpath_train.recipes.draft_model_shared"))
