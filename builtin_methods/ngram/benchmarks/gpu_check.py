"""Run the n-gram Triton kernel against its torch reference on a device.

    python builtin_methods/ngram/benchmarks/gpu_check.py [--device cuda]
    TRITON_INTERPRET=1 python builtin_methods/ngram/benchmarks/gpu_check.py --device cpu --small

Batches of 64 and 256 requests with histories of up to 4k and 16k tokens (small vocabularies,
so matches and ties are frequent), k up to 8, for (min_n, max_n) = (1, 3) and (3, 5); prints one
line per case with both timings and exits 1 on a mismatch (counts, and the drafts they cover).
"""

from __future__ import annotations

import sys

import torch


def same_drafts(want, got) -> bool:
    return torch.equal(want[1], got[1]) and all(
        torch.equal(w[:c], g[:c]) for w, g, c in zip(want[0], got[0], want[1].tolist()))


def main() -> int:
    from specpath_engine.harness import check_kernel, kernel_check_args
    from specpath_ngram.kernels import propose_ngram_triton
    from specpath_ngram.reference import propose_ngram_reference

    args = kernel_check_args(__doc__)
    dev = torch.device(args.device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    ok = True
    for batch, width in [(8, 64)] if args.small else [(64, 4096), (256, 16384)]:
        tokens = torch.randint(0, 8, (batch + 4, width), generator=gen, dtype=torch.int32)
        rows = torch.randperm(batch + 4, generator=gen)[:batch].to(torch.int32)
        lengths = torch.randint(1, width + 1, (batch,), generator=gen, dtype=torch.int32)
        ks = torch.randint(0, 9, (batch,), generator=gen, dtype=torch.int32)
        inputs = [t.to(dev) for t in (tokens, rows, lengths, ks)]
        for min_n, max_n in ((1, 3), (3, 5)):
            ok &= check_kernel(f"ngram B={batch} width={width} n={min_n}..{max_n}", propose_ngram_reference,
                               propose_ngram_triton, *inputs, min_n, max_n, 8, same=same_drafts)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
