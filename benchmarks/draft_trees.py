"""Chains against dynamic draft trees (``draft_tree_topk``) for the hidden-state drafters, side by side.

Each ``--configs`` entry ``method:K:k`` (k = 1: the chain) runs SmolLM2 bf16 with its shipped
drafter on the demo's six prompts (EOS ends a reply unless ``--ignore-eos``), interleaved prompt
by prompt with plain decoding, for ``--rounds`` rounds after the quiet-machine gate;
``--model-free ngram`` adds each entry again with n-gram drafting beside it. Prints per engine
tok/s, the ratio to plain decoding, τ, ms per token, what one engine step costs split into the
target's forward, the drafter's proposal, verification and the rest (wall-clock timers around
those calls, averaged over every engine step), greedy identity with plain decoding and tok/s per prompt. Not part of the tests.

    python benchmarks/draft_trees.py --configs eagle3:4:1,eagle3:5:2,eagle3:7:2,mtp:4:1,mtp:5:2
"""

from __future__ import annotations

import argparse
import collections
import functools
import time

from specpath_engine.harness import add_chat_benchmark_arguments

NGRAM = {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 5}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="eagle3:4:1,eagle3:5:2,eagle3:6:2,eagle3:7:2,mtp:4:1,mtp:5:2")
    ap.add_argument("--model-free", default=None, choices=["ngram"])
    ap.add_argument("--ignore-eos", action="store_true")
    add_chat_benchmark_arguments(ap, rounds=2)
    args = ap.parse_args()

    import torch

    from specpath_engine import model, runner
    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.harness import chat_row, machine_load, time_chat_prompts, wait_for_quiet, warm_llms
    from specpath_engine.llm import LLM, SamplingParams

    torch.set_num_threads(args.threads)
    configs: dict[str, dict | None] = {"plain": None}
    for entry in args.configs.split(","):
        method, k, topk = entry.split(":")
        config = {"method": method, "num_speculative_tokens": int(k)}
        name = f"{method} K={k}" + (f" tree k={topk}" if int(topk) > 1 else " chain")
        if int(topk) > 1:
            config["draft_tree_topk"] = int(topk)
        configs[name] = config
        if args.model_free:
            configs[f"{name} + {args.model_free}"] = {**config, "model_free_drafter": NGRAM}
    engines = warm_llms(configs, lambda c: LLM("smollm2-135m", c, dtype="bfloat16", num_threads=args.threads))

    # wall-clock timers around an engine step's parts, per engine (the runner knows its engine)
    owner = {id(e.engine.runner): name for name, e in engines.items()}
    spent: dict[tuple[str, str], float] = collections.defaultdict(float)

    def timed(part, function, runner_of):
        @functools.wraps(function)
        def wrapper(*a, **kw):
            start = time.perf_counter()
            try:
                return function(*a, **kw)
            finally:
                name = owner.get(id(runner_of(a)), "?")
                spent[name, part] += time.perf_counter() - start
                spent[name, part + " calls"] += 1
        return wrapper

    current: list = [None]
    original_execute = runner.ModelRunner.execute

    def execute(self, *a, **kw):
        current[0] = self
        return original_execute(self, *a, **kw)

    patches = {(runner.ModelRunner, "execute"): timed("step", execute, lambda a: a[0]),
               (runner.ModelRunner, "_propose"): timed("propose", runner.ModelRunner._propose, lambda a: a[0]),
               (runner.ModelRunner, "_verify"): timed("verify", runner.ModelRunner._verify, lambda a: a[0]),
               (model.LlamaModel, "forward"): timed("forward", model.LlamaModel.forward, lambda a: current[0])}
    saved = {key: getattr(*key) for key in patches}
    for (cls, attr), wrapper in patches.items():
        setattr(cls, attr, wrapper)
    try:
        load = wait_for_quiet(args.max_load)
        params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=args.ignore_eos)
        rounds = [time_chat_prompts(engines, REAL_DEMO_PROMPTS, params) for _ in range(args.rounds)]
    finally:
        for (cls, attr), function in saved.items():
            setattr(cls, attr, function)

    for name in configs:
        row = chat_row(rounds, name)
        steps = spent[name, "step calls"]
        step = spent[name, "step"] / steps * 1e3
        parts = {part: spent[name, part] / steps * 1e3 for part in ("forward", "propose", "verify")}
        rest = step - sum(parts.values())
        print(row.line(name, middle=f"{1e3 / row.rate:5.2f} ms/token  step {step:5.2f} ms = forward "
                                    f"{parts['forward']:5.2f} + propose {parts['propose']:4.2f} + verify "
                                    f"{parts['verify']:4.2f} + rest {rest:4.2f}  "))
    print(f"\nSmolLM2 bf16, {args.threads} threads, {len(REAL_DEMO_PROMPTS)} prompts x up to {args.max_tokens} tokens "
          f"({'EOS ignored' if args.ignore_eos else 'EOS ends a reply'}), {args.rounds} round(s); a step's parts are "
          f"averaged over every engine step (the prefill steps too); load average per core {load:.2f} before, {machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
