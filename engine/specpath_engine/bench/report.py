"""What ``specpath bench`` prints and writes: per-setting tables, a markdown page, plots, an HTML report.

Plots (matplotlib, the ``bench`` extra, drawn off-screen): acceptance by draft position per method,
and speedup per workload per method; each as PNG and SVG. The HTML report is one self-contained
file: the tables and the SVGs inline.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _rates(rates: Sequence[float]) -> str:
    return " ".join(f"{r:.2f}" for r in rates) if rates else "-"


def _identity(row: dict) -> str:
    if row["greedy_identical"] is None:
        return "n/a (sampled)"
    if row["greedy_identical"]:
        return "yes"
    return f"NO ({row['num_requests'] - row['identical_requests']}/{row['num_requests']} differ)"


def _speed(row: dict) -> str:
    spread = row["speedups"]
    cell = f"{row['speedup']:.2f}x"
    if len(spread) > 1:
        cell += f" ({min(spread):.2f}-{max(spread):.2f})"
    return cell + ("" if row["plausible"] else " !")


COLUMNS = (
    ("method", lambda r: r["method"]),
    ("tok/s", lambda r: f"{r['tokens_per_s']:.1f}"),
    ("speedup (spread)", _speed),
    ("τ", lambda r: f"{r['mean_acceptance_length']:.2f}"),
    ("tokens/target pass", lambda r: f"{r['tokens_per_target_pass']:.2f}"),
    ("acceptance by position", lambda r: _rates(r["acceptance_rate_by_position"])),
    ("greedy identical", _identity),
)


def groups(rows: Sequence[dict]) -> dict[tuple[str, int, float], list[dict]]:
    """Rows by (workload, batch size, temperature), each group sorted fastest first (baseline kept first)."""
    out: dict[tuple[str, int, float], list[dict]] = {}
    for r in rows:
        out.setdefault((r["workload"], r["batch_size"], r["temperature"]), []).append(r)
    for key, rs in out.items():
        base = [r for r in rs if r["config"] is None]
        rest = sorted((r for r in rs if r["config"] is not None), key=lambda r: -r["speedup"])
        out[key] = base + rest
    return out


def title(key: tuple[str, int, float]) -> str:
    workload, batch, temperature = key
    return f"{workload}, batch {batch}, " + ("greedy" if temperature == 0 else f"T={temperature:g}")


def text_table(rows: Sequence[dict]) -> str:
    cells = [[c for c, _ in COLUMNS]] + [[f(r) for _, f in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: Sequence[dict]) -> str:
    lines = ["| " + " | ".join(c for c, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(f(r) for _, f in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def fastest(rows: Sequence[dict]) -> str:
    """One sentence: the fastest method of a group and whether it pays."""
    best = max(rows, key=lambda r: r["tokens_per_s"])
    if best["config"] is None:
        return "fastest: plain decoding (no method pays here)"
    return f"fastest: {best['method']} ({best['speedup']:.2f}x)"


NOTES = ("speedup: tokens/s over the baseline of the same round, median of the rounds (spread: every round's); "
         "`!`: above what its target passes saved allow (the load changed between engines: re-run). "
         "τ: tokens per verification step of drafted steps (bonus included); tokens/target pass: over the whole "
         "reply, the target passes a method saves (plain decoding: 1).")


def per_prompt_markdown(rows: Sequence[dict], items: Sequence[Any]) -> str:
    from specpath_engine.bench.workloads import describe

    methods = [r for r in rows if r["config"] is not None]
    if not methods:
        return ""
    lines = ["| request | " + " | ".join(r["method"] for r in methods) + " |", "|" + "---|" * (len(methods) + 1)]
    for i, item in enumerate(items[: len(methods[0]["per_batch_speedup"])]):
        label = describe(item).replace("|", "\\|")
        lines.append(f"| {label} | " + " | ".join(f"{r['per_batch_speedup'][i]:.2f}x" for r in methods) + " |")
    return "\n".join(lines)


def markdown(result: dict, items: dict[str, Sequence[Any]] | None = None) -> str:
    """The whole result as a markdown page section (what docs/benchmarks.md is rendered from)."""
    m = result["machine"]
    s = result["settings"]
    weights = f", {s['quantization']} weights" if s.get("quantization") else ""
    out = [f"Model {s['model']} ({s['dtype']}{weights}), {s['max_tokens']} new tokens a request"
           f"{' (EOS ignored)' if s['ignore_eos'] else ''}, {s['repeats']} "
           f"{'rounds, the engines interleaved step by step' if s.get('interleave') == 'step' else 'interleaved rounds'}; "
           f"{m['cpu']}, {m['cores']} cores, {s['threads']} thread{'s' if s['threads'] != 1 else ''}; load per core at the start "
           f"{m['load_at_start']:.2f}; {result['date']}.", "", NOTES]
    for key, rows in groups(result["rows"]).items():
        out += ["", f"### {title(key)}", "", markdown_table(rows), "", fastest(rows) + "."]
        if key[1] == 1 and items and key[0] in items:
            pp = per_prompt_markdown(rows, items[key[0]])
            if pp:
                out += ["", "Per request (speedup, median of rounds):", "", pp]
    for name, reason in result.get("skipped", []):
        out.append(f"\nskipped {name}: {reason}")
    return "\n".join(out) + "\n"


def plots(result: dict, out_dir: Path) -> list[Path]:
    """Acceptance by position per method, and speedup per workload per method (PNG and SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r["config"] is not None]
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method and r["acceptance_rate_by_position"]]
        if not mine:
            continue
        depth = max(len(r["acceptance_rate_by_position"]) for r in mine)
        mean = [sum(r["acceptance_rate_by_position"][i] for r in mine if i < len(r["acceptance_rate_by_position"]))
                / max(1, sum(i < len(r["acceptance_rate_by_position"]) for r in mine)) for i in range(depth)]
        ax.plot(range(1, depth + 1), mean, marker="o", label=method)
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate (mean over settings)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize="small")
    ax.set_title("Acceptance by position")
    written += _save(fig, out_dir / "acceptance_by_position")

    keys = list(dict.fromkeys((r["workload"], r["batch_size"], r["temperature"]) for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6.4, 1.2 * len(keys) + 2), 4.0))
    width = 0.8 / max(1, len(methods))
    for j, method in enumerate(methods):
        values = [next((r["speedup"] for r in rows if r["method"] == method
                        and (r["workload"], r["batch_size"], r["temperature"]) == k), 0.0) for k in keys]
        ax.bar([i + j * width for i in range(len(keys))], values, width, label=method)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(keys))])
    ax.set_xticklabels([title(k) for k in keys], rotation=20, ha="right", fontsize="small")
    ax.set_ylabel("speedup over plain decoding")
    ax.legend(fontsize="small")
    ax.set_title("Speedup per workload")
    fig.tight_layout()
    written += _save(fig, out_dir / "speedup_per_workload")
    return written


def _save(fig: Any, stem: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for p in paths:
        fig.savefig(p, dpi=120)
    plt.close(fig)
    return paths


def html_report(result: dict, svgs: Sequence[Path]) -> str:
    """One self-contained page: settings, every group's table, the plots inline."""
    parts = ["<!doctype html><meta charset='utf-8'><title>specpath bench</title>",
             "<style>body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style>",
             "<h1>specpath bench</h1>", f"<p>{html.escape(markdown(result).splitlines()[0])}</p>",
             f"<p>{html.escape(NOTES)}</p>"]
    for key, rows in groups(result["rows"]).items():
        parts.append(f"<h2>{html.escape(title(key))}</h2><table><tr>"
                     + "".join(f"<th>{html.escape(c)}</th>" for c, _ in COLUMNS) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{html.escape(f(r))}</td>" for _, f in COLUMNS) + "</tr>" for r in rows]
        parts.append(f"</table><p>{html.escape(fastest(rows))}</p>")
    for svg in svgs:
        text = svg.read_text(encoding="utf-8")
        parts.append(text[text.find("<svg"):])
    return "\n".join(parts)


def write_outputs(result: dict, out_dir: Path) -> list[Path]:
    """result.json, the plots, report.html and report.md into ``out_dir``."""
    import json

    from specpath_engine.bench.workloads import load_workload

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "result.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    written = [out_dir / "result.json"]
    figures = plots(result, out_dir)
    written += figures
    items = {}
    for spec in result["settings"]["workloads"]:
        try:
            w = load_workload(spec)
            items[w.name] = w.items
        except Exception:  # noqa: BLE001 - a file moved since the run: no per-request labels
            pass
    (out_dir / "report.md").write_text(markdown(result, items), encoding="utf-8")
    (out_dir / "report.html").write_text(html_report(result, [p for p in figures if p.suffix == ".svg"]),
                                         encoding="utf-8")
    return written + [out_dir / "report.md", out_dir / "report.html"]


