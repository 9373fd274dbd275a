"""freqgram against prompt lookup (ngram) and plain decoding, side by side, in one run.

Greedy decoding on specpath's embedded default model, prompts cut from its held-out corpus
(Python source it never trained on). Prints tokens/s, the ratio to plain decoding and the mean
tokens per target pass, the mean acceptance length of steps that had drafts and the share of
drafts accepted. Every configuration must emit the same tokens as plain decoding; the script
checks it.

    python benchmarks/bench_freqgram.py [--prompts 8] [--prompt-bytes 384] [--max-tokens 128] [-k 4] [--max-num-seqs 1]
"""

from __future__ import annotations

import argparse
import time


def prompts_from_heldout(count: int, size: int) -> list[str]:
    from specpath_engine.corpus import read_heldout_asset

    out = []
    for _name, data in read_heldout_asset():
        text = data.decode("utf-8", errors="ignore")
        cut = len(text) // 3  # mid-file: the code there has context to repeat
        out.append(text[cut:cut + size])
        if len(out) == count:
            break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-bytes", type=int, default=384)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-num-seqs", type=int, default=1,
                        help="requests decoded together (1: one at a time, the latency-bound case)")
    args = parser.parse_args()

    from specpath_engine.llm import LLM, SamplingParams

    prompts = prompts_from_heldout(args.prompts, args.prompt_bytes)
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    configs = {
        "plain": None,
        "ngram": {"method": "ngram", "num_speculative_tokens": args.k},
        "ngram (min 1, max 3)": {"method": "ngram", "num_speculative_tokens": args.k,
                                 "prompt_lookup_min": 1, "prompt_lookup_max": 3},
        "freqgram": {"method": "freqgram", "num_speculative_tokens": args.k},
        "freqgram (max_order 5)": {"method": "freqgram", "num_speculative_tokens": args.k,
                                   "speculator_options": {"max_order": 5}},
    }
    results, reference = {}, None
    for name, config in configs.items():
        llm = LLM(None, config, num_threads=1, max_num_seqs=args.max_num_seqs)
        llm.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=8))  # warm-up
        start = time.perf_counter()
        outputs = llm.generate(prompts, params)
        elapsed = time.perf_counter() - start
        tokens = [o.token_ids for o in outputs]
        if reference is None:
            reference = tokens
        identical = tokens == reference
        m = llm.metrics
        results[name] = (sum(map(len, tokens)) / elapsed, m.num_generated_tokens / max(m.num_steps, 1),
                         m.mean_acceptance_length, m.acceptance_rate, identical)

    plain = results["plain"][0]
    print(f"{len(prompts)} prompts x {args.max_tokens} tokens, K={args.k}, greedy, max_num_seqs={args.max_num_seqs}, "
          "embedded default model, 1 thread")
    print(f"{'config':<24}{'tok/s':>8}{'vs plain':>10}{'tok/pass':>10}{'tau':>7}{'accepted':>10}  same tokens")
    for name, (tps, per_pass, tau, rate, identical) in results.items():
        print(f"{name:<24}{tps:>8.1f}{tps / plain:>9.2f}x{per_pass:>10.2f}{tau:>7.2f}{rate:>9.0%}  "
              f"{'yes' if identical else 'NO'}")
    print("tok/pass: generated tokens per target forward pass; tau: tokens per verification step that had "
          "drafts (bonus included); accepted: share of drafted tokens accepted")


if __name__ == "__main__":
    main()
