"""Run DSpark's Triton kernel against its torch reference on a device.

    python builtin_methods/dspark/benchmarks/gpu_check.py [--device cuda]

Markov-head sampling at serving-like sizes (batch 64, K 7, vocab 256 and 32000, rank 256);
prints one line per case and exits 1 on a mismatch. On CPU it needs TRITON_INTERPRET=1 and
``--small``. The block-query kernel it runs on is checked by
``builtin_methods/drafting/benchmarks/gpu_check.py``.
"""

from __future__ import annotations

import sys

import torch


def same_sample(want, got) -> bool:
    return torch.equal(want[0], got[0]) and torch.allclose(want[1], got[1], atol=1e-5) and torch.allclose(
        want[2], got[2], atol=1e-5)


def main() -> int:
    from specpath_engine.harness import check_kernel, kernel_check_args
    from specpath_dspark.kernels import markov_sample
    from specpath_dspark.reference import markov_sample_reference, topk_floor

    args = kernel_check_args(__doc__)
    dev = torch.device(args.device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    ok = True
    cases = [(4, 3, 40, 8)] if args.small else [(64, 7, 256, 64), (64, 7, 32000, 256)]
    for r, k, vocab, rank in cases:
        anchors = torch.randint(0, vocab, (r,), generator=gen).to(dev)
        base = (torch.randn(r, k, vocab, generator=gen) * 2).to(dev)
        inputs = (base, topk_floor(base, 64), torch.randn(vocab, rank, generator=gen).to(dev) * 0.1,
                  torch.randn(rank, vocab, generator=gen).to(dev) * 0.1, anchors, torch.randn(r, k, generator=gen).to(dev),
                  torch.randn(rank, generator=gen).to(dev), torch.ones(k, device=dev),
                  torch.where(torch.arange(r) % 2 == 0, 0.0, 1.0).to(dev), torch.rand(r, k, generator=gen).to(dev))
        ok &= check_kernel(f"markov sample  R={r} K={k} V={vocab} r={rank}", markov_sample_reference, markov_sample,
                           *inputs, same=same_sample)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
