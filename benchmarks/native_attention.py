"""What one more verified row costs in the native attention: one layer's call at several query
rows and context lengths, SmolLM2's heads (9 query heads over 3 KV heads of 64).

The native matmuls cost the same for 1 to 8 rows (``weight_only_rows.py``); attention does not:
each (row, head) reads its keys on its own. Prints µs per call (the best of ``--repeats``), and
the same times 30 (SmolLM2's layers: what a step's attention costs), after the quiet-machine
gate. Not part of the tests.

    python benchmarks/native_attention.py --lengths 150 300 1000 --rows 1 2 5 8
"""

from __future__ import annotations

import argparse
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[150, 300, 1000])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 5, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    args = ap.parse_args()

    import torch

    from specpath_engine.harness import machine_load, wait_for_quiet
    from specpath_engine.modeling import native

    kernels = native.kernels()
    if kernels is None:
        print(f"native kernels unavailable: {native.unavailable_reason()}")
        return 1
    torch.set_num_threads(args.threads)
    heads, kv_heads, dim, layers = 9, 3, 64, 30
    load = wait_for_quiet(args.max_load)
    for length in args.lengths:
        keys, values = torch.randn(length, kv_heads, dim).bfloat16(), torch.randn(length, kv_heads, dim).bfloat16()
        cells = []
        for rows in args.rows:
            q = torch.randn(rows, heads, dim).bfloat16()
            k, v = torch.randn(rows, kv_heads, dim).bfloat16(), torch.randn(rows, kv_heads, dim).bfloat16()
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                kernels.attention(q, k, v, keys, values, length)
                best = min(best, time.perf_counter() - start)
            cells.append(f"{rows} rows {best * 1e6:5.0f} µs ({best * layers * 1e3:4.2f} ms a step)")
        print(f"context {length:5d}: " + "   ".join(cells))
    print(f"\n{heads} heads over {kv_heads} KV heads of {dim}, {args.threads} threads, best of {args.repeats}; "
          f"a step = {layers} layers; load average per core {load:.2f} before, {machine_load():.2f} after.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
