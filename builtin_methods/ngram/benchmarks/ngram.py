"""n-gram batch proposer vs a compiled KMP baseline, side by side in one run.

Workload (issue #6): 64 requests x 4096 tokens, min_n 3, max_n 5, k 4. Tokens come from a
small vocabulary as repeated segments with a little noise (seeded), like code or templated
text. A second workload of uniform random tokens shows the case where no request can stop
early. Both paths are warmed up (compiled) before timing.

    python3 builtin_methods/ngram/benchmarks/ngram.py [--requests 64] [--length 4096] [--repeats 200]

Then one engine-like stream of steps through NgramSpeculator.propose (the requests grow by
1-4 tokens a step), against the same proposer fed from histories re-copied every step.

Paths:
  kmp-loop      Python loop over requests, each calling an njit KMP over the reversed
                sequence (the scan vLLM's CPU n-gram proposer runs), the baseline.
  kmp-njit-loop the same KMP with the request loop compiled as well.
  batch         specpath_ngram's batch proposer: one compiled, single-threaded call.
  torch-ref     the vectorised torch reference of the ngram_gpu kernel, on CPU.
  +torch        the call right after a small torch matmul, as in an engine step where the
                target model ran just before (torch's OpenMP threads are still spinning).
  batch-par     the batch proposer's scan under numba prange (parallel=True), the variant
                specpath_ngram does not ship: measured last, because once its thread pool
                is up it slows torch down as well.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from specpath_ngram import batch as ngram_batch
from specpath_ngram.reference import propose_ngram_reference


@numba.njit(nogil=True, cache=True)
def kmp_propose(tokens, min_n, max_n, k):
    """Baseline: KMP prefix function over the reversed sequence, capped at max_n (the scan of
    vLLM's CPU proposer; specpath_ngram keeps the same scan as its fallback, ``_kmp_row``)."""
    total = tokens.shape[0]
    if total < min_n:
        return tokens[:0]
    n, follow = ngram_batch._kmp_row(tokens, total, min_n, max_n)
    if n == 0:
        return tokens[:0]
    return tokens[follow : follow + min(k, total - follow)]


@numba.njit(nogil=True, cache=True, parallel=True)
def batch_parallel_kernel(tokens, rows, lengths, ks, min_n, max_n, drafts, counts):
    """The batch proposer's scan spread over numba's threads, one request per iteration."""
    for i in numba.prange(rows.shape[0]):
        row = tokens[rows[i]]
        n, follow = ngram_batch._match_row(row, lengths[i], min_n, max_n)
        count = min(ks[i], lengths[i] - follow) if n > 0 and ks[i] > 0 else 0
        for j in range(count):
            drafts[i, j] = row[follow + j]
        counts[i] = count


@numba.njit(nogil=True, cache=True)
def kmp_batch(tokens, min_n, max_n, k, drafts, counts):
    """The baseline with its request loop compiled too (no Python per request)."""
    for r in range(tokens.shape[0]):
        draft = kmp_propose(tokens[r], min_n, max_n, k)
        counts[r] = draft.shape[0]
        drafts[r, : draft.shape[0]] = draft


def repeated_segments(rng, requests, length, vocab=32, segments=48, noise=0.02):
    pool = [rng.integers(0, vocab, rng.integers(8, 64)) for _ in range(segments)]
    out = np.zeros((requests, length), np.int32)
    for r in range(requests):
        parts, size = [], 0
        while size < length:
            part = pool[rng.integers(0, segments)].copy()
            flip = rng.random(part.shape[0]) < noise
            part[flip] = rng.integers(0, vocab, int(flip.sum()))
            parts.append(part)
            size += part.shape[0]
        out[r] = np.concatenate(parts)[:length]
    return out


def per_call_seconds(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run(tokens, min_n, max_n, k, repeats, with_parallel):
    import torch

    requests, length = tokens.shape
    rows = np.arange(requests, dtype=np.int32)
    lengths = np.full(requests, length, np.int32)
    ks = np.full(requests, k, np.int32)
    drafts = np.zeros((requests, k), np.int32)
    counts = np.zeros(requests, np.int32)

    def kmp_loop():
        return [kmp_propose(tokens[r], min_n, max_n, k) for r in range(requests)]

    def kmp_njit_loop():
        kmp_batch(tokens, min_n, max_n, k, drafts, counts)

    def batch():
        ngram_batch.propose_batch_into(tokens, rows, lengths, ks, min_n, max_n, drafts, counts)

    def batch_parallel():
        batch_parallel_kernel(tokens, rows, lengths, ks, min_n, max_n, drafts, counts)

    x = torch.randn(256, 256)

    def after_torch(fn):
        def step():
            (x @ x).sum()
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        return step

    t_tokens, t_rows = torch.from_numpy(tokens), torch.from_numpy(rows)
    t_lengths, t_ks = torch.from_numpy(lengths), torch.from_numpy(ks)

    def torch_ref():
        propose_ngram_reference(t_tokens, t_rows, t_lengths, t_ks, min_n, max_n, k)

    batch()
    expected = kmp_loop()
    assert all(drafts[r, : counts[r]].tolist() == expected[r].tolist() for r in range(requests))
    baseline = per_call_seconds(kmp_loop, repeats)
    rows_out = [("kmp-loop", baseline)]
    for name, fn, reps in [
        ("kmp-njit-loop", kmp_njit_loop, repeats),
        ("batch", batch, repeats),
        ("torch-ref", torch_ref, max(3, repeats // 20)),
    ]:
        rows_out.append((name, per_call_seconds(fn, reps)))
    rows_out.append(("batch+torch", float(np.median([after_torch(batch)() for _ in range(repeats)]))))
    if with_parallel:
        rows_out.append(("batch-par", per_call_seconds(batch_parallel, repeats)))
        step = after_torch(batch_parallel)
        rows_out.append(("batch-par+torch", float(np.median([step() for _ in range(repeats)]))))
    drafted = int(counts.sum())
    print(f"  requests with drafts: {int((counts > 0).sum())}/{requests}, drafts: {drafted}")
    for name, seconds in rows_out:
        print(f"  {name:<15} {seconds * 1e6:10.1f} us/call   {baseline / seconds:6.2f}x vs kmp-loop")


def speculator_steps(rng, requests, length, steps=200):
    """Per-step cost of NgramSpeculator.propose vs re-copying every history each step."""
    from specpath.config.speculative import SpeculativeConfig
    from specpath.speculator import DraftBatch, DraftRequest, SpeculatorContext
    from specpath_ngram.speculator import NgramSpeculator

    spec = SpeculativeConfig.from_dict(
        {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 3, "prompt_lookup_max": 5}
    )
    context = SpeculatorContext(vocab_size=32, max_model_len=length + 4 * steps + 8, max_num_seqs=requests)
    speculator = NgramSpeculator(spec, context)
    histories = [row.tolist() for row in repeated_segments(rng, requests, length)]
    incremental, recopied = [], []
    for _ in range(steps):
        batch = DraftBatch(
            requests=tuple(
                DraftRequest(req_id=str(i), token_ids=h, num_new_positions=1, max_draft_tokens=4)
                for i, h in enumerate(histories)
            )
        )
        start = time.perf_counter()
        proposal = speculator.propose(batch)
        incremental.append(time.perf_counter() - start)
        start = time.perf_counter()
        again = ngram_batch.propose_batch(histories, 3, 5, 4)
        recopied.append(time.perf_counter() - start)
        assert sum(again, []) == proposal.token_ids.tolist()
        for history in histories:
            history.extend(rng.integers(0, 32, rng.integers(1, 5)).tolist())
    a, b = float(np.median(incremental)), float(np.median(recopied))
    print(f"  NgramSpeculator.propose {a * 1e6:8.1f} us/step   {b / a:5.2f}x vs re-copying")
    print(f"  re-copy + batch call    {b * 1e6:8.1f} us/step")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ngram_batch.warm_up()
    rng = np.random.default_rng(args.seed)
    print(f"numba {numba.__version__}, threads {numba.get_num_threads()}, "
          f"{args.requests} x {args.length} tokens, min_n 3, max_n 5, k 4")
    print("repeated segments (vocab 32):")
    run(repeated_segments(rng, args.requests, args.length), 3, 5, 4, args.repeats, False)
    print("uniform random tokens (vocab 32000, no request stops early):")
    random_tokens = rng.integers(0, 32000, (args.requests, args.length)).astype(np.int32)
    run(random_tokens, 3, 5, 4, args.repeats, True)
    print("speculator steps: 8 requests from 1024 tokens, 200 steps:")
    speculator_steps(rng, 8, 1024)


if __name__ == "__main__":
    main()
