"""Train a DFlash drafter for a specpath target (by default the embedded byte-level model).

    python -m specpath_train.recipes.dflash --out runs/dflash --minutes 6 [--export DIR]

Recipe (DFlash): the target's taps (low/middle/high layers) are fused into context features
that the drafter's layers read as keys and values; blocks [anchor, K masks] start at random
anchors of each window (``--anchors`` per window) and see only the context before their
anchor; the K mask positions learn the target's next-token distributions (soft cross-entropy,
position weights ``exp(-(k-1)/4)``). The target's embedding and LM head are frozen and shared.
Data: corpus windows plus the target's own continuations (``specpath_train.trainer`` data arguments);
features cached under ``--features``.
"""

from __future__ import annotations

import sys

from specpath_drafting.block.drafter import save_drafter
from specpath_train.block import block_parser, build, dflash_loss, prepare_block_run
from specpath_train.trainer import fit, save_and_export, train_vocab_record, training_record


def main(argv: list[str] | None = None) -> int:
    parser = block_parser(__doc__)
    args = parser.parse_args(argv)
    try:
        run = prepare_block_run("dflash", args, lambda config, emb_w, rows: build("dflash", args, config, emb_w, rows))
    except ValueError as e:  # a --init checkpoint of another drafter
        parser.error(str(e))
    loss_fn = dflash_loss(run.drafter, run.norm_w, run.head_w, run.eps, k=args.k, anchors_per_window=args.anchors,
                          gamma=args.gamma, seed=args.seed)
    metrics = fit("dflash", run.drafter, loss_fn, run.tokens, run.taps, args, run.log)
    extra = {"specpath_training": training_record("specpath_train.recipes.dflash", args, metrics, argv=argv,
                                                  init=run.init, **train_vocab_record(run.vocab_ids))}
    save_and_export(save_drafter, run.drafter, run.out / "drafter", args, run.log, "dflash", extra=extra)
    return 0


if __name__ == "__main__":
    from specpath_train.trainer import run_recipe

    sys.exit(run_recipe(main, "specpath_train.recipes.dflash"))
