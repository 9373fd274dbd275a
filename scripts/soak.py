#!/usr/bin/env python3
"""Soak the reference engine with random requests across every installed method.

Each round draws a method (or none), K in 1..8, prefix caching on or off and a batch of 1..16
random requests (greedy and seeded sampled, random lengths, stop strings, stop ids), runs it
through ``specpath_engine.LLM`` on the embedded model and checks:

- no exception (a config a method refuses at start-up is counted, not a failure);
- every KV block is free afterwards;
- every greedy request emits what plain decoding of it alone emits; a difference at a float32
  near-tie (top-2 logit margin below ``NEAR_TIE``) is counted as a near-tie, any other is a failure;
- one seeded sampled request per batch emits the same tokens when re-run alone;
- resident memory stays within ``--max-rss-growth-mb`` of its level after the first rounds.

    python scripts/soak.py --requests 1000 --out runs/soak      # resumable: state in --out
    python scripts/soak.py --requests 40 --methods ngram,eagle         # a quick look

Prints one JSON line of counts at the end; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

NEAR_TIE = 1e-4
"""Top-2 logit margin under which a greedy difference is a float32 near-tie (batched matmuls
sum in another order than one-token ones), not a bug."""

TEXT = (
    "def main(argv=None):\n    parser = argparse.ArgumentParser()\n    return 0\n\n"
    "class Queue:\n    def put(self, item):\n        self.queue.append(item)\n\n"
    "import os\nimport sys\n\nfor line in text.splitlines():\n    line = line.strip()\n"
)


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _prompt(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return "".join(rng.choice("abc xyz\n()") for _ in range(rng.randint(1, 30)))
    start = rng.randrange(len(TEXT) - 8)
    return TEXT[start : start + rng.randint(4, 120)]


def _params(rng: random.Random, SamplingParams: Any) -> Any:
    kw: dict[str, Any] = {"max_tokens": rng.randint(1, 32), "ignore_eos": rng.random() < 0.7}
    if rng.random() < 0.4:
        kw.update(temperature=rng.choice([0.3, 0.7, 1.0, 1.5]), seed=rng.randrange(2**31))
        if rng.random() < 0.3:
            kw["top_p"] = rng.choice([0.5, 0.9])
        if rng.random() < 0.3:
            kw["top_k"] = rng.choice([1, 5, 40])
    if rng.random() < 0.2:
        kw["stop"] = [rng.choice(["\n", "  ", "(", "e", "return"])]
    if rng.random() < 0.1:
        kw["stop_token_ids"] = [rng.choice([10, 32, 101])]
    return SamplingParams(**kw)


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        from specpath_engine.cli_run import demo_configs

        self.args = args
        self.out = Path(args.out) if args.out else None
        only = set(args.methods.split(",")) if args.methods else None
        self.methods: list[tuple[str, dict | None]] = [("none", None), *demo_configs(4, only)[0]]
        self.counts: dict[str, Any] = {
            "requests": 0, "rounds": 0, "greedy_checked": 0, "greedy_near_ties": 0, "seeded_checked": 0,
            "config_refused": 0, "failures": 0, "per_method": {}, "rss_mb_start": None, "rss_mb_max": 0.0,
            "near_tie_margins": [], "failure_messages": [],
        }
        self.plain: dict[bool, Any] = {}
        if self.out and (self.out / "state.json").is_file():
            self.counts = json.loads((self.out / "state.json").read_text())

    def _fail(self, message: str) -> None:
        self.counts["failures"] += 1
        if len(self.counts["failure_messages"]) < 20:
            self.counts["failure_messages"].append(message[:300])
        print("FAIL", message[:300], file=sys.stderr, flush=True)

    def _plain(self, prefix_caching: bool) -> Any:
        from specpath_engine.llm import LLM

        if prefix_caching not in self.plain:
            self.plain[prefix_caching] = LLM(None, enable_prefix_caching=prefix_caching, max_num_seqs=16)
        return self.plain[prefix_caching]

    def round(self, rng: random.Random) -> None:
        from specpath_engine.harness import first_difference, top2_margin
        from specpath_engine.llm import LLM, SamplingParams
        from specpath.errors import SpeculativeConfigError

        name, config = rng.choice(self.methods)
        k = rng.randint(1, 8)
        prefix = rng.random() < 0.5
        batch = rng.randint(1, 16)
        spec = None if config is None else {**config, "num_speculative_tokens": k}
        per = self.counts["per_method"].setdefault(name, {"rounds": 0, "requests": 0, "refused": 0})
        try:
            llm = LLM(None, spec, enable_prefix_caching=prefix, max_num_seqs=16, block_size=rng.choice([4, 16]))
        except SpeculativeConfigError as exc:  # a K the method refuses (e.g. a fixed block size)
            self.counts["config_refused"] += 1
            per["refused"] += 1
            if "\n" in str(exc):
                self._fail(f"{name} K={k}: multi-line config error")
            return
        prompts = [_prompt(rng) for _ in range(batch)]
        params = [_params(rng, SamplingParams) for _ in range(batch)]
        tag = f"{name} K={k} prefix={prefix} batch={batch}"
        try:
            outputs = llm.generate(prompts, params)
            if rng.random() < 0.3:  # a second call: prefix-cache hits, reused engine state
                outputs = llm.generate(prompts, params)
        except Exception as exc:  # noqa: BLE001 - the soak reports every exception
            self._fail(f"{tag}: {type(exc).__name__}: {exc}")
            return
        blocks = llm.engine.blocks
        if blocks.num_free_blocks != blocks.num_blocks:
            self._fail(f"{tag}: {blocks.num_blocks - blocks.num_free_blocks} blocks still held")
        plain = self._plain(prefix)
        for prompt, p, out in zip(prompts, params, outputs):
            if p.samples:
                continue
            ref = plain.generate([prompt], p)[0].token_ids
            self.counts["greedy_checked"] += 1
            at = first_difference(ref, out.token_ids)
            if at is not None:
                margin = top2_margin(plain.model, out.prompt_token_ids + ref[:at])
                if margin < NEAR_TIE:
                    self.counts["greedy_near_ties"] += 1
                    self.counts["near_tie_margins"].append(margin)
                else:
                    self._fail(f"{tag}: greedy output differs from plain decoding at token {at} (margin {margin:.3g})")
        sampled = [(prompt, p, out) for prompt, p, out in zip(prompts, params, outputs) if p.samples]
        if sampled and batch > 1:
            prompt, p, out = rng.choice(sampled)
            alone = llm.generate([prompt], p)[0].token_ids
            self.counts["seeded_checked"] += 1
            if alone != out.token_ids:
                self._fail(f"{tag}: seeded output differs alone vs in a batch of {batch}")
        if blocks.num_free_blocks != blocks.num_blocks:
            self._fail(f"{tag}: blocks held after the re-runs")
        self.counts["requests"] += batch
        self.counts["rounds"] += 1
        per["rounds"] += 1
        per["requests"] += batch

    def run(self) -> dict[str, Any]:
        import gc

        rng = random.Random(self.args.seed * 1_000_003 + self.counts["rounds"] + self.counts["config_refused"])
        warm_rounds = 3
        while self.counts["requests"] < self.args.requests:
            self.round(rng)
            gc.collect()
            rss = _rss_mb()
            done = self.counts["rounds"] + self.counts["config_refused"]
            if done == warm_rounds or self.counts["rss_mb_start"] is None and done > warm_rounds:
                self.counts["rss_mb_start"] = rss
            self.counts["rss_mb_max"] = max(self.counts["rss_mb_max"], rss)
            start = self.counts["rss_mb_start"]
            if start is not None and rss - start > self.args.max_rss_growth_mb:
                self._fail(f"RSS grew from {start:.0f} MB to {rss:.0f} MB")
                break
            if self.out and done % 10 == 0:
                self._save()
                print(f"{time.strftime('%H:%M:%S')} {self.counts['requests']} requests, "
                      f"{self.counts['failures']} failures, rss {rss:.0f} MB", flush=True)
        if self.out:
            self._save()
        return self.counts

    def _save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / "state.json.tmp"
        tmp.write_text(json.dumps(self.counts, indent=1))
        os.replace(tmp, self.out / "state.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", help="comma-separated subset (default: every installed drafting method)")
    parser.add_argument("--out", help="folder for the resumable state (state.json)")
    parser.add_argument("--max-rss-growth-mb", type=float, default=400.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    counts = Soak(args).run()
    summary = {k: v for k, v in counts.items() if k not in ("near_tie_margins",)}
    print(json.dumps(summary))
    return 1 if counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
