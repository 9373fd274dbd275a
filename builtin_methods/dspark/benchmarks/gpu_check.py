"""Run the DFlash and DSpark Triton kernels against their torch references on a device.

    python builtin_methods/dspark/benchmarks/gpu_check.py [--device cuda]

Block-query construction and Markov-head sampling at serving-like sizes (batch 64, K 7, vocab
256 and 32000, rank 256); prints one line per case and exits 1 on a mismatch. On CPU it needs
TRITON_INTERPRET=1 and ``--small``.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch


def timed(fn, *args):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, (time.perf_counter() - start) * 1e3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true")
    args = p.parse_args()
    from specpath_drafting.block.kernels import build_block_queries
    from specpath_drafting.block.reference import build_block_queries_reference
    from specpath_dspark.kernels import markov_sample
    from specpath_dspark.reference import markov_sample_reference, topk_floor

    dev = torch.device(args.device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    ok = True
    cases = [(4, 3, 40, 8)] if args.small else [(64, 7, 256, 64), (64, 7, 32000, 256)]
    for r, k, vocab, rank in cases:
        anchors = torch.randint(0, vocab, (r,), generator=gen).to(dev)
        pos = torch.randint(1, 500, (r,), generator=gen).to(dev)
        rows = torch.randperm(r, generator=gen).to(dev)
        want, t_ref = timed(build_block_queries_reference, anchors, pos, rows, k, 520, 500)
        got, t_ker = timed(build_block_queries, anchors, pos, rows, k, 520, 500)
        same = all(torch.equal(a, b) for a, b in zip(want, got))
        ok &= same
        print(f"block queries  R={r} K={k}: {'match' if same else 'MISMATCH'}  ref {t_ref:.2f} ms  kernel {t_ker:.2f} ms")
        base = (torch.randn(r, k, vocab, generator=gen) * 2).to(dev)
        inputs = (base, topk_floor(base, 64), torch.randn(vocab, rank, generator=gen).to(dev) * 0.1,
                  torch.randn(rank, vocab, generator=gen).to(dev) * 0.1, anchors, torch.randn(r, k, generator=gen).to(dev),
                  torch.randn(rank, generator=gen).to(dev), torch.ones(k, device=dev),
                  torch.where(torch.arange(r) % 2 == 0, 0.0, 1.0).to(dev), torch.rand(r, k, generator=gen).to(dev))
        want, t_ref = timed(markov_sample_reference, *inputs)
        got, t_ker = timed(markov_sample, *inputs)
        same = torch.equal(want[0], got[0]) and torch.allclose(want[1], got[1], atol=1e-5) and torch.allclose(
            want[2], got[2], atol=1e-5)
        ok &= same
        print(f"markov sample  R={r} K={k} V={vocab} r={rank}: {'match' if same else 'MISMATCH'}  "
              f"ref {t_ref:.2f} ms  kernel {t_ker:.2f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
