"""Training pieces shared by the DFlash and DSpark recipes.

A batch is a set of target windows with their cached taps (``specpath_train.trainer``
feature cache: the drafter's taps plus the target's last layer, whose output gives the target's
next-token distribution at every position). In each window, random **anchors** start blocks:
the block at anchor a sees the context features of positions < a (exactly what serving sees:
the anchor is the last sampled token, not yet run through the target) and predicts the tokens
at a+1..a+K. Many anchors per window share one context pass, so a step trains
``windows x anchors x K`` predictions.

Losses are weighted by block position, ``w_k = exp(-(k-1)/gamma)`` (gamma 4, DFlash/DSpark):
early drafts matter most, since a rejection ends the block.
"""

from __future__ import annotations

import argparse

from collections.abc import Callable
from typing import Any

import attrs
import torch
import torch.nn.functional as F

from specpath_drafting.block.drafter import DFlashDrafter, DrafterConfig
from specpath_drafting.block.reference import MASK_ID


def position_weights(k: int, gamma: float = 4.0, device: Any = None) -> torch.Tensor:
    """``exp(-(j-1)/gamma)`` for j = 1..k, normalised to sum 1."""
    w = torch.exp(-torch.arange(k, dtype=torch.float32, device=device) / gamma)
    return w / w.sum()


@attrs.frozen
class BlockBatch:
    """One batch of blocks: ``hidden`` [S, A, K, d] the outputs predicting drafts 1..K;
    ``labels`` [S, A, K] the tokens at a+1..a+K; ``prev`` [S, A, K] the token before each
    (anchor, then labels: teacher forcing); ``target_final`` [S, A, K, d_t] the target's last
    layer output at a..a+K-1 (its distribution of each label)."""

    hidden: torch.Tensor
    labels: torch.Tensor
    prev: torch.Tensor
    target_final: torch.Tensor


def sample_anchors(num_windows: int, window: int, k: int, per_window: int, generator: torch.Generator) -> torch.Tensor:
    """``[S, A]`` anchor positions in ``[1, window - 1 - k]`` (a context of >= 1 position, K labels),
    drawn on the generator's device (the CPU's: repeatable on any device) and returned on the
    default one (where a ``--device`` run's windows are)."""
    high = window - 1 - k
    if high < 1:
        raise ValueError(f"windows of {window} tokens are too short for blocks of {k} drafts")
    draws = torch.randint(1, high + 1, (num_windows, per_window), generator=generator, device=generator.device)
    return draws.to(torch.get_default_device())


def block_batch(drafter: DFlashDrafter, tokens: torch.Tensor, taps: torch.Tensor, anchors: torch.Tensor,
                k: int) -> BlockBatch:
    """Run the drafter over the blocks at ``anchors`` (see the module docstring).

    ``tokens`` [S, W]; ``taps`` [S, W, m + 1, d]: the drafter's m taps, then the target's last layer.
    """
    s, w = tokens.shape
    a = anchors.shape[1]
    m = len(drafter.config.target_layer_ids)
    ctx = drafter.context(taps[:, :, :m])  # [S, W, d]
    cos_c, sin_c = drafter.rope(torch.arange(w, device=tokens.device))
    anchor_first = drafter.config.anchor_sampling
    block = k if anchor_first else k + 1
    j = torch.arange(block, device=tokens.device)
    ids = torch.full((s, a, block), MASK_ID, dtype=torch.int64, device=tokens.device)
    ids[:, :, 0] = tokens.gather(1, anchors)
    positions = anchors[:, :, None] + j
    cos, sin = drafter.rope(positions)
    visible = torch.arange(w, device=tokens.device)[None, None, :] < anchors[:, :, None]  # [S, A, W]

    def context_kv(layer: int):
        return drafter.context_kv(layer, ctx, cos_c, sin_c)

    out = drafter.block(drafter.block_embeds(ids), cos, sin, context_kv, visible)
    hidden = out[:, :, :k] if anchor_first else out[:, :, 1:]
    steps = anchors[:, :, None] + torch.arange(1, k + 1, device=tokens.device)  # label positions a+1..a+K
    labels = tokens.gather(1, steps.reshape(s, -1)).view(s, a, k)
    prev = torch.cat([ids[:, :, :1], labels[:, :, :-1]], dim=2)
    final = taps[:, :, m]  # [S, W, d_t]
    src = (steps - 1).reshape(s, -1)
    target_final = final.gather(1, src[:, :, None].expand(-1, -1, final.shape[-1])).view(s, a, k, -1)
    return BlockBatch(hidden=hidden, labels=labels, prev=prev, target_final=target_final)


def target_distribution(final: torch.Tensor, norm_w: torch.Tensor, head_w: torch.Tensor, eps: float) -> torch.Tensor:
    """The target's next-token probabilities from its last layer's output (final norm, head)."""
    x = final.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w
    return torch.softmax(x @ head_w.T, dim=-1)


def greedy_acceptance_by_position(draft_logits: torch.Tensor, target_probs: torch.Tensor) -> list[float]:
    """Teacher-forced greedy agreement per block position and its running product (the share of
    blocks whose first j drafts all match the target's argmax)."""
    ok = (draft_logits.argmax(-1) == target_probs.argmax(-1)).float()  # [S, A, K]
    return ok.mean(dim=(0, 1)).tolist()


def expected_tau(draft_logits: torch.Tensor, target_probs: torch.Tensor) -> float:
    """Teacher-forced estimate of greedy tau: 1 + mean over blocks of the accepted prefix length."""
    ok = (draft_logits.argmax(-1) == target_probs.argmax(-1)).long()
    return 1.0 + float(ok.cumprod(dim=-1).sum(-1).float().mean())


def dflash_loss(drafter: DFlashDrafter, norm_w: torch.Tensor, head_w: torch.Tensor, eps: float, *, k: int,
                anchors_per_window: int, gamma: float = 4.0, seed: int = 0):
    """DFlash's loss: position-weighted soft cross-entropy against the target's distribution
    at every block position. Held-out batches (no grad) use fixed anchors."""
    train_gen = torch.Generator().manual_seed(seed)
    weights = position_weights(k, gamma)

    def loss_fn(tokens: torch.Tensor, taps: torch.Tensor):
        gen = train_gen if torch.is_grad_enabled() else torch.Generator().manual_seed(12345)
        anchors = sample_anchors(tokens.shape[0], tokens.shape[1], k, anchors_per_window, gen)
        b = block_batch(drafter, tokens, taps, anchors, k)
        p = target_distribution(b.target_final, norm_w, head_w, eps)
        logits = drafter.logits(b.hidden)
        ce = -(p * F.log_softmax(logits, dim=-1)).sum(-1)  # [S, A, K]
        loss = (ce.mean(dim=(0, 1)) * weights).sum()
        info = {"ce": float(ce.detach().mean()), "tau": expected_tau(logits, p)}
        info.update({f"acc{j + 1}": v for j, v in enumerate(greedy_acceptance_by_position(logits, p))})
        return loss, info

    loss_fn.generators = [g for g in (train_gen,) if g is not None]  # saved with the resume state
    return loss_fn


# -- the recipes' shared steps --------------------------------------------------------------


def add_block_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, default=4, help="drafts per block (the default num_speculative_tokens)")
    p.add_argument("--layers", type=int, default=1, help="draft layers")
    p.add_argument("--taps", type=int, default=3, help="target layers fused into the context")
    p.add_argument("--anchors", type=int, default=24, help="random anchors (blocks) per window")
    p.add_argument("--gamma", type=float, default=4.0, help="position-weight decay")
    p.add_argument("--tap-ids", type=int, nargs="+", default=None,
                   help="the target layers to fuse (0-based outputs; default: spaced from 1 to N-3)")
    p.add_argument("--init", default=None,
                   help="start from this drafter's weights (a checkpoint of the recipe's kind and of the drafter "
                        "these flags build: its taps, layers, K; specpath train --from sets them)")


def block_parser(doc: str) -> argparse.ArgumentParser:
    """The command line every block-drafter recipe starts from: the data arguments
    (:func:`specpath_train.trainer.add_data_arguments`) and the block's own."""
    from specpath_train.trainer import add_data_arguments

    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    add_data_arguments(p)
    add_block_arguments(p)
    return p


@attrs.frozen(kw_only=True)
class BlockRun:
    """What a block-drafter recipe has once its data is loaded (see :func:`prepare_block_run`)."""

    out: Any
    log: Any
    config: dict
    norm_w: torch.Tensor
    eps: float
    tokens: torch.Tensor
    taps: torch.Tensor
    head_w: torch.Tensor
    """The rows of the target head the loss scores (all, or the ``--train-vocab`` ones)."""
    vocab_ids: torch.Tensor | None
    """Their ids (None: the whole vocabulary); recorded so serving keeps to them."""
    drafter: DFlashDrafter
    init: dict | None = None
    """The ``--init`` checkpoint's own training record (its lineage, for this run's record)."""


def prepare_block_run(name: str, args: argparse.Namespace,
                      make: Callable[[dict, torch.Tensor, torch.Tensor], DFlashDrafter]) -> BlockRun:
    """The common start of the DFlash and DSpark recipes: the run directory and target parts,
    the taps the drafter reads (+ the target's last layer for the labels), the training head
    rows, and the drafter ``make(config, emb_w, head_rows)`` with the target's final norm."""
    from specpath_train.trainer import training_features, training_head_rows

    out, log, config, emb_w, norm_w, head_w, *_ = setup_run(args)
    taps_ids = make(config, emb_w, head_w[:1]).config.target_layer_ids
    layers = (*taps_ids, config["num_hidden_layers"] - 1)
    log(f"{name}: target {args.target} taps {taps_ids} args {vars(args)}")
    tokens, taps = training_features(args, layers, log)
    head_w, vocab_ids = training_head_rows(args, tokens[args.heldout_windows:], head_w, log)
    drafter = make(config, emb_w, head_w)
    with torch.no_grad():
        drafter.norm.weight.copy_(norm_w)
    init = start_from(drafter, args.init, log) if getattr(args, "init", None) else None
    return BlockRun(out=out, log=log, config=config, norm_w=norm_w, eps=config.get("rms_norm_eps", 1e-6),
                    tokens=tokens, taps=taps, head_w=head_w, vocab_ids=vocab_ids, drafter=drafter, init=init)


INIT_FIELDS = ("kind", "target_layer_ids", "num_draft_tokens", "anchor_sampling", "markov_rank")
"""What a ``--init`` checkpoint must share with the drafter the recipe's flags build (the weights'
shapes are checked as they load). Its layer count may be lower: see :func:`grown_layers`."""

ZEROED = ("o_proj.weight", "down_proj.weight")
"""A grown layer's output projections: zero, so it adds nothing to the residual stream at first."""


def grown_layers(have: int, want: int) -> Callable[[dict[str, torch.Tensor]], None]:
    """Complete a ``have``-layer drafter's tensors to ``want`` layers: each new layer (after the
    last) starts as a copy of the last one with :data:`ZEROED` projections at zero, so the grown
    drafter drafts exactly what the checkpoint did and training starts from there (the copy's
    attention and MLP already compute features the drafter uses, which a random layer would not)."""

    def complete(tensors: dict[str, torch.Tensor]) -> None:
        last = f"layers.{have - 1}."
        for i in range(have, want):
            tensors[f"input_layernorms.{i}.weight"] = tensors[f"input_layernorms.{have - 1}.weight"].clone()
            for name in [k for k in tensors if k.startswith(last)]:
                part = name[len(last):]
                t = tensors[name]
                tensors[f"layers.{i}.{part}"] = torch.zeros_like(t) if part in ZEROED else t.clone()

    return complete


def start_from(drafter: DFlashDrafter, path: str, log: Callable[[str], None]) -> dict | None:
    """Load ``path``'s weights into ``drafter`` (every tensor, with its shape), after checking it
    is a drafter of the same kind and layout, with as many layers or fewer (grown: :func:`grown_layers`);
    returns its training record (None: none kept)."""
    import json
    from pathlib import Path

    from specpath_drafting.block.drafter import load_weights, read_config

    theirs, mine = read_config(path), drafter.config
    differs = [f"{f} {getattr(theirs, f)!r} (this run: {getattr(mine, f)!r})" for f in INIT_FIELDS
               if getattr(theirs, f) != getattr(mine, f)]
    if theirs.num_hidden_layers > mine.num_hidden_layers:
        differs.append(f"num_hidden_layers {theirs.num_hidden_layers} (this run: {mine.num_hidden_layers}; "
                       "a run may add layers, not drop them)")
    if differs:
        raise ValueError(f"--init {path}: another drafter than these flags build: {', '.join(differs)}")
    have, want = theirs.num_hidden_layers, mine.num_hidden_layers
    load_weights(drafter, path, complete=grown_layers(have, want) if want > have else None)
    grown = f" (grown from {have} to {want} layers)" if want > have else ""
    log(f"{mine.kind}: initialised from {path}{grown}")
    return json.loads((Path(path) / "config.json").read_text()).get("specpath_training")


def setup_run(args: argparse.Namespace):
    """Threads, run directory, a logger, the target's parts and the cached features."""
    from specpath_train.trainer import cached_features, features_dir, load_target_parts, make_windows_fn, start_run

    out, log = start_run(args)
    config, emb_w, norm_w, head_w = load_target_parts(args.target, getattr(args, "data", None))
    return out, log, config, emb_w, norm_w, head_w, features_dir(args), cached_features, make_windows_fn(args)


def build(kind: str, args: argparse.Namespace, config: dict, emb_w: torch.Tensor, head_w: torch.Tensor,
          module: type = DFlashDrafter, **overrides):
    if getattr(args, "tap_ids", None):
        overrides = {"target_layer_ids": tuple(args.tap_ids), **overrides}
    dc = DrafterConfig.for_target(kind, config, num_layers=args.layers,
                                  num_taps=len(getattr(args, "tap_ids", None) or ()) or args.taps,
                                  num_draft_tokens=args.k, **overrides)
    drafter = module(dc, embed_tokens=lambda ids: F.embedding(ids, emb_w), lm_head=lambda h: h @ head_w.T)
    with torch.no_grad():
        drafter.mask_embedding.copy_(emb_w.mean(0))  # start the mask slots at the average token
    return drafter
