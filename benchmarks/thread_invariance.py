"""Are a real model's logits the same bits at 1 and 2 threads? (the premise of run-time thread
adaptation, ``specpath_engine.adaptive_threads``).

SmolLM2-135M in bf16 on the native kernels and on torch's (oneDNN) kernels, and in float32 on
torch's, each through a prefill and decode- and verify-sized steps over the paged KV cache as
the engine runs them; then a greedy and a seeded sampled ``generate`` with the count switched
every other step against one at a fixed count. Printed per path: whether every logit agreed to
the bit, the largest difference, and whether the outputs matched::

    python benchmarks/thread_invariance.py                 # smollm2-135m
    python benchmarks/thread_invariance.py --model embedded

Adaptation runs only on the paths where this holds (bf16); float32 is shown for contrast.
"""

from __future__ import annotations

import argparse
import sys

import torch

PROMPT = "def quicksort(items):\n    \"\"\"Sort a list of numbers with quicksort.\"\"\"\n"


def logits_at(model, tokens: list[int], threads: int) -> list[torch.Tensor]:
    """The logits of a prefill of ``tokens`` then steps of 1, 5, 1, 8 and 3 tokens, at ``threads``."""
    from specpath_engine.attention import PagedAttention, build_attention_metadata
    from specpath_engine.kv_cache import KVCache

    torch.set_num_threads(threads)
    c = model.config
    dtype = next(model.parameters()).dtype
    cache = KVCache(num_layers=c.num_hidden_layers, num_blocks=16, block_size=16, num_kv_heads=c.num_key_value_heads,
                    head_dim=c.head_dim, dtype=dtype)
    groups = c.num_attention_heads // c.num_key_value_heads
    generator, history, out = torch.Generator().manual_seed(1), 0, []
    steps = [torch.tensor(tokens)] + [torch.randint(0, c.vocab_size, (n,), generator=generator) for n in (1, 5, 1, 8, 3)]
    for ids in steps:
        meta, positions = build_attention_metadata(block_tables=[list(range(16))], num_computed=[history],
                                                   num_query_tokens=[len(ids)], block_size=16, num_query_groups=groups)
        with torch.inference_mode():
            out.append(model(ids, positions, PagedAttention(cache, meta)).logits.clone())  # [n, vocab] fp32
        history += len(ids)
    return out


def outputs_while_switching(llm) -> bool:
    """Greedy and seeded outputs with the count switched every other step equal those at 1 thread."""
    from specpath_engine.adaptive_threads import ThreadAdapter
    from specpath_engine.llm import SamplingParams

    params = [SamplingParams(max_tokens=32, ignore_eos=True),
              SamplingParams(max_tokens=32, ignore_eos=True, temperature=0.8, top_p=0.95, seed=7)]
    saved = llm.engine.thread_adapter
    torch.set_num_threads(1)
    llm.engine.thread_adapter = None
    fixed = [llm.generate([PROMPT], p)[0].token_ids for p in params]
    llm.engine.thread_adapter = ThreadAdapter((2, 1), first_probe=1, window=1, win=1e9)
    switched = [llm.generate([PROMPT], p)[0].token_ids for p in params]
    llm.engine.thread_adapter = saved
    return fixed == switched


def check(model_name: str, kernels: str, dtype: str) -> str:
    from specpath_engine.llm import LLM
    from specpath_engine.modeling import native

    import contextlib

    with native.disabled() if kernels == "torch" else contextlib.nullcontext():
        llm = LLM(None if model_name == "embedded" else model_name, dtype=dtype, num_threads=1)
        tokens = llm.tokenizer.encode(PROMPT)
        one, two = logits_at(llm.model, tokens, 1), logits_at(llm.model, tokens, 2)
        same = all(torch.equal(a, b) for a, b in zip(one, two))
        worst = max(float((a - b).abs().max()) for a, b in zip(one, two))
        outputs = outputs_while_switching(llm)
    return (f"{model_name:<13} {kernels:<6} {dtype:<8} logits at 1 and 2 threads: "
            f"{'the same bits' if same else 'DIFFER'} (largest difference {worst:.3g}); "
            f"outputs switching every other step: {'the same' if outputs else 'DIFFER'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    rows = ([("native", "bfloat16"), ("torch", "bfloat16"), ("torch", "float32")] if args.model != "embedded"
            else [("torch", "float32")])
    for kernels, dtype in rows:
        print(check(args.model, kernels, dtype), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
