"""Write a wide ``--data`` prompt file for ``specpath train`` (see specpath_train.prompt_mix).

    python scripts/make_drafter_prompts.py --target smollm2-135m --out prompts.jsonl --seed 1 \
        --code 700 --headers 500 --chat 700 --general 500 --edits 400 --self 1600
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="smollm2-135m")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    for kind, n in (("code", 700), ("headers", 500), ("chat", 700), ("general", 500), ("edits", 400), ("self", 1600)):
        p.add_argument(f"--{kind}", type=int, default=n)
    p.add_argument("--max-num-seqs", type=int, default=48)
    args = p.parse_args()

    from specpath_engine.llm import LLM
    from specpath_engine.modeling.named_models import hf_checkpoint_dir, resolve_model_path
    from specpath_train.prompt_mix import mix

    path = resolve_model_path(args.target)
    ckpt = hf_checkpoint_dir(args.target) if not Path(args.target).exists() else path
    template = json.loads((Path(ckpt) / "tokenizer_config.json").read_text())["chat_template"]
    llm = LLM(args.target, max_num_seqs=args.max_num_seqs) if args.self else None
    t0 = time.time()
    rows = mix(llm, template, n_code=args.code, n_headers=args.headers, n_chat=args.chat, n_general=args.general,
               n_edits=args.edits, n_self=args.self, seed=args.seed)
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{args.out}: {len(rows)} prompts in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
