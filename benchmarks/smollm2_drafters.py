"""τ of the SmolLM2 drafters on held-out prompts, next to plain decoding (greedy identity checked),
and their speed against plain decoding measured side by side.

    python benchmarks/smollm2_drafters.py --target smollm2-135m --k 4 --demo \
        --method eagle3=builtin_methods/eagle3/specpath_eagle3/heads/eagle3-smollm2 ...
    python benchmarks/smollm2_drafters.py ... --speed-dtype bfloat16   # + the speed ratios

Prompts, each labelled by kind: ``--code`` / ``--chat`` code snippets and chat instructions from
the *held-out* stdlib files (the split the drafters' training text never saw), ``--general``
held-out everyday chat requests, built as ``specpath_train.target_text`` builds training
prompts with another seed, and ``--demo`` the six prompts of ``specpath demo`` (3 code, 3 chat;
no drafter's training text holds them). Each method runs through
``LLM(model=target, speculative_config=...)`` with greedy sampling, stopping at EOS; its tokens
are compared with plain decoding in the same dtype (fp32 by default, where greedy decoding must
be identical). Prints one JSON line per method: τ overall and by prompt kind, acceptance by
position, identical prompts, per-prompt τ.

``--speed-dtype`` then times plain decoding and every method in that dtype over the same
prompts, interleaved (prompt by prompt, every engine in turn, ``--rounds`` times), and prints
each method's tokens/s ratio to plain decoding with the load average before and after: on a
shared machine only such side-by-side ratios mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def prompts_for(target: str, num_code: int, num_chat: int, num_general: int, seed: int,
                demo: bool) -> list[tuple[str, list[int]]]:
    """(kind, token ids) of every prompt."""
    from specpath_train.target_text import build_prompts, chat_template, load_tokenizer, render_chat

    from specpath_engine.modeling.named_models import NAMED_MODELS, hf_checkpoint_dir

    files = hf_checkpoint_dir(target) if not Path(target).exists() and target in NAMED_MODELS else target
    tok, template = load_tokenizer(files), chat_template(files)
    out: list[tuple[str, list[int]]] = []
    for kind, counts in (("code", (num_code, 0, 0)), ("chat", (0, num_chat, 0)), ("general", (0, 0, num_general))):
        if any(counts):
            ids = build_prompts(tok, template, split="heldout", num_code=counts[0], num_chat=counts[1],
                                num_general=counts[2], seed=seed, max_prompt_tokens=200)
            out += [(kind, p) for p in ids]
    if demo:
        from specpath_engine.cli_run import REAL_DEMO_PROMPTS

        for kind, prompt in REAL_DEMO_PROMPTS:
            text = render_chat(template, prompt) if kind == "chat" else prompt
            out.append((f"demo-{kind}", tok.encode(text).ids))
    return out


QUANTIZATION: str | None = None
"""``--quantization``: the target's weights for every engine (None: as the dtype has them)."""

IGNORE_EOS = False
"""``--ignore-eos``: every response runs to ``--max-tokens``, past EOS (as fixed-length benchmarks do)."""


def make_llm(target: str, spec: dict | None, *, dtype: str, threads: int):
    """An engine for ``spec``; a spec's ``"_draft_floors": false`` turns the drafter's
    confidence floors off (``ModelRunner.draft_floors``) for a side-by-side measurement."""
    from specpath_engine.llm import LLM, SamplingParams

    spec = dict(spec) if spec is not None else None
    floors = spec.pop("_draft_floors", True) if spec is not None else True
    llm = LLM(target, spec, dtype=dtype, max_model_len=1024, max_num_seqs=1, num_threads=threads,
              quantization=QUANTIZATION)
    llm.engine.runner.draft_floors = bool(floors)
    llm.generate([[1, 2, 3, 4, 5, 6, 7, 8]], SamplingParams(max_tokens=4))  # warm-up
    return llm


def run(target: str, spec: dict | None, prompts: list[list[int]], *, max_tokens: int, dtype: str, threads: int):
    from specpath_engine.llm import SamplingParams

    llm = make_llm(target, spec, dtype=dtype, threads=threads)
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=IGNORE_EOS)
    outs, start = [], time.perf_counter()
    for p in prompts:  # batch 1: the serving case speculation is for
        outs.append(llm.generate([p], params)[0])
    return outs, time.perf_counter() - start


def method_spec(item: str, k: int) -> tuple[str, dict]:
    name, _, value = item.partition("=")
    spec = json.loads(value[1:]) if value.startswith("@") else {"method": name, "model": value}
    if "@" not in item or k:  # a JSON spec under --k 0 keeps its own K (a shipped tree: none)
        spec.setdefault("num_speculative_tokens", k)
    return name, spec


def tau_report(name: str, k: int, outs, base, kinds: list[str]) -> dict:
    def tau(sel):
        drafts = sum(outs[i].metrics.num_drafts for i in sel)
        return round(1 + sum(outs[i].metrics.num_accepted_tokens for i in sel) / max(drafts, 1), 3)

    k = k or max((len(o.metrics.drafted_by_position) for o in outs), default=0)  # --k 0: the spec's own K
    by_pos_d = [sum(o.metrics.drafted_by_position[i] for o in outs if len(o.metrics.drafted_by_position) > i)
                for i in range(k)]
    by_pos_a = [sum(o.metrics.accepted_by_position[i] for o in outs if len(o.metrics.accepted_by_position) > i)
                for i in range(k)]
    every = range(len(outs))
    return {
        "method": name, "k": k, "tau": tau(every),
        "tau_by_kind": {kind: tau([i for i in every if kinds[i] == kind]) for kind in dict.fromkeys(kinds)},
        "acceptance_by_position": [round(a / max(d, 1), 3) for a, d in zip(by_pos_a, by_pos_d)],
        "identical": sum(list(o.token_ids) == list(b) for o, b in zip(outs, base)), "prompts": len(outs),
        "per_prompt_tau": [f"{kinds[i]}:{outs[i].metrics.mean_acceptance_length:.2f}" for i in every],
    }


def speed(target: str, specs: list[tuple[str, dict | None]], prompts: list[list[int]], *, max_tokens: int,
          dtype: str, threads: int, rounds: int) -> None:
    """Interleaved timing of every engine over the same prompts; prints the ratios. Each round
    starts with every drafter's memory of finished responses dropped: suffix decoding's global
    tree would otherwise draft round one's answers in round two (1.89x against 1.41x for EAGLE-3
    with suffix beside it, on two rounds of these prompts)."""
    from specpath_engine.harness import forget_responses
    from specpath_engine.llm import SamplingParams

    engines = [(name, make_llm(target, spec, dtype=dtype, threads=threads)) for name, spec in specs]
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=IGNORE_EOS)
    secs = {name: [0.0] * len(prompts) for name, _ in engines}
    toks = {name: [0] * len(prompts) for name, _ in engines}
    load_before = os.getloadavg()
    for _ in range(rounds):
        forget_responses(llm for _, llm in engines)
        for i, p in enumerate(prompts):
            for name, llm in engines:
                start = time.perf_counter()
                out = llm.generate([p], params)[0]
                secs[name][i] += time.perf_counter() - start
                toks[name][i] += len(out.token_ids)
    load_after = os.getloadavg()
    base = sum(toks["baseline"]) / sum(secs["baseline"])
    for name, _ in engines:
        rate = sum(toks[name]) / sum(secs[name])
        per_prompt = [round((t / s) / (bt / bs), 2) for t, s, bt, bs in
                      zip(toks[name], secs[name], toks["baseline"], secs["baseline"])]
        print(json.dumps({"speed": name, "dtype": dtype, "tok_s": round(rate, 2), "vs_baseline": round(rate / base, 3),
                          "per_prompt_vs_baseline": per_prompt, "rounds": rounds,
                          "load_before": [round(x, 2) for x in load_before],
                          "load_after": [round(x, 2) for x in load_after]}), flush=True)


def baseline_tokens(args: argparse.Namespace, prompts: list[list[int]], kinds: list[str]) -> list[list[int]]:
    """Plain decoding's tokens of every prompt, from ``--baseline-cache`` when it holds this
    exact run (target, prompts, max tokens, dtype), else decoded (and stored there)."""
    from pathlib import Path

    key = {"target": args.target, "prompts": prompts, "max_tokens": args.max_tokens, "dtype": args.dtype,
           **({"ignore_eos": True} if IGNORE_EOS else {})}
    cache = Path(args.baseline_cache) if args.baseline_cache else None
    if cache is not None and cache.is_file():
        stored = json.loads(cache.read_text())
        if stored["key"] == key:
            print(json.dumps({"method": "baseline", "from": str(cache), "prompts": kinds}), flush=True)
            return stored["tokens"]
    outs, secs = run(args.target, None, prompts, max_tokens=args.max_tokens, dtype=args.dtype, threads=args.threads)
    tokens = [list(o.token_ids) for o in outs]
    n = sum(len(t) for t in tokens)
    print(json.dumps({"method": "baseline", "tokens": n, "tok_s": round(n / secs, 2), "prompts": kinds}), flush=True)
    if cache is not None:
        cache.write_text(json.dumps({"key": key, "tokens": tokens}))
    return tokens


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True)
    p.add_argument("--method", action="append", default=[], metavar="NAME=DRAFT_DIR|NAME=@JSON",
                   help="a method and its drafter (repeat); NAME=@{json} for a whole speculative_config")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--code", type=int, default=3)
    p.add_argument("--chat", type=int, default=3)
    p.add_argument("--general", type=int, default=0, help="held-out everyday chat requests")
    p.add_argument("--demo", action="store_true", help="also the six prompts of `specpath demo`")
    p.add_argument("--seed", type=int, default=99)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--speed-dtype", default=None, help="also time every method against plain decoding in this dtype")
    p.add_argument("--rounds", type=int, default=1, help="rounds of the interleaved timing")
    p.add_argument("--no-tau", action="store_true", help="only the timing")
    p.add_argument("--baseline-cache", default=None, help="a JSON file keeping plain decoding's tokens between runs")
    p.add_argument("--quantization", default=None, help="the target's weights (e.g. int4) for every engine")
    p.add_argument("--ignore-eos", action="store_true",
                   help="every response runs to --max-tokens, past EOS (as fixed-length benchmarks measure)")
    args = p.parse_args(argv)
    global QUANTIZATION, IGNORE_EOS
    QUANTIZATION, IGNORE_EOS = args.quantization, args.ignore_eos
    labelled = prompts_for(args.target, args.code, args.chat, args.general, args.seed, args.demo)
    kinds, prompts = [k for k, _ in labelled], [p for _, p in labelled]
    specs = [method_spec(item, args.k) for item in args.method]
    if not args.no_tau:
        base = baseline_tokens(args, prompts, kinds)
        for name, spec in specs:
            outs, _ = run(args.target, spec, prompts, max_tokens=args.max_tokens, dtype=args.dtype,
                          threads=args.threads)
            print(json.dumps(tau_report(name, args.k, outs, base, kinds)), flush=True)
    if args.speed_dtype:
        speed(args.target, [("baseline", None), *specs], prompts, max_tokens=args.max_tokens, dtype=args.speed_dtype,
              threads=args.threads, rounds=args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
