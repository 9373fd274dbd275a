"""One- and three-module MTP beside every other installed method, on the demo prompts.

    python3 builtin_methods/mtp/benchmarks/mtp_demo.py [--max-tokens 128] [--repeats 3] [--only-mtp] [--json F]

The benchmark harness (:mod:`specpath_engine.harness`: embedded default target, batch 1, greedy,
a warm-up per configuration, interleaved rounds after a quiet-machine gate, one torch thread),
with several MTP configurations instead of one: the shipped ``mtp1`` checkpoint at K = 1..4 and
``mtp3`` at K = 3 and 6. Other methods run with their own demo (their plugin's ``specpath_demo``
hook). Prints τ, acceptance by position, tokens/s, the speedup over the baseline of the same round
(medians), per-prompt tokens/s, and whether the tokens equal plain greedy decoding's.
"""

from __future__ import annotations

import argparse


def mtp_configs(mtp1: str | None = None, mtp3: str | None = None) -> list[tuple[str, dict]]:
    from specpath_mtp.config import MTP1, MTP3

    mtp1, mtp3 = mtp1 or MTP1, mtp3 or MTP3
    runs = [(f"mtp1 K={k}", {"method": "mtp", "model": str(mtp1), "num_speculative_tokens": k}) for k in (1, 2, 3, 4)]
    runs += [(f"mtp3 K={k}", {"method": "mtp", "model": str(mtp3), "num_speculative_tokens": k}) for k in (3, 6)]
    return runs


def main() -> int:
    from specpath_engine import harness
    from specpath_engine.cli_run import DEFAULT_DEMO_K, demo_configs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only-mtp", action="store_true", help="baseline and the MTP configurations only")
    p.add_argument("--mtp1", help="one-module checkpoint (default: the shipped one)")
    p.add_argument("--mtp3", help="three-module checkpoint (default: the shipped one)")
    harness.add_benchmark_arguments(p)
    args = p.parse_args()
    others = [] if args.only_mtp else [(n, c) for n, c in demo_configs(DEFAULT_DEMO_K)[0] if n != "mtp"]
    harness.run_benchmark(args, others + mtp_configs(args.mtp1, args.mtp3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
