"""Train an EAGLE-3 head (with P-EAGLE mask parameters) for a specpath target.

    python -m specpath_train.recipes.eagle3 --out runs/eagle3 --minutes 11 [--export DIR]

Recipe:

- **Taps**: a low, middle and high target layer (``default_aux_layer_ids``), fused by ``fc``.
- **Draft vocabulary**: the ``--draft-vocab`` most frequent target tokens of the training text;
  ``d2t``/``t2d`` map it onto the target's. ``lm_head`` starts from the target head's rows. An
  ``--init`` head keeps its own vocabulary, or with ``--revocab`` takes this data's (a head chosen
  on other text misses tokens this text needs, which it can never draft): ids it had keep their
  trained rows, new ones start from the target head's.
- **Training-time test** (EAGLE-3): depth 0 reads the real fused feature; depth j reads the
  head's own depth j-1 output at the previous position (the chain it will run), attending to
  the real keys up to its chain's start and to its chain's earlier keys
  (:func:`specpath_drafting.rollout.rollout_attention`). Loss: soft cross-entropy against the
  target's distribution restricted to the draft vocabulary, positions whose target argmax the
  draft vocabulary covers, weighted ``0.8**j``.
- **P-EAGLE** (same weights, same pass structure): depths 1..K-1 read the learned mask
  embedding and mask hidden vector instead; loss weight ``--parallel-weight`` at every depth.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from specpath_drafting.config import default_aux_layer_ids, engine_layers
from specpath_drafting.heads import HeadConfig, save_head
from specpath_drafting.rollout import depth_pass
from specpath_train.trainer import (
    add_data_arguments,
    fit_and_save,
    heldout_top1,
    load_target_parts,
    ranked_vocabulary,
    start_run,
    target_argmax,
    target_probs_from_final,
    training_features,
    vocab_by_frequency,
)
from specpath_eagle3.head import Eagle3Head


def draft_vocabulary(tokens: torch.Tensor, vocab_size: int, size: int) -> torch.Tensor:
    """The ``size`` most frequent ids of ``tokens``, ascending (ties: lower id first)."""
    return vocab_by_frequency(tokens, vocab_size, size)


def revocab(start: dict[str, torch.Tensor], ids: torch.Tensor, fresh_rows: torch.Tensor) -> int:
    """Point a saved head's state ``start`` at the draft vocabulary ``ids`` [V'] (ascending target
    ids), in place: an id the head had keeps its trained ``lm_head`` row, a new one takes its row
    of ``fresh_rows`` [V', d] (the target head's); ``d2t``/``t2d`` are the head's own (set from
    ``ids``), so they leave ``start``. Returns how many ids kept their row."""
    old_ids = torch.arange(start["lm_head.weight"].shape[0])  # [V] target id of each old row
    if "d2t" in start:  # a head over the whole vocabulary has no map: row i is id i
        old_ids = old_ids + start["d2t"].long()
    where = torch.full((int(max(old_ids.max(), ids.max())) + 1,), -1, dtype=torch.long)
    where[old_ids] = torch.arange(old_ids.shape[0])
    old_row = where[ids]  # [V'] the old row of each new id, -1 where new
    rows = fresh_rows.detach().clone().to(start["lm_head.weight"].dtype)
    have = old_row >= 0
    rows[have] = start["lm_head.weight"][old_row[have]]
    start["lm_head.weight"] = rows
    for key in ("d2t", "t2d"):
        start.pop(key, None)
    return int(have.sum())


def eagle3_loss(head: Eagle3Head, norm_w: torch.Tensor, head_w: torch.Tensor, eps: float, *,
                ttt_steps: int, parallel_depths: int, parallel_weight: float, decay: float = 0.8,
                restricted: bool = False, heldout_argmax: torch.Tensor | None = None):
    """With ``restricted``, the target's distribution is computed over the draft vocabulary's
    rows of its head only (a large vocabulary: SmolLM2's 49,152 would cost ~5x the head itself);
    held-out agreement still compares with the target's argmax over its whole vocabulary
    (``heldout_argmax`` [windows, W], the data cache's top-1, else computed here)."""
    draft_ids = head.draft_ids
    target_w = head_w[draft_ids] if restricted else head_w

    def loss_fn(tokens: torch.Tensor, taps: torch.Tensor):
        aux, final = taps[:, :, :-1], taps[:, :, -1]
        b, w = tokens.shape
        p = w - 2
        probs = target_probs_from_final(norm_w, target_w, final[:, 1:p + 1], eps)  # predicts x_{q+2}
        if restricted:
            sub = probs
            covered = torch.ones(probs.shape[:-1])
            top = draft_ids[probs.argmax(-1)]
            if not torch.is_grad_enabled():
                if heldout_argmax is not None and heldout_argmax.shape == tokens.shape:
                    top = heldout_argmax[:, 1:p + 1]
                else:
                    top = target_argmax(norm_w, head_w, final[:, 1:p + 1], eps)
        else:
            top = probs.argmax(-1)
            covered = head.t2d[top].float()
            sub = probs[..., draft_ids]
            sub = sub / sub.sum(-1, keepdim=True).clamp_min(1e-9)
        pos = torch.arange(p)

        def depth_loss(a: torch.Tensor, j: int):
            logp = F.log_softmax(head.logits(a), dim=-1)
            valid = covered * (pos >= j).float()[None]
            loss = (-(sub * logp).sum(-1) * valid).sum() / valid.sum().clamp_min(1)
            hit = (head.to_target(logp.argmax(-1)) == top).float()
            acc = (hit * (pos >= j).float()[None]).sum() / ((pos >= j).float().sum() * b)
            return loss, acc.item()

        emb = head.embed(tokens[:, 1:p + 1])
        cos, sin = head.rope(pos)
        cache: list = []
        info: dict = {}
        total = 0.0
        feat = head.fuse(aux[:, :p])
        a = None
        for j in range(ttt_steps):
            if j:
                feat = torch.cat([a[:, :1] * 0, a[:, :-1]], dim=1)
            a = depth_pass(head, emb, feat, cos, sin, cache)
            loss, acc = depth_loss(a, j)
            total = total + decay ** j * loss
            info[f"acc{j}"] = acc
        if parallel_depths > 1:
            mcache = cache[:1]
            m_emb = head.mask_embeds(1).expand(b, p, -1)
            m_feat = head.mask_features(1).expand(b, p, -1)
            for j in range(1, parallel_depths):
                a_m = depth_pass(head, m_emb, m_feat, cos, sin, mcache)
                loss, acc = depth_loss(a_m, j)
                total = total + parallel_weight * loss
                info[f"par{j}"] = acc
        return total, info

    return loss_fn


MASK_PARAMETERS = ("mask_hidden", "mask_embedding")
"""P-EAGLE's own parameters: the rest of the head is the chain head's."""


def train_only_mask(head: Eagle3Head) -> None:
    """Freeze everything but P-EAGLE's mask parameters, so the chain head it starts from stays as
    it was and drafting in a chain keeps its acceptance."""
    for name, param in head.named_parameters():
        param.requires_grad_(name in MASK_PARAMETERS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(p)
    p.add_argument("--draft-vocab", type=int, default=128, help="reduced draft vocabulary size")
    p.add_argument("--ttt-steps", type=int, default=4, help="training-time-test depths (1 = teacher forcing)")
    p.add_argument("--parallel-depths", type=int, default=4, help="P-EAGLE: train drafts 1..N-1 from mask slots (0: off)")
    p.add_argument("--parallel-weight", type=float, default=0.5)
    p.add_argument("--init", default=None, help="start from this EAGLE-3 head (e.g. train P-EAGLE on a chain head)")
    p.add_argument("--revocab", action="store_true",
                   help="with --init: the draft vocabulary from this data (--draft-vocab ids), not the head's")
    p.add_argument("--train-only", choices=("all", "mask"), default="all",
                   help="mask: train only P-EAGLE's mask parameters, the --init chain head frozen")
    args = p.parse_args(argv)
    out, log = start_run(args)
    config, emb_w, norm_w, head_w = load_target_parts(args.target, args.data)
    n = config["num_hidden_layers"]
    aux = default_aux_layer_ids(n)  # vLLM convention: the state entering layer i
    layers = (*engine_layers(aux), n - 1)
    log(f"eagle3: target {args.target} taps {aux} (+ final {n - 1} for the targets) args {vars(args)}")
    tokens, taps = training_features(args, layers, log)
    held = args.heldout_windows
    vocab = config["vocab_size"]
    draft_vocab = min(args.draft_vocab, vocab)
    head_config = HeadConfig.for_target(
        "eagle3", config, draft_vocab_size=draft_vocab if draft_vocab < vocab else None,
        parallel_drafting=args.parallel_depths > 1, aux_layer_ids=aux)
    head = Eagle3Head(head_config, embed_tokens=lambda ids: F.embedding(ids, emb_w))
    ids = ranked_vocabulary(args, tokens[held:], vocab, draft_vocab)
    with torch.no_grad():
        head.set_vocab_map(ids)
        head.lm_head.weight.copy_(head_w[ids])
        head.norm.weight.copy_(norm_w)
        if head_config.parallel_drafting:
            head.mask_hidden.normal_(0, 0.02)
            head.mask_embedding.normal_(0, 0.02)
    if args.init:
        from safetensors.torch import load_file

        start = load_file(str(Path(args.init) / "model.safetensors"))
        if args.revocab:
            kept = revocab(start, ids, head.lm_head.weight)
            log(f"eagle3: --revocab: {kept} of {len(ids)} ids keep the --init head's rows")
        missing = head.load_state_dict(start, strict=False).missing_keys
        ids = head.draft_ids
        log(f"eagle3: initialised from {args.init} (new: {missing or 'none'})")
    elif args.revocab:
        p.error("--revocab needs --init (a head whose vocabulary is replaced)")
    if args.train_only == "mask":
        if not (head_config.parallel_drafting and args.init):
            p.error("--train-only mask needs --init (a chain head) and --parallel-depths > 1")
        train_only_mask(head)
    covered = float(torch.isin(tokens[held:], ids).float().mean())
    log(f"eagle3: draft vocabulary {draft_vocab}/{vocab} ids covers {covered:.4%} of training tokens")
    loss_fn = eagle3_loss(head, norm_w, head_w, config.get("rms_norm_eps", 1e-6), ttt_steps=args.ttt_steps,
                          parallel_depths=args.parallel_depths, parallel_weight=args.parallel_weight,
                          restricted=bool(args.train_vocab), heldout_argmax=heldout_top1(args, held))
    fit_and_save("eagle3", "specpath_train.recipes.eagle3", head, loss_fn, tokens, taps, args, log, save=save_head,
                 path=out / "head", argv=argv)
    return 0


if __name__ == "__main__":
    from specpath_train.trainer import run_recipe

    sys.exit(run_recipe(main, "specpath_train.recipes.eagle3"))
