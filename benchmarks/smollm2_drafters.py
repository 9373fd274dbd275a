"""τ of the SmolLM2 drafters on held-out prompts, next to plain decoding (greedy identity checked).

    python benchmarks/smollm2_drafters.py --target /work/models/smollm2-135m --k 4 \
        --method eagle3=builtin_methods/eagle3/specpath_eagle3/heads/eagle3-smollm2 ...

Prompts: code snippets and chat instructions from the *held-out* stdlib files (the split the
drafters' training text never saw), built as ``specpath_drafting.target_text`` builds training
prompts, with another seed. Each method runs through ``LLM(model=target, speculative_config=...)``
with greedy sampling, stopping at EOS; its tokens are compared with plain decoding in the same
dtype (fp32 by default, where greedy decoding must be identical). Prints one JSON line per method
(τ, acceptance by position, tok/s, identical prompts) and per-prompt τ.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def prompts_for(target: str, num_code: int, num_chat: int, seed: int) -> list[list[int]]:
    from specpath_drafting.target_text import build_prompts, chat_template, load_tokenizer

    return build_prompts(load_tokenizer(target), chat_template(target), split="heldout", num_code=num_code,
                         num_chat=num_chat, seed=seed, max_prompt_tokens=200)


def run(target: str, spec: dict | None, prompts: list[list[int]], *, max_tokens: int, dtype: str, threads: int):
    from specpath.engine.llm import LLM, SamplingParams

    llm = LLM(target, spec, dtype=dtype, max_model_len=1024, max_num_seqs=1, num_threads=threads)
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    llm.generate([prompts[0][:16]], SamplingParams(max_tokens=4))  # warm-up
    outs, start = [], time.perf_counter()
    for p in prompts:  # batch 1: the serving case speculation is for
        outs.append(llm.generate([p], params)[0])
    return outs, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--method", action="append", default=[], metavar="NAME=DRAFT_DIR|NAME=@JSON",
                   help="a method and its drafter (repeat); NAME=@{json} for a whole speculative_config")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--code", type=int, default=3)
    p.add_argument("--chat", type=int, default=3)
    p.add_argument("--seed", type=int, default=99)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    prompts = prompts_for(args.target, args.code, args.chat, args.seed)
    base, base_s = run(args.target, None, prompts, max_tokens=args.max_tokens, dtype=args.dtype, threads=args.threads)
    n_base = sum(len(o.token_ids) for o in base)
    print(json.dumps({"method": "baseline", "tokens": n_base, "tok_s": round(n_base / base_s, 2)}), flush=True)
    for item in args.method:
        name, _, value = item.partition("=")
        spec = json.loads(value[1:]) if value.startswith("@") else {"method": name, "model": value}
        spec.setdefault("num_speculative_tokens", args.k)
        outs, secs = run(args.target, spec, prompts, max_tokens=args.max_tokens, dtype=args.dtype, threads=args.threads)
        drafts = sum(o.metrics.num_drafts for o in outs)
        accepted = sum(o.metrics.num_accepted_tokens for o in outs)
        by_pos_d = [sum(o.metrics.drafted_by_position[i] for o in outs if len(o.metrics.drafted_by_position) > i)
                    for i in range(args.k)]
        by_pos_a = [sum(o.metrics.accepted_by_position[i] for o in outs if len(o.metrics.accepted_by_position) > i)
                    for i in range(args.k)]
        n = sum(len(o.token_ids) for o in outs)
        print(json.dumps({
            "method": name, "k": args.k, "tau": round(1 + accepted / max(drafts, 1), 3),
            "acceptance_by_position": [round(a / max(d, 1), 3) for a, d in zip(by_pos_a, by_pos_d)],
            "tok_s": round(n / secs, 2), "speedup_vs_baseline_same_dtype": round((n / secs) / (n_base / base_s), 3),
            "identical": sum(o.token_ids == b.token_ids for o, b in zip(outs, base)), "prompts": len(prompts),
            "per_prompt_tau": [round(o.metrics.mean_acceptance_length, 2) for o in outs],
        }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
