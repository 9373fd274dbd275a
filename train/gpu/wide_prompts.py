"""The wide corpus's prompts for a GPU run: the model-free kinds from a file written on a CPU
machine beforehand (drawing them parses the stdlib: minutes of one core), the self-instructed
requests written by the target on the GPU (:func:`specpath_train.prompt_mix.self_instruct`),
shuffled together into one ``specpath train --data`` file.

    python3 train/gpu/wide_prompts.py TARGET_DIR TEMPLATE_ROWS.jsonl.gz N_SELF OUT.jsonl [--seed S]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("target")
    p.add_argument("rows")
    p.add_argument("n_self", type=int)
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    args = p.parse_args(argv)
    from specpath_engine.tokenizer import load_tokenizer
    from specpath_train import prompt_mix
    from specpath_train.device_generate import DeviceGenerator

    with gzip.open(args.rows, "rt") as f:
        rows = [json.loads(line) for line in f]
    tokenizer = load_tokenizer(args.target)
    template, bos = getattr(tokenizer, "chat_template", None), getattr(tokenizer, "bos_token", None)
    t0 = time.time()
    made = prompt_mix.self_instruct(DeviceGenerator(args.target, device=args.device), template, args.n_self,
                                    seed=args.seed, bos_token=bos) if args.n_self else []
    print(f"self-instructed: {len(made)} requests in {time.time() - t0:.1f}s", flush=True)
    rows += made
    random.Random(args.seed).shuffle(rows)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{args.out}: {len(rows)} prompts", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
