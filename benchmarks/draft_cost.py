"""What drafting costs next to a plain target step, per model-based drafter, in one run.

For each hidden-state/block drafter with its shipped SmolLM2 drafter (eagle3, mtp, dflash,
dspark, draft_model): SmolLM2-135M bf16, batch 1, ``--threads`` threads, fixed K (no adaptive
draft length, so every step drafts K). The drafter's ``propose`` is timed by wall clock around
each call (its ingest of the accepted tokens plus the K drafts) over a real ``--max-tokens``
generation (EOS ignored) on a couple of built-in prompts; the plain target step is the plain
engine's time per decoded token over the same prompts (prefill taken out: the time of a
one-token generation of the same prompt is subtracted). Prints per drafter the median propose
time (medians: a shared machine's bursts land in the mean), the plain step and their ratio (the issue's target: EAGLE-3 K=4 <= 0.10), with the load
average. Engines run interleaved, prompt by prompt, ``--rounds`` times; with ``--per-op-ingest``
each hidden-state drafter runs a second time with its ingest on the per-op path (the reference
the one-call native propose replaces), so both are timed under the same load; with ``--breakdown``
the native propose's own section timers (``draft_chain.c``) say per drafter where a call's time
goes (ingest input and layer pass, chain LM head, argmax and layer passes, and what is left to
Python around the call). Not part of the tests.

    python benchmarks/draft_cost.py [--methods eagle3,mtp] [--k 4] [--quantization int8|int4|none]
        [--target-quantization int4] [--per-op-ingest] [--bf16-activations] [--alone] [--breakdown]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

PROMPTS = (
    "def quicksort(items):\n    \"\"\"Sort a list of numbers with quicksort.\"\"\"\n",
    "Give me three tips for writing clear code.",
)
"""Two built-in prompts (a code completion and a chat-style request, as plain text)."""


def _timed_propose(speculator, samples: list[float]):
    """Wrap ``speculator.propose`` so each call that drafts appends its wall-clock seconds."""
    inner = speculator.propose

    def propose(batch):
        start = time.perf_counter()
        out = inner(batch)
        if any(r.max_draft_tokens > 0 for r in batch.requests):
            samples.append(time.perf_counter() - start)
        return out

    speculator.propose = propose


def _bf16_activations(speculator) -> int:
    """Put every int8 layer of ``speculator``'s modules back on bf16 activations (their native
    descriptors too); returns how many had int16 activations."""
    from torch import nn

    from specpath_engine.quantization import Int8Linear

    switched = 0
    for value in vars(speculator).values():
        if isinstance(value, nn.Module):
            for module in value.modules():
                if isinstance(module, Int8Linear) and module.int16_activations:
                    module.int16_activations = False
                    module.native_linear()
                    switched += 1
        elif hasattr(value, "propose") and hasattr(value, "spec"):  # a hybrid's drafter
            switched += _bf16_activations(value)
    return switched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="eagle3,mtp,dflash,dspark,draft_model")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--per-op-ingest", action="store_true",
                    help="also time each hidden-state drafter with its ingest on the per-op path (the native "
                         "propose off: the drafting loop before the ingest went native), side by side")
    ap.add_argument("--target-quantization", default=None,
                    help="the target's weight-only quantization (int8 / int4; default: bf16 as loaded): "
                         "the plain step and every speculator's target")
    ap.add_argument("--quantization", default=None,
                    help="speculative_config.quantization for every drafter ('none': as loaded; "
                         "default: the shipped drafter's own default)")
    ap.add_argument("--alone", action="store_true",
                    help="each drafter without the model-free companion its shipped config drafts beside it "
                         "(\"model_free_drafter\": {}): the drafter's own cost")
    ap.add_argument("--bf16-activations", action="store_true",
                    help="also run each drafter with its int8 layers on bf16 activations (the int8 kernel "
                         "before AVX512-VNNI's int16 one), side by side under the same load")
    ap.add_argument("--breakdown", action="store_true",
                    help="also print where a native propose's time goes (its C section timers, means per call)")
    args = ap.parse_args()

    import torch

    from specpath_engine.harness import WARM_UP_PROMPT
    from specpath_engine.llm import LLM, SamplingParams, drafter_quantization
    from specpath_engine.modeling.native import NativeKernels, kernels

    torch.set_num_threads(args.threads)

    def llm(config):
        return LLM("smollm2-135m", config, dtype="bfloat16", num_threads=args.threads, max_num_seqs=1,
                   quantization=args.target_quantization)

    engines = {"plain": llm(None)}
    samples: dict[str, list[float]] = {}
    for method in args.methods.split(","):
        config = {"method": method, "num_speculative_tokens": args.k, "draft_length_policy": "fixed"}
        if args.quantization is not None:
            config["quantization"] = args.quantization
        if args.alone:
            config["model_free_drafter"] = {}
        engines[method] = llm(config)
        samples[method] = []
        if args.per_op_ingest and hasattr(engines[method].speculator, "native_propose"):
            reference = f"{method}/per-op"
            engines[reference] = llm(config)
            engines[reference].speculator.native_propose = False
            samples[reference] = []
        if args.bf16_activations:
            reference = f"{method}/bf16-act"
            engines[reference] = llm(config)
            if _bf16_activations(engines[reference].speculator):
                samples[reference] = []
            else:
                del engines[reference]  # no int16 layers (no VNNI, or weights as loaded)
    warm = SamplingParams(max_tokens=8, ignore_eos=True)
    for engine in engines.values():
        engine.generate([WARM_UP_PROMPT], warm)
    for method in samples:
        _timed_propose(engines[method].speculator, samples[method])

    full = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    first = SamplingParams(max_tokens=1, ignore_eos=True)
    native = kernels() if args.breakdown else None
    sections = {name: [0.0] * 8 for name in samples}  # per drafter: draft_timers' sums over its runs
    if native is not None:
        native.draft_timers(True)
    load_before = os.getloadavg()[0]
    plain_steps: list[float] = []
    for _ in range(args.rounds):
        for prompt in PROMPTS:
            for name, engine in engines.items():
                if name == "plain":
                    start = time.perf_counter()
                    engine.generate([prompt], first)
                    prefill = time.perf_counter() - start
                    start = time.perf_counter()
                    engine.generate([prompt], full)
                    total = time.perf_counter() - start
                    plain_steps.append((total - prefill) / (args.max_tokens - 1))
                else:
                    before = native.draft_timers(True) if native is not None else None
                    engine.generate([prompt], full)
                    if before is not None:
                        after = native.draft_timers(True)
                        sections[name] = [s + b - a for s, a, b in zip(sections[name], before, after)]
    load_after = os.getloadavg()[0]
    if native is not None:
        native.draft_timers(False)

    step = statistics.median(plain_steps)
    print(f"plain target step: {step * 1e3:.2f} ms median over {len(plain_steps)} generations "
          f"(SmolLM2-135M {args.target_quantization or 'bf16'}, batch 1, {args.threads} threads)")
    for method, times in samples.items():
        spec = engines[method].engine_config.speculative_config
        propose = statistics.median(times)
        weights = drafter_quantization(spec, torch.bfloat16) or "as loaded"
        print(f"{method:14s} propose K={args.k}: {propose * 1e3:6.2f} ms median = {propose / step:5.3f} of a plain "
              f"step  (mean {statistics.mean(times) * 1e3:.2f} ms over {len(times)} calls; drafter weights "
              f"{weights})")
    for method, sums in sections.items():
        calls = sums[6]
        if native is None or not calls:
            continue
        parts = ", ".join(f"{label} {ns / calls / 1e3:.0f}" for label, ns in zip(NativeKernels.DRAFT_SECTIONS, sums))
        python = statistics.mean(samples[method]) * 1e3 - sums[5] / calls / 1e6  # a mean: the sums are
        print(f"  {method} native propose, us per call (means over {calls:.0f} calls, {sums[7] / calls:.1f} "
              f"ingested positions each): {parts}; around the call (Python) ~{python * 1e3:.0f}")
    print(f"{len(PROMPTS)} prompts x {args.max_tokens} tokens, {args.rounds} round(s); load average "
          f"{load_before:.2f} before, {load_after:.2f} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
