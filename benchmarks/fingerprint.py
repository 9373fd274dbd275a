"""Behaviour fingerprint of every shipped drafter: greedy outputs and drafted/accepted counts.

A refactor that moves drafter code (KV caches, speculators, kernels) must leave what each shipped
checkpoint drafts and what the target accepts exactly as it was. This script writes those facts
to JSON and, given a second file, says which configurations differ::

    python benchmarks/fingerprint.py before.json          # on the old commit
    python benchmarks/fingerprint.py after.json --compare before.json

fp32 (so no bf16 rounding hides or invents a difference), K=4, two prompts, 24 new tokens each,
on the embedded model and on SmolLM2-135M when its GGUF is installed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROMPTS = ["def fibonacci(n):\n", "The capital of France is"]
MAX_TOKENS = 24
K = 4
OVERRIDES = {
    "mtp:mtp3": {"num_speculative_tokens": 3},  # K must be a multiple of its 3 modules
    "draft_model:bpe": {"use_heterogeneous_vocab": True},  # a BPE draft for the byte-level target
}
"""Rows whose checkpoint cannot run at the common K=4 config as it is."""


def _plugin_dir(package: str) -> Path:
    import importlib

    return Path(importlib.import_module(package).__file__).parent


def configs() -> list[tuple[str | None, str, dict]]:
    """(target, label, speculative config) for every shipped drafter and the model-free methods."""
    rows: list[tuple[str | None, str, dict]] = []
    shipped = [
        ("specpath_eagle", "heads", "eagle"),
        ("specpath_eagle3", "heads", "eagle3"),
        ("specpath_mtp", "checkpoints", "mtp"),
        ("specpath_draft_model", "checkpoints", "draft_model"),
        ("specpath_dflash", "checkpoints", "dflash"),
        ("specpath_dspark", "checkpoints", "dspark"),
    ]
    for package, sub, method in shipped:
        try:
            root = _plugin_dir(package) / sub
        except ImportError:
            continue
        for ckpt in sorted(p for p in root.iterdir() if (p / "config.json").exists()):
            target = "smollm2-135m" if "smollm2" in ckpt.name else None
            label = f"{method}:{ckpt.name}"
            rows.append((target, label, {"method": method, "model": str(ckpt), "num_speculative_tokens": K,
                                         **OVERRIDES.get(label, {})}))
    for target in (None, "smollm2-135m"):
        for method in ("ngram", "suffix"):
            cfg = {"method": method, "num_speculative_tokens": K}
            if method == "ngram":
                cfg["prompt_lookup_max"] = 3
            rows.append((target, method, cfg))
    return rows


def fingerprint() -> dict[str, dict]:
    from specpath_engine.llm import LLM, SamplingParams

    out: dict[str, dict] = {}
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True)
    for target, label, cfg in configs():
        key = f"{target or 'embedded'}/{label}"
        try:
            llm = LLM(target, speculative_config=cfg, dtype="float32")
            results = llm.generate(PROMPTS, params)
        except Exception as exc:  # a missing optional model is a row, not a crash
            out[key] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"{key}: {out[key]['error']}", file=sys.stderr)
            continue
        out[key] = {
            "token_ids": [r.token_ids for r in results],
            "drafted": [r.metrics.num_draft_tokens for r in results],
            "accepted": [r.metrics.num_accepted_tokens for r in results],
        }
        print(f"{key}: drafted {out[key]['drafted']} accepted {out[key]['accepted']}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="JSON file to write")
    parser.add_argument("--compare", type=Path, help="an earlier fingerprint to compare with")
    args = parser.parse_args(argv)
    now = fingerprint()
    args.out.write_text(json.dumps(now, indent=1))
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    differ = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    for k in differ:
        print(f"DIFFERS {k}: before {before.get(k)} now {now.get(k)}")
    print(f"{len(before.keys() & now.keys()) - len(set(differ) & before.keys() & now.keys())} identical, "
          f"{len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
