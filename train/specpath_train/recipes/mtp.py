"""Train MTP modules for a specpath target (by default the embedded byte-level model).

    python -m specpath_train.recipes.mtp --modules 1 --out runs/mtp1 --minutes 8 [--export DIR]
    python -m specpath_train.recipes.mtp --modules 3 --out runs/mtp3 --minutes 8 [--export DIR]

Recipe (the target frozen, the modules trained afterwards, as the research notes suggest):

- Data: byte windows of the stdlib corpus plus the target's own continuations (greedy and
  sampled); the target's last hidden state (before the final norm) is cached per window
  (``specpath_train.trainer.cached_features``).
- Module m at position p reads module m-1's output (the target's hidden state for m = 0, with
  a little uniform noise) and the embedding of the token at p+m+1, and learns the *target's*
  next-token distribution at p+m+1 (soft cross-entropy), i.e. the token at p+m+2. Its output
  also regresses the target's hidden state at p+m+1 (SmoothL1, small weight), so it can stand
  in for that state when fed to the next module or to itself.
- One module is reused for every draft, so it is also trained on its own chain: at depth j a
  position's hidden input is the module's own output one position back (training-time test
  with ``specpath_train.trainer.depth_pass``), ``--depth`` depths in all.
- Several modules are trained jointly (gradients flow through the chain), loss averaged.

The modules start from the target's final norm and random weights (or, with ``--init``, from
modules trained earlier, e.g. on an interim export of the same target); AdamW, warm-up and cosine
decay over a wall-clock budget (``specpath_train.trainer.train_loop``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from specpath_drafting.rollout import depth_pass
from specpath_train.trainer import (
    add_data_arguments,
    fit,
    save_and_export,
    soft_cross_entropy,
    start_last_layer_run,
    target_probs_from_final,
    train_vocab_record,
    training_head_rows,
    training_record,
)
from specpath_mtp.module import build_modules, checkpoint_config, load_mtp_modules, save_mtp_checkpoint


def mtp_loss(modules, norm_w: torch.Tensor, head_w: torch.Tensor, eps: float, *, depth: int, reg_weight: float,
             noise: float, generator: torch.Generator | None = None):
    """The loss over a batch of windows (see the module docstring); metrics: ``acc{j}`` = how
    often draft j's argmax equals the target's."""
    n = len(modules)

    def loss_fn(tokens: torch.Tensor, taps: torch.Tensor):
        final = taps[:, :, -1]  # [B, W, d]
        steps = n if n > 1 else depth
        p = tokens.shape[1] - (n + 1)  # positions 0..p-1 have every token a module reads
        feats = final[:, :p]
        if noise and torch.is_grad_enabled():
            scale = feats.pow(2).mean().sqrt() * noise
            feats = feats + (torch.rand(feats.shape, generator=generator, device=generator.device).to(feats.device) * 2 - 1) * scale
        cos, sin = modules[0].rope(torch.arange(p))
        total, info = 0.0, {}
        cache: list = []
        a = None
        for j in range(steps):
            m = j if n > 1 else 0
            module = modules[m]
            embeds = module.embed(tokens[:, m + 1:p + m + 1])
            if j == 0:
                inputs = feats
            elif n > 1:
                inputs = a  # module m reads module m-1's output at the same position
                cache = []  # its own KV: plain causal attention
            else:
                inputs = torch.cat([a[:, :1] * 0, a[:, :-1]], dim=1)  # its own output one position back
            a = depth_pass(module, embeds, inputs, cos, sin, cache)
            wanted = final[:, m + 1:p + m + 1]
            probs = target_probs_from_final(norm_w, head_w, wanted, eps)
            logits = module.logits(a)
            ce = soft_cross_entropy(logits, probs)
            reg = F.smooth_l1_loss(a, wanted)
            total = total + ce + reg_weight * reg
            ok = logits.argmax(-1) == probs.argmax(-1)
            info[f"acc{j}"] = ok[:, j if n == 1 else 0:].float().mean().item()
            info[f"ce{j}"] = ce.item()
        return total / steps, info

    loss_fn.generators = [g for g in (generator,) if g is not None]  # saved with the resume state
    return loss_fn


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(p)  # --target --out --export --minutes --features --window ... (shared with EAGLE)
    p.add_argument("--modules", type=int, default=1, help="number of MTP modules (n_predict)")
    p.add_argument("--depth", type=int, default=3, help="one module: chain depths trained")
    p.add_argument("--reg-weight", type=float, default=0.3)
    p.add_argument("--noise", type=float, default=0.05, help="uniform noise on the target's states, relative to their RMS")
    p.add_argument("--save-dtype", choices=("float16", "float32"), default="float16",
                   help="dtype of the saved weights (float16 halves the shipped size; drafts barely change)")
    p.add_argument("--init", default=None,
                   help="start from this MTP checkpoint (same module count), e.g. modules trained on an earlier target")
    args = p.parse_args(argv)
    out, log, config, emb_w, norm_w, head_w, tokens, taps = start_last_layer_run(
        args, "mtp", f"modules {args.modules} ")
    head_w, vocab_ids = training_head_rows(args, tokens[args.heldout_windows:], head_w, log)

    modules = build_modules(checkpoint_config(config, args.modules),
                            embed_tokens=lambda ids: F.embedding(ids, emb_w), lm_head=lambda h: h @ head_w.T)
    container = torch.nn.ModuleList(modules)
    with torch.no_grad():
        if args.init:
            for module, trained in zip(modules, load_mtp_modules(args.init), strict=True):
                module.load_state_dict(trained.state_dict())
            log(f"mtp: initialised from {args.init}")
        else:
            for module in modules:
                module.norm.weight.copy_(norm_w)
    eps = config.get("rms_norm_eps", 1e-6)
    loss_fn = mtp_loss(modules, norm_w, head_w, eps, depth=args.depth, reg_weight=args.reg_weight, noise=args.noise,
                       generator=torch.Generator().manual_seed(args.seed))
    metrics = fit("mtp", container, loss_fn, tokens, taps, args, log)
    init = args.init and json.loads((Path(args.init) / "config.json").read_text()).get("specpath_training")
    extra = {"specpath_training": training_record("specpath_train.recipes.mtp", args, metrics, argv=argv,
                                                  modules=args.modules, init=init,
                                                  **train_vocab_record(vocab_ids))}
    dtype = getattr(torch, args.save_dtype)

    def save(mods, path, *, extra_config, dtype=dtype):
        save_mtp_checkpoint(mods, path, config, extra=extra_config, dtype=dtype)

    save_and_export(save, modules, out / "checkpoint", args, log, "mtp", extra=extra, dtype=dtype)
    return 0


if __name__ == "__main__":
    from specpath_train.trainer import run_recipe

    sys.exit(run_recipe(main, "specpath_train.recipes.mtp"))
