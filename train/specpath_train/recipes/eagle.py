"""Train an EAGLE-1 head for a specpath target (by default the embedded byte-level model).

    python -m specpath_train.recipes.eagle --out runs/eagle --minutes 11 [--export DIR]

Recipe (EAGLE-1, teacher forcing): the target's final feature ``f_p`` (output of its last
decoder layer, before the final norm) and the embedding of ``x_{p+1}`` go in; the head's output
``a_p`` must regress ``f_{p+1}`` (SmoothL1) and, through the target's final norm and head,
match the target's next-token distribution (soft cross-entropy). Uniform noise on the input
features (EAGLE's trick) makes the head tolerate its own imperfect features later in a chain.
Data: corpus windows plus the target's own continuations; features cached under ``--out``.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from specpath_eagle.head import EagleHead

from specpath_drafting.heads import HeadConfig, save_head
from specpath_drafting.rollout import depth_pass
from specpath_train.trainer import (
    add_data_arguments,
    fit_and_save,
    soft_cross_entropy,
    start_last_layer_run,
    target_probs_from_final,
)


def eagle_loss(head: EagleHead, norm_w: torch.Tensor, head_w: torch.Tensor, eps: float, *,
               ce_weight: float, noise: float, generator: torch.Generator | None = None):
    """EAGLE-1's loss over a batch of windows (see the module docstring)."""

    def loss_fn(tokens: torch.Tensor, taps: torch.Tensor):
        final = taps[:, :, -1]  # [B, W, d]
        p = tokens.shape[1] - 2
        feats = final[:, :p]
        if noise and torch.is_grad_enabled():
            scale = feats.pow(2).mean().sqrt() * noise
            feats = feats + (torch.rand(feats.shape, generator=generator, device=generator.device).to(feats.device) * 2 - 1) * scale
        emb = head.embed(tokens[:, 1:p + 1])
        cos, sin = head.rope(torch.arange(p))
        cache: list = []
        a = depth_pass(head, emb, feats, cos, sin, cache)
        wanted = final[:, 1:p + 1]
        reg = F.smooth_l1_loss(a, wanted)
        probs = target_probs_from_final(norm_w, head_w, wanted, eps)
        logits = head.logits(a)
        ce = soft_cross_entropy(logits, probs)
        top = probs.argmax(-1)
        info = {"reg": reg.item(), "ce": ce.item(), "acc0": (logits.argmax(-1) == top).float().mean().item()}
        if not torch.is_grad_enabled():  # held-out: also the second chain step (own feature in)
            a1 = depth_pass(head, emb, torch.cat([a[:, :1] * 0, a[:, :-1]], dim=1), cos, sin, cache)
            ok = (head.logits(a1).argmax(-1) == top)[:, 1:]
            info["acc1"] = ok.float().mean().item()
        return reg + ce_weight * ce, info

    loss_fn.generators = [g for g in (generator,) if g is not None]  # saved with the resume state
    return loss_fn


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(p)
    p.add_argument("--ce-weight", type=float, default=0.5)
    p.add_argument("--noise", type=float, default=0.1, help="uniform input-feature noise, relative to feature RMS")
    args = p.parse_args(argv)
    out, log, config, emb_w, norm_w, head_w, tokens, taps = start_last_layer_run(args, "eagle", "")
    head_config = HeadConfig.for_target("eagle", config)
    head = EagleHead(head_config, embed_tokens=lambda ids: F.embedding(ids, emb_w),
                     lm_head=lambda h: h @ head_w.T)
    with torch.no_grad():
        head.norm.weight.copy_(norm_w)
    head.norm.weight.requires_grad_(False)
    eps = config.get("rms_norm_eps", 1e-6)
    loss_fn = eagle_loss(head, norm_w, head_w, eps, ce_weight=args.ce_weight, noise=args.noise,
                         generator=torch.Generator().manual_seed(args.seed))
    fit_and_save("eagle", "specpath_train.recipes.eagle", head, loss_fn, tokens, taps, args, log, save=save_head,
                 path=out / "head", argv=argv)
    return 0


if __name__ == "__main__":
    from specpath_train.trainer import run_recipe

    sys.exit(run_recipe(main, "specpath_train.recipes.eagle"))
