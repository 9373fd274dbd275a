"""EAGLE, EAGLE-3 and P-EAGLE against plain decoding, next to ngram and draft_model, in one run.

Workload and table: the benchmark harness (:mod:`specpath_engine.harness`): the demo prompts,
batch 1, greedy, a warm-up per method, ``--repeats`` interleaved rounds after a quiet-machine
gate; τ (tokens per target step, bonus included), acceptance by draft position, tokens/s and the
speedup over the baseline of the same round (medians over rounds), per-prompt tokens/s, and
whether the output is identical to the baseline.

    python3 benchmarks/eagle.py [--k 4] [--max-tokens 128] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse


def main() -> int:
    from specpath_engine import harness
    from specpath.demo import demo_for
    from specpath_draft_model.config import StandaloneARSpeculatorConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=4)
    harness.add_benchmark_arguments(p)
    args = p.parse_args()
    k = args.k
    demo = demo_for("draft_model", StandaloneARSpeculatorConfig)
    draft = None if demo.config is None else {**demo.config, "method": "draft_model"}
    runs = [
        ("ngram", {"method": "ngram", "num_speculative_tokens": k}),
        *([("draft_model", {**draft, "num_speculative_tokens": k})] if draft else []),
        ("eagle", {"method": "eagle", "num_speculative_tokens": k}),
        ("eagle3", {"method": "eagle3", "num_speculative_tokens": k}),
        ("p-eagle", {"method": "eagle3", "num_speculative_tokens": k, "parallel_drafting": True}),
    ]
    harness.run_benchmark(args, runs, note=f"K={k}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
