"""The wide corpus's model-free prompts for a GPU run, drawn on a CPU machine beforehand (it
parses the stdlib: ~4 minutes of one core for 20k rows), deduplicated, as gzipped ``--data``
rows: what train/gpu/train_drafters.sh takes as TEMPLATE_ROWS.

    python3 train/gpu/template_rows.py OUT.jsonl.gz [--prompts 32000] [--seed 100]

``--prompts`` is the size of the whole wide corpus the rows are a share of (the self-instructed
share, 36%, is written on the GPU). The shipped SmolLM2 EAGLE-3 head's data: the defaults.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--prompts", type=int, default=32000)
    p.add_argument("--seed", type=int, default=100)
    args = p.parse_args(argv)
    from specpath_train import prompt_mix

    counts = prompt_mix.wide_counts(args.prompts, self_instructed=True)
    counts.pop("self")
    seen: set[str] = set()
    rows = []
    for row in prompt_mix.template_rows("train", counts, seed=args.seed):
        key = json.dumps(row, sort_keys=True)
        if key not in seen:
            seen.add(key)
            rows.append(row)
    with gzip.open(args.out, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"{args.out}: {len(rows)} rows ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
