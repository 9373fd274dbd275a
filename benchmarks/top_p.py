"""The top-p filter against ranking the whole vocabulary, side by side, and what it costs a
sampled decode step.

    python benchmarks/top_p.py [--vocab 49152] [--threads 2] [--top-p 0.95] [--engine]

Part one times ``processed_logits`` (temperature 0.8, top-p) on rows of logits shaped like a
language model's (a peaked softmax: random logits times ``--spread``; flat rows go past the first
candidates, so ``--spread 0.1`` times the worst case) for 1, 8 and 48 rows, against the same
filter by a full sort (the implementation it replaced), interleaved, best of ``--repeats``.
With ``--engine``, part two times SmolLM2 bf16 plain decoding at batch 1, temperature 0.8, with
top-p 1 and ``--top-p`` (the built-in code-chat workload, 64 tokens each): what a sampled step pays
for its filter.
"""

from __future__ import annotations

import argparse
import time

import torch


def by_sorting(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """The top-p filter by ranking the whole vocabulary (the reference)."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    drop = probs.cumsum(dim=-1) - probs >= top_p[:, None]
    drop[:, 0] = False
    return torch.empty_like(logits).scatter_(1, order, sorted_logits.masked_fill(drop, float("-inf")))


def best(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def filters(vocab: int, spread: float, top_p: float, repeats: int) -> None:
    from specpath_engine.sample.processing import processed_logits

    for rows in (1, 8, 48):
        logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(rows)) * spread
        temperature, p = torch.full((rows,), 0.8), torch.full((rows,), top_p)
        ours = best(lambda: processed_logits(logits, temperature, None, p), repeats)
        ref = best(lambda: by_sorting(logits / 0.8, p), repeats)
        print(f"rows {rows:3d}: top-p filter {1e3 * ours:7.3f} ms, by a full sort {1e3 * ref:7.3f} ms "
              f"({ref / ours:.1f}x)")


def engine(top_p: float) -> None:
    from specpath_engine.bench.workloads import BUILTIN
    from specpath_engine.llm import LLM, SamplingParams

    items = list(BUILTIN["code-chat"].items)
    llm = LLM("smollm2-135m", None, dtype="bfloat16")
    rates = {}
    for p in (1.0, top_p, 1.0, top_p):  # interleaved, twice
        params = [SamplingParams(max_tokens=64, ignore_eos=True, temperature=0.8, top_p=p, seed=i)
                  for i in range(len(items))]
        start = time.perf_counter()
        tokens = sum(len(llm.chat([item], [q])[0].token_ids) for item, q in zip(items, params))
        rates.setdefault(p, []).append(tokens / (time.perf_counter() - start))
    base = max(rates[1.0])
    print(f"plain decoding, T=0.8, batch 1: top-p 1 {base:.1f} tok/s, top-p {top_p} {max(rates[top_p]):.1f} tok/s "
          f"({max(rates[top_p]) / base:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--spread", type=float, default=3.0)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--engine", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    filters(args.vocab, args.spread, args.top_p, args.repeats)
    if args.engine:
        engine(args.top_p)


if __name__ == "__main__":
    main()
