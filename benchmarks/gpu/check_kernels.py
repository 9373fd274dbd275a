"""Check every verification Triton kernel against its torch reference on CUDA, and time both.

Each kernel of ``specpath_engine.sample.triton_kernels`` is run with its twin in
``specpath_engine.sample.reference`` on the same random inputs and the same randomness; integer
outputs must be identical, float outputs close. Then ``rejection_sample`` is run end to end
with ``backend="triton"`` and ``backend="torch"`` for every method. Prints one table and exits
1 on any mismatch (2 when there is no CUDA device).

    python benchmarks/gpu/check_kernels.py [--repeats 50]
    TRITON_INTERPRET=1 python benchmarks/gpu/check_kernels.py --device cpu --small   # smoke test

Timings are medians from ``triton.testing.do_bench`` (CUDA) or wall clock (CPU smoke test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="tiny shapes (for the CPU interpreter)")
    parser.add_argument("--repeats", type=int, default=50)
    return parser.parse_args()


ARGS = parse_args()
if ARGS.device == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

if ARGS.device == "cuda" and not torch.cuda.is_available():
    print("check_kernels: no CUDA device; run it on a GPU machine (or --device cpu --small under TRITON_INTERPRET=1)")
    sys.exit(2)

from specpath_engine.sample import reference, rejection_sample  # noqa: E402
from specpath_engine.sample import triton_kernels as tk  # noqa: E402

DEVICE = torch.device(ARGS.device)
SHAPES = [(3, 4, 37)] if ARGS.small else [(8, 16, 256), (64, 8, 32_000), (64, 4, 128_256)]
"""(batch, K, vocab) per row of the table."""


def timed(fn) -> float:
    """Median milliseconds per call."""
    if DEVICE.type == "cuda":
        import triton.testing

        return triton.testing.do_bench(fn, warmup=5, rep=ARGS.repeats, return_mode="median")
    fn()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def inputs(batch, k, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(max(k // 2, 0), k + 1, (batch,), generator=g)
    counts[0] = 0
    total = int(counts.sum())
    logits = torch.randn(total, vocab, generator=g) * 2
    probs = torch.softmax(logits * 0.5, -1)
    q = torch.softmax(logits * 0.5 + torch.randn(total, vocab, generator=g), -1)
    drafts = torch.multinomial(q, 1, generator=g).squeeze(1).to(torch.int32)
    cu = torch.zeros(batch + 1, dtype=torch.long)
    cu[1:] = counts.cumsum(0)
    greedy = torch.rand(batch, generator=g) < 0.25
    uniforms = torch.rand(total, generator=g)
    high = torch.rand(total, generator=g) < 0.5
    window = torch.minimum(torch.full((batch,), 6), (counts - 1).clamp(min=0)).to(torch.int32)
    rates = torch.rand(k, generator=g)
    t2d = torch.randperm(vocab, generator=g)
    t2d[torch.rand(vocab, generator=g) < 0.2] = -1
    rows = torch.randint(0, max(total, 1), (batch,), generator=g)
    scale = torch.rand(batch, generator=g)
    u_rows = torch.rand(batch, generator=g)
    move = lambda t: t.to(DEVICE)  # noqa: E731
    return {
        "accept": tuple(map(move, (drafts, cu, probs.argmax(-1), probs, q, uniforms, greedy))),
        "one_hot": tuple(map(move, (drafts, cu, probs.argmax(-1), probs))) + (None,) + tuple(map(move, (uniforms, greedy))),
        "fly": tuple(map(move, (high, window))),
        "synthetic": tuple(map(move, (cu, rates, uniforms))),
        "recover": tuple(map(move, (probs, q, drafts, rows, scale, u_rows))),
        "lift": (move(q), move(t2d)),
        "logits": logits,
        "counts": counts.tolist(),
        "drafts": drafts,
    }


def same(a, b) -> bool:
    if isinstance(a, tuple):
        return all(same(x, y) for x, y in zip(a, b))
    if a.is_floating_point():
        return torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    return torch.equal(a, b)


def checks(data):
    acc, one_hot, fly, syn, rec = data["accept"], data["one_hot"], data["fly"], data["synthetic"], data["recover"]
    return {
        "accept_standard": lambda m: m.accept_standard(*acc),
        "accept_standard one-hot": lambda m: m.accept_standard(*one_hot),
        "accept_block": lambda m: m.accept_block(*acc),
        "accept_block one-hot": lambda m: m.accept_block(*one_hot),
        "accept_fly": lambda m: m.accept_fly(*acc, *fly),
        "accept_synthetic": lambda m: m.accept_synthetic(*syn),
        "recover residual": lambda m: m.recover(*rec, True),
        "recover one-hot": lambda m: m.recover(rec[0], None, *rec[2:], True),
        "recover target": lambda m: m.recover(*rec, False),
        "lift_probs": lambda m: m.lift_probs(*data["lift"]),
    }


def end_to_end(data, method):
    counts = data["counts"]
    batch = len(counts)
    temperature = torch.tensor([0.0 if r % 4 == 0 else 0.9 for r in range(batch)], device=DEVICE)
    options = {"acceptance_length": 2.5} if method == "synthetic" else {}
    q = data["recover"][1]

    def run(backend):
        return rejection_sample(data["drafts"].to(DEVICE), counts, data["logits"].to(DEVICE),
                                torch.zeros(batch, dtype=torch.int32, device=DEVICE), temperature, draft_probs=q,
                                generators=[torch.Generator(device=DEVICE).manual_seed(r) for r in range(batch)],
                                method=method, backend=backend, **options)

    return run


def main() -> int:
    warnings.simplefilter("ignore")
    name = torch.cuda.get_device_name() if DEVICE.type == "cuda" else "CPU (Triton interpreter)"
    print(f"{name}; torch {torch.__version__}")
    print(f"{'kernel':<26} {'batch,K,vocab':<16} {'match':<6} {'torch ms':>9} {'triton ms':>10} {'speed-up':>9}")
    failures = 0
    for batch, k, vocab in SHAPES:
        data = inputs(batch, k, vocab)
        cases = {name: (lambda fn=fn: (fn(reference), fn(tk)), fn) for name, fn in checks(data).items()}
        for method in ("standard", "block", "fly", "synthetic"):
            run = end_to_end(data, method)
            cases[f"rejection_sample {method}"] = (lambda run=run: (run("torch"), run("triton")), None)
        for label, (pair, fn) in cases.items():
            try:
                ref_out, tri_out = pair()
                ok = same(ref_out, tri_out)
                if fn is not None:
                    ref_ms, tri_ms = timed(lambda: fn(reference)), timed(lambda: fn(tk))
                else:
                    run = end_to_end(data, label.split()[-1])
                    ref_ms, tri_ms = timed(lambda: run("torch")), timed(lambda: run("triton"))
                line = f"{ref_ms:>9.3f} {tri_ms:>10.3f} {ref_ms / tri_ms:>8.1f}x"
            except Exception as error:  # report every kernel, even after one fails to build
                ok, line = False, f"error: {type(error).__name__}: {str(error).splitlines()[0][:80]}"
            failures += not ok
            print(f"{label:<26} {f'{batch},{k},{vocab}':<16} {'yes' if ok else 'NO':<6} {line}", flush=True)
    print("all kernels match their references" if not failures else f"{failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
