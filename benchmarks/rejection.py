"""Verification throughput: specpath's vectorised torch path against a per-request Python loop.

Workload (issue #4): batch 64, K in {2, 4, 8}, vocabulary 256 and 32000, on CPU. Drafts come
from a drafter close to the target (q = softmax(target logits + noise), drafts sampled from q),
so most drafts are accepted, as in a working speculative decoder. Both paths start from the
target logits (temperature, softmax, acceptance, corrected token) and emit the same layout.
Figure: draft tokens verified per second (batch * K / seconds per call), median over repeats.

    python3 benchmarks/rejection.py [--repeats 20] [--threads 1]

Both paths run with the same torch intra-op thread count (default 1). On a shared, loaded
2-core machine, 2 OpenMP threads make every vectorised op wait on its busy sibling core (we
saw the same call take 1 ms with 1 thread and 150 ms with 2), which measures the machine's
load rather than the code; pass --threads 2 to see it.

Cases:
  random       temperature 1, full draft probabilities, no per-request generators
  random-seed  the same with one torch.Generator per request (each draws its own numbers)
  one-hot      temperature 1, drafts without probabilities (n-gram style)
  greedy       temperature 0
  block        the random case verified by block verification (no loop baseline: "-")
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from specpath_engine.sample import rejection_sample


def loop_rejection_sample(drafts, counts, logits, bonus, temperature, draft_probs=None, generators=None):
    """The straightforward baseline: for each request, for each draft, decide and stop."""
    out = torch.full((len(counts), max(counts) + 1), -1, dtype=torch.int32)
    start = 0
    for r, k in enumerate(counts):
        g = None if generators is None else generators[r]
        t = float(temperature[r])
        for j in range(k):
            x = int(drafts[start + j])
            row = logits[start + j]
            if t == 0:
                best = int(row.argmax())
                out[r, j] = best
                if best != x:
                    break
                continue
            p = torch.softmax(row / t, -1)
            if draft_probs is None:
                q = torch.zeros_like(p)
                q[x] = 1.0
            else:
                q = draft_probs[start + j]
            if float(torch.rand(1, generator=g)) * float(q[x]) < float(p[x]):
                out[r, j] = x
                continue
            residual = (p - q).clamp_min(0)
            out[r, j] = int(torch.multinomial(residual / residual.sum(), 1, generator=g))
            break
        else:
            out[r, k] = bonus[r]
        start += k
    return out


def workload(batch, k, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch * k, vocab, generator=g) * 3
    q = torch.softmax(logits + torch.randn(batch * k, vocab, generator=g), -1)
    drafts = torch.multinomial(q, 1, generator=g).squeeze(1).to(torch.int32)
    bonus = torch.randint(0, vocab, (batch,), generator=g, dtype=torch.int32)
    return drafts, [k] * batch, logits, bonus, q


def median_seconds(fns, repeats):
    """Median seconds per call of each function, calls interleaved so that both paths see the
    same background load (this machine is shared)."""
    for fn in fns:
        fn()  # warm-up
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, seen in zip(fns, times):
            start = time.perf_counter()
            fn()
            seen.append(time.perf_counter() - start)
    return [statistics.median(seen) for seen in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    batch = args.batch
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {batch}, median of {args.repeats}")
    print(f"{'vocab':>6} {'K':>2} {'case':<12} {'specpath tok/s':>15} {'loop tok/s':>12} {'ratio':>7}")
    for vocab in (256, 32000):
        for k in (2, 4, 8):
            drafts, counts, logits, bonus, q = workload(batch, k, vocab)
            ones, zeros = torch.ones(batch), torch.zeros(batch)
            cases = {
                "random": (dict(temperature=ones, draft_probs=q), True),
                "random-seed": (dict(temperature=ones, draft_probs=q, seeded=True), True),
                "one-hot": (dict(temperature=ones, draft_probs=None), True),
                "greedy": (dict(temperature=zeros, draft_probs=q), True),
                "block": (dict(temperature=ones, draft_probs=q, method="block"), False),
            }
            for name, (case, has_loop) in cases.items():
                seeded = case.pop("seeded", False)
                method = case.pop("method", "standard")

                generators = [torch.Generator().manual_seed(i) for i in range(batch)] if seeded else None

                def gens():  # persistent per-request generators, as an engine keeps them
                    return generators

                def fast():
                    return rejection_sample(drafts, counts, logits, bonus, case["temperature"],
                                            draft_probs=case["draft_probs"], generators=gens(), method=method)

                def slow():
                    return loop_rejection_sample(drafts, counts, logits, bonus, case["temperature"],
                                                 case["draft_probs"], gens())

                timed = median_seconds([fast, slow] if has_loop else [fast], args.repeats)
                tokens = batch * k
                line = f"{vocab:>6} {k:>2} {name:<12} {tokens / timed[0]:>15,.0f}"
                if has_loop:
                    line += f" {tokens / timed[1]:>12,.0f} {timed[1] / timed[0]:>6.1f}x"
                else:
                    line += f" {'-':>12} {'-':>7}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
