"""What verifying K drafts costs under each CPU weight format: the layers' matmuls at 1..K+1 rows.

Speculation pays when a pass over K+1 query rows costs little more than a pass over one. On a
memory-bound CPU that holds for a kernel that reads each weight once for all rows; this script
measures, side by side in one process, the matmuls of ``--layers`` SmolLM2-135M decoder layers
(q/k/v/o 576->576/192/192/576, gate/up 576->1536 twice, down 1536->576; the target's real weights
when ``--target`` is given, else random ones of that shape) at each row count, all layers in turn
as a decoding step reads them (30, the default: ~100 MB in bf16, far more than the caches, so the
weights stream from memory as in a real step; one layer alone would sit in cache), for:

- ``bf16 oneDNN``: the pre-packed oneDNN weights (``specpath_engine.packed_linear`` on torch's kernels);
- ``int8 torch``: weight-only int8 (``--quantization int8``) on ``aten._weight_int8pack_mm``;
- ``int8-inductor`` (``--inductor``): the same op compiled by ``torch.compile`` with
  ``max_autotune``, which may pick inductor's C++ GEMM template instead of the aten kernel;
- ``int4 torch``: weight-only int4 (``--quantization int4``: groups of 32) on
  ``aten._weight_int4pack_mm_for_cpu``;
- ``bf16 native AMX``: where the CPU has AMX-BF16, the bf16 layers on the tile kernel
  (``tiled_matmul.c``), which the engine then runs instead of ``bf16 native``'s AVX512-BF16 one;
- ``bf16 native``, ``int8 native``, ``int4 native``: the same layers on the engine's native
  kernels (``specpath_engine.modeling.native``, what the engine runs where they build), one call each
  here (the engine fuses each layer's projections and calls them from C).

Prints µs per layer (a pass over all of them / ``--layers``) and the cost relative to one row,
per format; after the quiet-machine gate.
Not part of the tests.

    python benchmarks/weight_only_rows.py --rows 1 3 5 9 --inductor
"""

from __future__ import annotations

import argparse
import json
import time

SHAPES = (("q", 576, 576), ("k", 192, 576), ("v", 192, 576), ("o", 576, 576),
          ("gate", 1536, 576), ("up", 1536, 576), ("down", 576, 1536))
"""(name, out, in) of one SmolLM2-135M decoder layer's linear layers."""


def layer_weights(target: str | None, layers: int):
    """The float32 weights of ``layers`` decoder layers, layer by layer in :data:`SHAPES` order."""
    import torch

    if target is None:
        g = torch.Generator().manual_seed(0)
        return [torch.randn(o, i, generator=g) * 0.02 for _ in range(layers) for _, o, i in SHAPES]
    from safetensors.torch import load_file

    state = load_file(f"{target}/model.safetensors")
    names = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
             "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}
    return [state[f"model.layers.{layer}.{names[n]}.weight"].float() for layer in range(layers) for n, _, _ in SHAPES]


def formats(weights, *, inductor: bool):
    """name -> list of callables (one per linear layer), each x [rows, in] bf16 -> [rows, out]."""
    import torch
    from torch import nn

    from specpath_engine.packed_linear import PackedLinear
    from specpath_engine.quantization import Int4Linear, Int8Linear
    from specpath_engine.modeling import native

    def linear(w):
        layer = nn.Linear(w.shape[1], w.shape[0], bias=False)
        layer.weight.data = w.to(torch.bfloat16)
        return layer

    with native.disabled():
        out = {"bf16 oneDNN": [PackedLinear(linear(w)) for w in weights],
               "int8 torch": [Int8Linear(linear(w)) for w in weights]}
        try:
            out["int4 torch"] = [Int4Linear(linear(w)) for w in weights]
        except (RuntimeError, AttributeError) as exc:  # an older torch without the CPU int4 kernels
            print(json.dumps({"int4": f"unavailable: {exc}"}))
    if native.kernels() is None:
        print(json.dumps({"native": f"unavailable: {native.unavailable_reason()}"}))
    else:
        kernels = native.kernels()
        tiles, kernels.tiles = kernels.tiles, False  # layers read the flag when built: these get the AVX512 kernel
        out["bf16 native"] = [PackedLinear(linear(w)) for w in weights]
        kernels.tiles = tiles
        if tiles:
            out["bf16 native AMX"] = [PackedLinear(linear(w)) for w in weights]
        for name, cls in (("int8 native", Int8Linear), ("int4 native", Int4Linear)):
            out[name] = [cls(linear(w)) for w in weights]
    if inductor:
        import torch._inductor.config as inductor_config

        inductor_config.max_autotune = True
        inductor_config.max_autotune_gemm_backends = "CPP,ATEN"
        # 7 layers x every row count share Int8Linear.forward: room for a graph each
        torch._dynamo.config.recompile_limit = 8 * len(weights)
        out["int8-inductor"] = [torch.compile(m, dynamic=False) for m in out["int8 torch"]]
    return out


def time_pass(fns, x, repeats: int) -> float:
    """Median over ``repeats`` batches of 10 passes over ``fns`` (every layer's matmuls), in µs per pass."""
    import statistics

    import torch

    with torch.inference_mode():
        for _ in range(2):
            for fn in fns:
                fn(x)
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(10):
                for fn in fns:
                    fn(x)
            samples.append((time.perf_counter() - start) / 10 * 1e6)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help="an HF SmolLM2 checkpoint (its layer 0); default: random weights")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 3, 5, 9])
    ap.add_argument("--layers", type=int, default=30, help="decoder layers streamed per pass (SmolLM2 has 30)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--inductor", action="store_true", help="also the int8 op compiled with max_autotune")
    ap.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    args = ap.parse_args()

    import torch

    from specpath_engine.harness import machine_load, wait_for_quiet

    torch.set_num_threads(args.threads)
    wait_for_quiet(args.max_load)
    fmts = formats(layer_weights(args.target, args.layers), inductor=args.inductor)
    load_before = machine_load()
    table: dict[str, dict[int, float]] = {name: {} for name in fmts}
    for rows in args.rows:
        x = torch.randn(rows, 576, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
        down_x = torch.randn(rows, 1536, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
        for name, fns in fmts.items():  # interleaved: every format at this row count in turn
            inputs = [down_x if i % len(SHAPES) == len(SHAPES) - 1 else x for i in range(len(fns))]
            per_pass = time_pass([lambda _, f=f, a=a: f(a) for f, a in zip(fns, inputs)], x, args.repeats)
            table[name][rows] = per_pass / args.layers
    print(f"SmolLM2 decoder-layer matmuls over {args.layers} layers, µs per layer (x cost of 1 row), {args.threads} thread(s), "
          f"load per core {load_before:.2f} before / {machine_load():.2f} after")
    print(f"{'format':<15}" + "".join(f"{f'{r} rows':>18}" for r in args.rows))
    first = args.rows[0]
    for name, by_rows in table.items():
        cells = "".join(f"{f'{by_rows[r]:.0f} ({by_rows[r] / by_rows[first]:.2f}x)':>18}" for r in args.rows)
        print(f"{name:<15}{cells}")
    print(json.dumps({"threads": args.threads, "us": {n: {str(r): round(v, 1) for r, v in t.items()} for n, t in table.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
