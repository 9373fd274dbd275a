"""Train a DSpark drafter for a specpath target (by default the embedded byte-level model).

    python -m specpath_dspark.train_dspark --out runs/dspark --minutes 6 [--export DIR]

Recipe (DSpark): the DFlash recipe (taps -> KV-injected context, random anchors, blocks that
see only the context before their anchor) in the anchor-first layout (the anchor position
predicts the first draft), plus a low-rank Markov head and a confidence head trained with
CE + L1 (total variation) + confidence BCE (:mod:`specpath_dspark.training`). Afterwards the
confidence head is calibrated on held-out windows by sequential temperature scaling against
greedy acceptance; the temperatures are written to ``config.json``.
"""

from __future__ import annotations

import argparse
import sys

import torch

from specpath_drafting.block.drafter import save_drafter
from specpath_drafting.block.training import add_block_arguments, build, setup_run
from specpath_dspark.drafter import DSparkDrafter
from specpath_dspark.training import calibrate_temperatures, calibration_data, dspark_loss


def main(argv: list[str] | None = None) -> int:
    from specpath_drafting.training import add_data_arguments, fit, save_and_export, training_record

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(p)
    add_block_arguments(p)
    p.add_argument("--markov-rank", type=int, default=64)
    p.add_argument("--fill-in", action="store_true", help="train the [anchor, masks] layout instead of anchor-first")
    p.add_argument("--loss-weights", type=float, nargs=3, default=(0.1, 0.9, 1.0), metavar=("CE", "L1", "BCE"))
    p.add_argument("--soft-ce", action="store_true",
                   help="CE against the target's distribution instead of the data token (its expectation on target samples)")
    args = p.parse_args(argv)
    out, log, config, emb_w, norm_w, head_w, feats, cached_features, make_windows = setup_run(args)
    drafter = build("dspark", args, config, emb_w, head_w, module=DSparkDrafter, markov_rank=args.markov_rank,
                    anchor_sampling=not args.fill_in)
    with torch.no_grad():
        drafter.norm.weight.copy_(norm_w)
    layers = (*drafter.config.target_layer_ids, config["num_hidden_layers"] - 1)
    log(f"dspark: target {args.target} taps {drafter.config.target_layer_ids} args {vars(args)}")
    tokens, taps = cached_features(feats, args.target, layers, make_windows=make_windows, log=log)
    held = args.heldout_windows
    eps = config.get("rms_norm_eps", 1e-6)
    loss_fn = dspark_loss(drafter, norm_w, head_w, eps, k=args.k, anchors_per_window=args.anchors, gamma=args.gamma,
                          seed=args.seed, weights=tuple(args.loss_weights), soft_ce=args.soft_ce)
    metrics = fit("dspark", drafter, loss_fn, tokens, taps, args, log)
    conf_logits, accepted = calibration_data(drafter, tokens[:held], taps[:held], norm_w, head_w, eps, k=args.k,
                                             anchors_per_window=args.anchors)
    temps, errors = calibrate_temperatures(conf_logits, accepted)
    log(f"dspark: confidence temperatures {[round(t, 3) for t in temps]}, cumulative ECE {[round(e, 4) for e in errors]}")
    with torch.no_grad():
        drafter.confidence_temperatures.copy_(torch.tensor(temps))
    extra = {"confidence_temperatures": temps,
             "specpath_training": training_record("specpath_dspark.train_dspark", args, metrics, argv=argv,
                                                  calibration_ece=errors)}
    save_and_export(save_drafter, drafter, out / "drafter", args, log, "dspark", extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
