#!/usr/bin/env python3
"""Measure the embedded default model and print the Markdown used in docs/default-model.md.

    python3 scripts/default_model_report.py [--model DIR] [--svg docs/img/default-model-curve.svg]

Prints: the training curve (from ``train_log.jsonl`` next to the weights), held-out bits/byte and
top-1 next-byte accuracy by position band (inside and beyond the 512-byte training window),
output-degeneracy statistics and greedy completions of fixed Python prompts. The optional SVG is
drawn by hand so the report needs nothing beyond torch.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from specpath_engine import corpus
from specpath_engine.model import LlamaModel, default_model_path
from specpath_engine.tokenizer import load_tokenizer

PROMPTS = (
    "def main():\n",
    "import os\nimport sys\n\n\ndef read_config(path):\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "    for i in range(len(data)):\n",
    'def is_prime(n):\n    """Return True if n is prime."""\n',
)


def heldout_prompts(files=("gzip.py", "multiprocessing/util.py"), size=300) -> tuple[str, ...]:
    """Real held-out code: ``size`` bytes from the middle of each file, cut at line boundaries."""
    docs = dict(corpus.read_heldout_asset())
    prompts = []
    for name in files:
        text = docs[name].decode("utf-8")
        start = text.index("\n", len(text) // 2) + 1
        prompts.append(text[start : text.rindex("\n", start, start + size) + 1])
    return tuple(prompts)


@torch.no_grad()
def greedy(model: LlamaModel, ids: list[int], max_new: int, eos: int | None) -> list[int]:
    """Plain greedy decoding by full recomputation (the reference, no cache)."""
    out = list(ids)
    for _ in range(max_new):
        token = int(model.forward_batch(torch.tensor([out]))[0, -1].argmax())
        if token == eos:
            break
        out.append(token)
    return out[len(ids) :]


@torch.no_grad()
def position_bands(model: LlamaModel, stream: torch.Tensor, length: int, count: int, bands) -> list[tuple]:
    starts = torch.linspace(0, len(stream) - length - 2, count).long().tolist()
    nll = torch.zeros(length)
    hits = torch.zeros(length)
    for s in starts:
        window = stream[s : s + length + 1]
        logits = model.forward_batch(window[None, :-1])[0]
        nll += F.cross_entropy(logits, window[1:], reduction="none")
        hits += (logits.argmax(-1) == window[1:]).float()
    return [
        (lo, hi, (nll[lo:hi].sum() / (count * (hi - lo)) / math.log(2)).item(), (hits[lo:hi].mean() / count).item())
        for lo, hi in bands
    ]


def degeneracy(ids: list[int]) -> tuple[int, float]:
    """Distinct bytes and the fraction of 8-grams that already occurred earlier in the text."""
    grams = [tuple(ids[i : i + 8]) for i in range(len(ids) - 7)]
    seen, repeated = set(), 0
    for gram in grams:
        repeated += gram in seen
        seen.add(gram)
    return len(set(ids)), repeated / max(len(grams), 1)


def svg_curve(points: list[tuple[float, float]], path: Path) -> None:
    w, h, pad = 560, 300, 50
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_max, y_min, y_max = max(xs), 0.0, math.ceil(max(ys))

    def sx(x: float) -> float:
        return pad + (w - 2 * pad) * x / x_max

    def sy(y: float) -> float:
        return h - pad - (h - 2 * pad) * (y - y_min) / (y_max - y_min)

    poly = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    ticks = "".join(
        f'<text x="{pad - 8}" y="{sy(v) + 4:.1f}" text-anchor="end" font-size="11">{v:g}</text>'
        f'<line x1="{pad}" x2="{w - pad}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#ddd"/>'
        for v in range(int(y_min), int(y_max) + 1)
    )
    xticks = "".join(
        f'<text x="{sx(v):.1f}" y="{h - pad + 16}" text-anchor="middle" font-size="11">{v:g}</text>'
        for v in range(0, int(x_max) + 1, max(1, int(x_max) // 6))
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif">'
        f'<rect width="{w}" height="{h}" fill="white"/>{ticks}{xticks}'
        f'<polyline points="{poly}" fill="none" stroke="#1f77b4" stroke-width="2"/>'
        f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle" font-size="12">training bytes (millions)</text>'
        f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle" font-size="12">'
        "held-out bits/byte</text></svg>\n",
        encoding="utf-8",
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=default_model_path())
    p.add_argument("--svg", type=Path, default=None)
    p.add_argument("--max-new", type=int, default=160)
    p.add_argument("--windows", type=int, default=24)
    args = p.parse_args()
    torch.set_num_threads(2)
    model = LlamaModel.from_pretrained(args.model)
    tok = load_tokenizer(args.model)
    config = json.loads((args.model / "config.json").read_text())
    note = config.get("specpath", {})
    print(f"parameters: {model.config.num_parameters:,}; note: {json.dumps({k: v for k, v in note.items() if k != 'args'})}\n")

    log = [json.loads(line) for line in (args.model / "train_log.jsonl").read_text().splitlines()]
    evals = [e for e in log if e["kind"] == "eval"]
    print("| minutes | steps | training bytes | held-out bits/byte (sample) | train bits/byte (since last eval) |")
    print("|---|---|---|---|---|")
    for e in evals:
        train = "–" if e["train_bpb"] != e["train_bpb"] else f"{e['train_bpb']:.3f}"
        print(f"| {e['minutes']:.1f} | {e['step']} | {e['bytes'] / 1e6:.2f} M | {e['heldout_bpb']:.3f} | {train} |")
    final = [e for e in log if e["kind"] == "final"]
    if final:
        f = final[-1]
        print(f"\nfinal: {f['heldout_bpb']:.4f} bits/byte on {f['heldout_bytes']:,} held-out bytes, "
              f"{f['steps']} steps, {f['train_bytes'] / 1e6:.2f} M bytes, {f['train_minutes']} min")
    if args.svg:
        svg_curve([(e["bytes"] / 1e6, e["heldout_bpb"]) for e in evals if e["step"] > 0], args.svg)
        print(f"wrote {args.svg}")

    stream = torch.frombuffer(bytearray(corpus.join_documents(corpus.read_heldout_asset())), dtype=torch.uint8).long()
    print("\n| positions | held-out bits/byte | top-1 next-byte accuracy |")
    print("|---|---|---|")
    for lo, hi, bpb, acc in position_bands(model, stream, 1024, args.windows, [(0, 128), (128, 512), (512, 1024)]):
        print(f"| {lo}–{hi} | {bpb:.3f} | {acc:.3f} |")

    print()
    for prompt in PROMPTS + heldout_prompts():
        new = greedy(model, tok.encode(prompt), args.max_new, tok.eos_token_id)
        distinct, repeated = degeneracy(new)
        print(f"prompt {prompt!r}: {len(new)} bytes, {distinct} distinct, repeated 8-grams {repeated:.2f}")
        print("```python\n" + prompt + tok.decode(new) + "\n```\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
