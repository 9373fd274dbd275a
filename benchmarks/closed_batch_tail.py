"""Where a closed batch's time goes: the steps at the full batch, and the tail after its first
request finished.

A batch whose requests arrive together ends with its last request. Drafting lets requests that
accept well finish early, and what remains runs at a smaller batch for steps that cost nearly a
full one (decode is memory-bound): a loss that no step's tokens per second shows. This script
builds plain decoding and one method (``--method``, its shipped SmolLM2 drafter) on SmolLM2-135M
in one process, runs each batch of ``--workload`` on both in interleaved rounds (greedy,
``--tokens`` per request, EOS ignored), and prints per engine the wall time, the steps a
generate took, how many ran at the full batch and how many after (the prefill step counts with
them), and the speed-up against plain decoding per round. Not part of the tests.

    python benchmarks/closed_batch_tail.py --method eagle3 --workload chat --batch 8 --rounds 3

Name the CPU and the load (printed) with any number taken from it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="eagle3")
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from specpath_engine import cli_bench
    from specpath_engine.bench.measure import Setting, run_batch
    from specpath_engine.bench.workloads import batches, load_workload
    from specpath_engine.cli_bench import _runs
    from specpath_engine.cli_run import _engine_kwargs, demo_target
    from specpath_engine.llm import LLM, SamplingParams

    parser = argparse.ArgumentParser()
    cli_bench.add_subcommands(parser.add_subparsers())
    bench = parser.parse_args(["bench", "--model", "smollm2-135m", "--methods", args.method,
                               "--threads", str(args.threads)])
    model, _ = demo_target(bench.model)
    runs, skipped = _runs(bench, model, True)
    if skipped:
        raise SystemExit(f"not built: {skipped}")
    steps: dict[str, list[tuple[int, float]]] = defaultdict(list)
    engines = {}
    for label, config in runs:
        llm = engines[label] = LLM(model, None if config is None else dict(config), **_engine_kwargs(bench))
        llm.generate(["hello"], SamplingParams(max_tokens=8, ignore_eos=True))
        engine, inner = llm.engine, llm.engine.step

        def step(engine=engine, inner=inner, label=label):
            running = len(engine.scheduler.running)
            start = time.perf_counter()
            out = inner()
            steps[label].append((running, time.perf_counter() - start))
            return out

        engine.step = step
    workload = load_workload(args.workload)
    setting = Setting(workload=workload, batch_size=args.batch, temperature=0.0, max_tokens=args.tokens)
    groups = batches(workload, args.batch)
    load = os.getloadavg()[0]
    # per engine and generate: (seconds, steps, full-batch steps, their seconds, tail steps, their seconds)
    results: dict[str, list[tuple[float, int, int, float, int, float]]] = defaultdict(list)
    for _ in range(args.rounds):
        for label, llm in engines.items():
            for items in groups:
                steps[label].clear()
                _, seconds = run_batch(llm, items, setting)
                full = [s for n, s in steps[label] if n == args.batch]
                tail = [s for n, s in steps[label] if n < args.batch]
                results[label].append((seconds, len(steps[label]), len(full), sum(full), len(tail), sum(tail)))
    print(f"load {load:.2f} -> {os.getloadavg()[0]:.2f}; {args.method} {args.workload} batch {args.batch}, "
          f"{args.rounds} rounds of {len(groups)} batch(es)")
    per_round = len(groups)
    base = results["baseline"]
    for label, rows in results.items():
        total = sum(r[0] for r in rows)
        rounds = [sum(b[0] for b in base[i:i + per_round]) / sum(r[0] for r in rows[i:i + per_round])
                  for i in range(0, len(rows), per_round)]
        print(f"{label:10s} {total:7.3f} s | steps {statistics.mean(r[1] for r in rows):5.1f} | "
              f"full batch {statistics.mean(r[2] for r in rows):5.1f} steps, {sum(r[3] for r in rows):6.3f} s | "
              f"after {statistics.mean(r[4] for r in rows):5.1f} steps, {sum(r[5] for r in rows):6.3f} s | "
              f"speedup {sum(b[0] for b in base) / total:.3f} (rounds {' '.join(f'{x:.3f}' for x in rounds)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
