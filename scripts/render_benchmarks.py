#!/usr/bin/env python3
"""Render docs/benchmarks.md from the `specpath bench` results kept in docs/results/*.json.

    specpath bench --model smollm2-135m ... --out RUN && cp RUN/result.json docs/results/NAME.json
    python scripts/render_benchmarks.py            # rewrites docs/benchmarks.md
    python scripts/render_benchmarks.py --check    # exit 1 if the page is stale (the docs test runs this)

Each result file becomes one section, in file-name order, with the command line recorded in it.
The page is never edited by hand: what it says is what the JSON says.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"

HEADER = """# Benchmarks

Current results, rendered by `scripts/render_benchmarks.py` from the `specpath bench` JSON files
in `docs/results/` (do not edit this page by hand; re-run the benchmark and the script). Each
section names its machine, load, model and settings; every speedup is measured side by side in
one process against the baseline of the same round. Earlier measurements, with the reasoning
that led to the current code, are on [Benchmark history](benchmarks-history.md).

Run the same on your own model and prompts: `specpath bench --model MODEL --workload FILE.jsonl`
(see [specpath bench](bench.md)).
"""


def render(results: Path = RESULTS) -> str:
    sys.path.insert(0, str(ROOT / "engine"))
    from specpath_engine.bench import report
    from specpath_engine.bench.workloads import BUILTIN

    parts = [HEADER]
    files = sorted(results.glob("*.json"))
    if not files:
        parts.append("\nNo results yet.\n")
    for path in files:
        result = json.loads(path.read_text(encoding="utf-8"))
        title = result.get("title") or path.stem
        parts.append(f"\n## {title}\n")
        if result.get("command"):
            parts.append(f"\n```\n{result['command']}\n```\n")
        if result.get("notes"):
            parts.append(f"\n{result['notes']}\n")
        items = {name: w.items for name, w in BUILTIN.items()}
        parts.append("\n" + report.markdown(result, items).replace("\n### ", "\n### ").rstrip() + "\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md is not what the JSON renders")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print("docs/benchmarks.md is stale: run python scripts/render_benchmarks.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
