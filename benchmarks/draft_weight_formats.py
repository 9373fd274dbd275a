"""An int8 drafter's native propose with its weights in one format or two, side by side.

Shipped model-based drafters run int8 weight-only; where the CPU has AMX tiles, the weights an
EAGLE-3 head or MTP module's native propose reads also keep a tile copy (dual weights,
``specpath_engine.modeling.native.TILES_FROM_ROWS``): passes of few rows take int8, passes of
many the tiles. This times ``NativeKernels.draft_propose_batch`` (the whole call a drafting step
makes) for the shipped SmolLM2-135M drafters at batch 1 and 8 and K = 1 and 4, each request with
``--new`` newly verified positions to ingest, with the copies switched off (int8 only:
``use_tiles_from(head, None)``) and on (from ``TILES_FROM_ROWS`` rows, and from each of
``--also-from``), on the same head, interleaved call by call (the order alternating), medians
over ``--reps`` calls. Between calls ``--evict-mb`` of memory is streamed
(not timed), as the target's step does to the drafter's weights in the caches. Prints the load
average before and after and the CPU. With ``--generate N`` each drafter also generates N tokens
(greedy, EOS ignored) for every batch size's worth of built-in prompts at once, end to end, the
formats alternating generation by generation (``--rounds`` each; tokens per second, medians). Not
part of the tests.

    python benchmarks/draft_weight_formats.py [--methods eagle3,mtp] [--threads 1] [--reps 40]
        [--new 1] [--also-from 2,3] [--generate 64 --rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def cpu_name() -> str:
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3,mtp")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--ks", default="1,4")
    ap.add_argument("--new", type=int, default=1, help="newly verified positions each request ingests per call")
    ap.add_argument("--history", type=int, default=96, help="positions already in each request's drafter KV")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--evict-mb", type=int, default=256,
                    help="memory streamed between calls (0: none; default: about the bf16 target's weights)")
    ap.add_argument("--also-from", default="",
                    help="more thresholds to time (rows from which the copies are taken, comma-separated): a "
                         "column each, to check TILES_FROM_ROWS")
    ap.add_argument("--generate", type=int, default=0, help="also time end-to-end generation of this many tokens")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import numpy as np
    import torch

    from specpath_drafting.testing import tile_copy_bytes
    from specpath_engine.llm import LLM
    from specpath_engine.modeling.native import TILES_FROM_ROWS, kernels, use_tiles_from

    torch.set_num_threads(args.threads)
    native = kernels()
    if native is None or not native.tiles:
        print("needs the native kernels with AMX tiles (SPECPATH_AMX unset) to compare the formats")
        return 1
    batches, ks = [int(b) for b in args.batches.split(",")], [int(k) for k in args.ks.split(",")]
    evict = torch.zeros(args.evict_mb * 2**18, dtype=torch.float32) if args.evict_mb else None
    load_before = os.getloadavg()
    rows, generated = [], []
    modes = [None, TILES_FROM_ROWS, *(int(r) for r in args.also_from.split(",") if r)]
    """None: int8 only; a number: the tile copies from that many rows"""
    for method in args.methods.split(","):
        llm = LLM("smollm2-135m", {"method": method, "num_speculative_tokens": max(ks)}, dtype="bfloat16",
                  num_threads=args.threads, max_num_seqs=max(batches))
        sp = llm.speculator
        head, hc = sp._chain_head, sp.head.config
        if not hasattr(head, "linears"):
            print(f"{method}: no native propose here")
            continue
        extra = tile_copy_bytes(sp)
        torch.manual_seed(0)
        rotary = sp.head.rotary
        for batch in batches:
            for k in ks:
                n, start = args.new, args.history
                plan = np.array([[n] * batch, list(range(batch)), [k] * batch,
                                 [r * sp.row_len for r in range(batch)], [start] * batch, [-1] * batch], dtype=np.int64)
                taps = (2 * torch.randn(batch * n, hc.num_taps * (hc.target_hidden_size or hc.hidden_size))).to(
                    torch.bfloat16)
                ids = torch.randint(0, hc.vocab_size, (batch * n,))
                times: dict[int | None, list[float]] = {mode: [] for mode in modes}
                for rep in range(args.reps + 3):
                    for mode in (modes if rep % 2 else modes[::-1]):
                        use_tiles_from(head, mode)
                        if evict is not None:
                            evict.add_(1.0)
                        t0 = time.perf_counter()
                        native.draft_propose_batch(head, taps, ids, plan, sp.last_hidden, hc.num_attention_heads,
                                                   hc.num_key_value_heads, hc.head_dim, sp.kv.keys[0],
                                                   sp.kv.values[0], rotary.cos_cached, rotary.sin_cached)
                        if rep >= 3:  # warm-up calls dropped
                            times[mode].append(time.perf_counter() - t0)
                use_tiles_from(head, TILES_FROM_ROWS)
                rows.append((method, batch, k, [1e3 * statistics.median(times[m]) for m in modes], extra))
        for batch in batches if args.generate else ():
            from specpath_engine.harness import DEMO_PROMPTS
            from specpath_engine.llm import SamplingParams

            prompts = [DEMO_PROMPTS[i % len(DEMO_PROMPTS)] for i in range(batch)]
            params = SamplingParams(temperature=0.0, max_tokens=args.generate, ignore_eos=True)
            rates: dict[int | None, list[float]] = {None: [], TILES_FROM_ROWS: []}
            for rnd in range(args.rounds + 1):
                for mode in ((None, TILES_FROM_ROWS) if rnd % 2 else (TILES_FROM_ROWS, None)):
                    use_tiles_from(sp._chain_head, mode)
                    t0 = time.perf_counter()
                    outs = llm.generate(prompts, params)
                    if rnd:  # the first round warms up
                        rates[mode].append(sum(len(o.token_ids) for o in outs) / (time.perf_counter() - t0))
            use_tiles_from(sp._chain_head, TILES_FROM_ROWS)
            generated.append((method, batch, statistics.median(rates[None]), statistics.median(rates[TILES_FROM_ROWS])))
    load_after = os.getloadavg()
    print(f"CPU: {cpu_name()}; threads {args.threads}; load {load_before[0]:.2f} before, {load_after[0]:.2f} after "
          f"(1-min); {args.reps} calls per cell, medians; {args.new} new position(s) a request; "
          f"{args.evict_mb} MB streamed between calls")
    others = "".join(f" {f'from {r} ms':>10}" for r in modes[2:])
    print(f"{'drafter':8} {'batch':>5} {'K':>2} {'int8 ms':>8} {'dual ms':>8} {'speed-up':>8}{others} {'tile copy MB':>12}")
    for method, batch, k, ms, extra in rows:
        more = "".join(f" {m:10.3f}" for m in ms[2:])
        print(f"{method:8} {batch:5d} {k:2d} {ms[0]:8.3f} {ms[1]:8.3f} {ms[0] / ms[1]:7.2f}x{more} {extra / 1e6:12.1f}")
    if generated:
        print(f"end to end, {args.generate} tokens a request, K = {max(ks)}, medians of {args.rounds} generations:")
        print(f"{'drafter':8} {'batch':>5} {'int8 tok/s':>10} {'dual tok/s':>10} {'speed-up':>8}")
        for method, batch, int8, dual in generated:
            print(f"{method:8} {batch:5d} {int8:10.1f} {dual:10.1f} {dual / int8:7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
