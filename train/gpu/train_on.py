"""Train one method's drafter on a data directory made before (a live one: windows only, see
:mod:`specpath_train.live`), on a device: the training stage of ``specpath train`` without its
data stage, so that several methods train side by side on one GPU from one set of responses.
The recipe and its flags are the ones ``specpath train METHOD`` runs (``specpath_train.methods``);
the checkpoint in OUT records this command line.

    python3 train/gpu/train_on.py METHOD --target DIR --data DIR --out OUT --minutes M \\
        [--device cuda] [--batch 64] [--lr LR] [--from CHECKPOINT] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("method")
    p.add_argument("--target", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--from", dest="init", default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from specpath_train.cli_train import recipe_argv
    from specpath_train.methods import RECIPES

    recipe = RECIPES[args.method]
    config = json.loads((Path(args.target) / "config.json").read_text())
    out = Path(args.out)
    cli = argparse.Namespace(steps=None, lr=args.lr, seed=args.seed, threads=1, batch=args.batch, minutes=args.minutes,
                             no_progress=True, device=args.device, init=args.init, precision="auto",
                             draft_vocab=None, draft_layers=None)
    rargv = recipe_argv(recipe, cli, Path(args.target), Path(args.data), out / "run" / "work", out, config)
    print(f"train: specpath_train.recipes.{recipe.module} {' '.join(rargv)}", flush=True)
    importlib.import_module(f"specpath_train.recipes.{recipe.module}").main(rargv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
