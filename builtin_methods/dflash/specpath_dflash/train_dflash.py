"""Train a DFlash drafter for a specpath target (by default the embedded byte-level model).

    python -m specpath_dflash.train_dflash --out runs/dflash --minutes 6 [--export DIR]

Recipe (DFlash): the target's taps (low/middle/high layers) are fused into context features
that the drafter's layers read as keys and values; blocks [anchor, K masks] start at random
anchors of each window (``--anchors`` per window) and see only the context before their
anchor; the K mask positions learn the target's next-token distributions (soft cross-entropy,
position weights ``exp(-(k-1)/4)``). The target's embedding and LM head are frozen and shared.
Data: corpus windows plus the target's own continuations (``specpath_drafting.training`` data arguments);
features cached under ``--features``.
"""

from __future__ import annotations

import argparse
import sys

import torch

from specpath_drafting.block.drafter import save_drafter
from specpath_drafting.block.training import add_block_arguments, build, setup_run


def main(argv: list[str] | None = None) -> int:
    from specpath_drafting.block.training import dflash_loss
    from specpath_drafting.training import add_data_arguments, fit_and_save

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(p)
    add_block_arguments(p)
    args = p.parse_args(argv)
    out, log, config, emb_w, norm_w, head_w, feats, cached_features, make_windows = setup_run(args)
    drafter = build("dflash", args, config, emb_w, head_w)
    with torch.no_grad():
        drafter.norm.weight.copy_(norm_w)
    layers = (*drafter.config.target_layer_ids, config["num_hidden_layers"] - 1)
    log(f"dflash: target {args.target} taps {drafter.config.target_layer_ids} args {vars(args)}")
    tokens, taps = cached_features(feats, args.target, layers, make_windows=make_windows, log=log)
    eps = config.get("rms_norm_eps", 1e-6)
    loss_fn = dflash_loss(drafter, norm_w, head_w, eps, k=args.k, anchors_per_window=args.anchors, gamma=args.gamma,
                          seed=args.seed)
    fit_and_save("dflash", "specpath_dflash.train_dflash", drafter, loss_fn, tokens, taps, args, log,
                 save=save_drafter, path=out / "drafter", argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
