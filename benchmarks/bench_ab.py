"""Before/after of a change to a drafter: ``specpath bench`` from two source trees, alternately.

A change that touches the engine's native kernels cannot be compared with its base in one
process (the kernels are one library per process), so each run is its own process, and the trees
take turns (A, B, A, B, ...) so a machine that gets busier hurts both. Each run is the bench the
arguments after ``--`` describe, with every drafting ``propose`` timed by wall clock. Prints per
tree and round the bench's rows (speedup over that run's own baseline, τ) and the median
propose per method, with the load average; the means over rounds at the end. Not part of the
tests.

    python benchmarks/bench_ab.py --before ../main --after . --rounds 2 -- \\
        --model smollm2-135m --methods dspark,draft_model --workload code --workload chat \\
        --batch 1 --temperature 0 0.8 --max-tokens 64
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run_one(bench_args: list[str], out: str) -> None:
    """In this process: the bench with every propose timed; the summary as JSON to ``out``."""
    import time

    import specpath_engine.bench.measure as measure
    from specpath_engine import cli_bench

    parser = argparse.ArgumentParser()
    cli_bench.add_subcommands(parser.add_subparsers())
    args = parser.parse_args(["bench", *bench_args, "--wait", "0", "--repeats", "1"])
    times: dict[str, list[tuple[float, int]]] = {}
    build = measure.build_engines

    def timed_build(*a, **k):
        engines, skipped = build(*a, **k)
        for label, config, llm in engines:
            if config is None:
                continue
            speculator, samples = llm.speculator, times.setdefault(label, [])
            inner = speculator.propose

            def propose(batch, inner=inner, samples=samples):
                start = time.perf_counter()
                proposal = inner(batch)
                budget = max(r.max_draft_tokens for r in batch.requests)
                if budget > 0:
                    samples.append((time.perf_counter() - start, budget))
                return proposal

            speculator.propose = propose
        return engines, skipped

    measure.build_engines = timed_build
    load = os.getloadavg()[0]
    result = cli_bench.run_bench(args, progress=False)
    summary = {
        "load": [load, os.getloadavg()[0]], "threads": result["settings"]["threads"],
        "rows": [{k: r[k] for k in ("workload", "temperature", "method", "speedup", "mean_acceptance_length",
                                    "greedy_identical")} for r in result["rows"] if r["method"] != "baseline"],
        "propose_ms": {m: {"median": statistics.median(t for t, _ in v) * 1e3, "calls": len(v),
                           "k4": statistics.median([t for t, k in v if k == 4] or [0.0]) * 1e3}
                       for m, v in times.items() if v},
    }
    Path(out).write_text(json.dumps(summary))


def tree_env(tree: Path) -> dict[str, str]:
    """The environment that imports every package from ``tree`` (its core, engine, train and plugins)."""
    paths = [tree / "core", tree / "engine", tree / "train", tree / "plugin_template" / "src",
             *sorted(p for p in (tree / "builtin_methods").iterdir() if p.is_dir())]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: one run, its summary to this file
    ap.add_argument("bench", nargs=argparse.REMAINDER, help="after --: the specpath bench arguments")
    args = ap.parse_args()
    bench = [a for a in args.bench if a != "--"]
    if args.one:
        run_one(bench, args.one)
        return 0
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, tree in trees.items():
                out = Path(tmp) / f"{name}-{r}.json"
                subprocess.run([sys.executable, str(Path(__file__).resolve()), "--before", str(trees["before"]),
                                "--after", str(trees["after"]), "--one", str(out), "--", *bench],
                               env=tree_env(tree), check=True, stdout=subprocess.DEVNULL)
                summary = json.loads(out.read_text())
                runs[name].append(summary)
                print(f"round {r + 1} {name} ({tree}), load {summary['load'][0]:.2f} -> {summary['load'][1]:.2f}, "
                      f"{summary['threads']} thread(s)")
                for row in summary["rows"]:
                    print(f"  {row['workload']:5s} T={row['temperature']:<4g} {row['method']:12s} "
                          f"{row['speedup']:.3f}x  τ {row['mean_acceptance_length']:.2f}"
                          f"{'' if row['greedy_identical'] is not False else '  NOT greedy-identical'}")
                for method, p in summary["propose_ms"].items():
                    print(f"  propose {method}: median {p['median']:.2f} ms ({p['calls']} calls), at K=4 {p['k4']:.2f}")
    print("means over rounds:")
    for name, summaries in runs.items():
        methods = sorted({row["method"] for s in summaries for row in s["rows"]})
        for method in methods:
            rows = [row for s in summaries for row in s["rows"] if row["method"] == method]
            speedups = [row["speedup"] for row in rows]
            below = sum(x < 1.0 for x in speedups)
            propose = statistics.mean(s["propose_ms"][method]["median"] for s in summaries if method in s["propose_ms"])
            print(f"  {name:6s} {method:12s} mean speedup {statistics.mean(speedups):.3f}, worst {min(speedups):.2f}, "
                  f"{below} of {len(speedups)} rows below 1.00x; τ {statistics.mean(r['mean_acceptance_length'] for r in rows):.2f}; "
                  f"propose median {propose:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
