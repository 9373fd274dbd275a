"""Train a DSpark drafter for a specpath target (by default the embedded byte-level model).

    python -m specpath_train.recipes.dspark --out runs/dspark --minutes 6 [--export DIR]

Recipe (DSpark): the DFlash recipe (taps -> KV-injected context, random anchors, blocks that
see only the context before their anchor) in the anchor-first layout (the anchor position
predicts the first draft), plus a low-rank Markov head and a confidence head trained with
CE + L1 (total variation) + confidence BCE (:mod:`specpath_train.recipes.dspark_losses`). Afterwards the
confidence head is calibrated on held-out windows by sequential temperature scaling against
greedy acceptance; the temperatures are written to ``config.json``.
"""

from __future__ import annotations

import sys

import torch

from specpath_drafting.block.drafter import save_drafter
from specpath_train.block import block_parser, build, prepare_block_run
from specpath_train.trainer import fit, save_and_export, train_vocab_record, training_record
from specpath_dspark.drafter import DSparkDrafter
from specpath_train.recipes.dspark_losses import calibrate_temperatures, calibration_data, dspark_loss


def main(argv: list[str] | None = None) -> int:
    p = block_parser(__doc__)
    p.add_argument("--markov-rank", type=int, default=64)
    p.add_argument("--fill-in", action="store_true", help="train the [anchor, masks] layout instead of anchor-first")
    p.add_argument("--loss-weights", type=float, nargs=3, default=(0.1, 0.9, 1.0), metavar=("CE", "L1", "BCE"))
    p.add_argument("--soft-ce", action="store_true",
                   help="CE against the target's distribution instead of the data token (its expectation on target samples)")
    args = p.parse_args(argv)
    if args.train_vocab and not args.soft_ce:
        p.error("--train-vocab needs --soft-ce (a data token outside the training vocabulary has no logit)")

    def make(config: dict, emb_w: torch.Tensor, rows: torch.Tensor) -> DSparkDrafter:
        return build("dspark", args, config, emb_w, rows, module=DSparkDrafter, markov_rank=args.markov_rank,
                     anchor_sampling=not args.fill_in)

    try:
        run = prepare_block_run("dspark", args, make)
    except ValueError as e:  # a --init checkpoint of another drafter
        p.error(str(e))
    drafter, held = run.drafter, args.heldout_windows
    drafter.markov_columns = run.vocab_ids  # the Markov head scores the same reduced columns while training
    loss_fn = dspark_loss(drafter, run.norm_w, run.head_w, run.eps, k=args.k, anchors_per_window=args.anchors,
                          gamma=args.gamma, seed=args.seed, weights=tuple(args.loss_weights), soft_ce=args.soft_ce)
    metrics = fit("dspark", drafter, loss_fn, run.tokens, run.taps, args, run.log)
    conf_logits, accepted = calibration_data(drafter, run.tokens[:held], run.taps[:held], run.norm_w, run.head_w,
                                             run.eps, k=args.k, anchors_per_window=args.anchors)
    temps, errors = calibrate_temperatures(conf_logits, accepted)
    run.log(f"dspark: confidence temperatures {[round(t, 3) for t in temps]}, "
            f"cumulative ECE {[round(e, 4) for e in errors]}")
    with torch.no_grad():
        drafter.confidence_temperatures.copy_(torch.tensor(temps))
    extra = {"confidence_temperatures": temps,
             "specpath_training": training_record("specpath_train.recipes.dspark", args, metrics, argv=argv,
                                                  calibration_ece=errors, init=run.init,
                                                  **train_vocab_record(run.vocab_ids))}
    save_and_export(save_drafter, drafter, run.out / "drafter", args, run.log, "dspark", extra=extra)
    return 0


if __name__ == "__main__":
    from specpath_train.trainer import run_recipe

    sys.exit(run_recipe(main, "specpath_train.recipes.dspark"))
