"""Run the drafting library's Triton kernels against their torch references on a device.

    python builtin_methods/drafting/benchmarks/gpu_check.py [--device cuda]
    TRITON_INTERPRET=1 python builtin_methods/drafting/benchmarks/gpu_check.py --device cpu --small

Input preparation of the hidden-state drafting loop (batch 64, up to 8 new positions each) and
block-query construction of the block drafters (batch 64, K 7 and 15); prints one line per case
with both timings and exits 1 on a mismatch.
"""

from __future__ import annotations

import sys

import torch


def main() -> int:
    from specpath_engine.harness import check_kernel, kernel_check_args
    from specpath_drafting.block.kernels import build_block_queries
    from specpath_drafting.block.reference import build_block_queries_reference
    from specpath_drafting.kernels import prepare_drafter_inputs
    from specpath_drafting.reference import prepare_drafter_inputs_reference

    args = kernel_check_args(__doc__)
    dev = torch.device(args.device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    ok = True
    for batch, row_len in [(4, 40)] if args.small else [(64, 2048), (64, 8192)]:
        table = torch.randint(0, 32000, (batch, row_len), generator=gen, dtype=torch.int32)
        num_new = torch.randint(0, 9, (batch,), generator=gen, dtype=torch.int32)
        start = torch.stack([torch.randint(0, row_len - 1 - int(n), (1,), generator=gen)[0]
                             for n in num_new]).to(torch.int32)
        cu = torch.zeros(batch + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(num_new, 0)
        inputs = [t.to(dev) for t in (table, torch.randperm(batch, generator=gen).to(torch.int32), start, num_new, cu)]
        ok &= check_kernel(f"input prep     B={batch} row_len={row_len}", prepare_drafter_inputs_reference,
                           prepare_drafter_inputs, *inputs, int(cu[-1]))
    for r, k in [(4, 3)] if args.small else [(64, 7), (64, 15)]:
        anchors = torch.randint(0, 32000, (r,), generator=gen).to(dev)
        pos = torch.randint(1, 500, (r,), generator=gen).to(dev)
        rows = torch.randperm(r, generator=gen).to(dev)
        ok &= check_kernel(f"block queries  R={r} K={k}", build_block_queries_reference, build_block_queries,
                           anchors, pos, rows, k, 520, 500)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
