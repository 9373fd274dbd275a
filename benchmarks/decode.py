"""Baseline decode speed: specpath's reference engine vs ``transformers`` ``generate()``.

Same checkpoint (the embedded default model when present, else a random Llama of the same
shape saved to a temporary directory), same prompts, greedy, exactly ``--new-tokens`` new
tokens (EOS ignored), no speculation, batch 1 and batch 8, reps interleaved so machine noise
hits both engines alike. Prints one table with both engines side by side and their ratio (by wall
time, and by process CPU time, which a busy shared machine disturbs less), and
checks that the two produce the same tokens.

With ``--lookup K`` (and the ``specpath-ngram`` plugin installed) it adds one more pair at
batch 1: ``transformers``' prompt lookup (``prompt_lookup_num_tokens=K``, its default 2-gram
match) against specpath's ``ngram`` method with the same K and a 2..5-gram window; speedups are
over each engine's own plain greedy run and over transformers' plain greedy.

    python benchmarks/decode.py [--model DIR] [--new-tokens 128] [--reps 3] [--threads 1] [--lookup 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


def _prompts(n: int, length: int) -> list[list[int]]:
    """``length``-byte windows of the shipped held-out stdlib files (one per file), else of this file."""
    import gzip

    from specpath_engine.model import default_model_path

    heldout = default_model_path().parent / "stdlib_heldout.jsonl.gz"
    texts = []
    if heldout.is_file():
        with gzip.open(heldout, "rt", encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in f]
    texts = [t for t in texts if len(t.encode("utf-8")) > 2 * length] or [Path(__file__).read_text()] * n
    out = []
    for i in range(n):
        data = texts[i % len(texts)].encode("utf-8")
        start = len(data) // 3
        out.append([t if t else 32 for t in data[start : start + length]])
    return out


def _checkpoint(model: str | None, tmp: str) -> Path:
    from specpath_engine.model import LlamaModel, default_model_path
    from specpath_engine.model_config import LlamaConfig

    if model is not None:
        return Path(model)
    if (default_model_path() / "config.json").is_file():
        return default_model_path()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=192, intermediate_size=512, num_hidden_layers=6,
                         num_attention_heads=6, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
                         tie_word_embeddings=True)
    path = Path(tmp) / "random_llama"
    LlamaModel(config).save_pretrained(path)
    return path


def _hf_generate(model, prompts: list[list[int]], new_tokens: int, **extra) -> tuple[float, float, list[list[int]]]:
    ids = torch.tensor(prompts)  # equal-length prompts: no padding needed
    start, cpu = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, pad_token_id=0, **extra)
    return time.perf_counter() - start, time.process_time() - cpu, out[:, ids.shape[1]:].tolist()


def _ours(llm, prompts: list[list[int]], new_tokens: int) -> tuple[float, float, list[list[int]]]:
    from specpath_engine.request import SamplingParams

    start, cpu = time.perf_counter(), time.process_time()
    outs = llm.generate(prompts, SamplingParams(max_tokens=new_tokens, ignore_eos=True))
    return time.perf_counter() - start, time.process_time() - cpu, [o.token_ids for o in outs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="checkpoint directory (default: the embedded model)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both engines")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--lookup", type=int, default=0, metavar="K",
                        help="also compare prompt lookup with K drafts at batch 1 (needs specpath-ngram)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    from specpath_engine.llm import LLM

    hf_logging.set_verbosity_error()
    batches = [int(b) for b in args.batches.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = _checkpoint(args.model, tmp)
        hf = LlamaForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
        ours = LLM(str(path), max_num_seqs=max(batches), max_num_batched_tokens=max(batches) * args.prompt_len)
        prompts = _prompts(max(batches), args.prompt_len)
        times: dict[tuple[str, int], list[float]] = {}
        cpu_times: dict[tuple[str, int], list[float]] = {}
        outputs: dict[tuple[str, int], list[list[int]]] = {}
        runs = []
        for b in batches:
            runs.append(("transformers", b, lambda p, n: _hf_generate(hf, p, n)))
            runs.append(("specpath", b, lambda p, n: _ours(ours, p, n)))
        if args.lookup:
            lookup = LLM(str(path), {"method": "ngram", "num_speculative_tokens": args.lookup,
                                     "prompt_lookup_min": 2, "prompt_lookup_max": 5})
            runs.append(("transformers+lookup", 1,
                         lambda p, n: _hf_generate(hf, p, n, prompt_lookup_num_tokens=args.lookup)))
            runs.append(("specpath+ngram", 1, lambda p, n: _ours(lookup, p, n)))
        for _, b, fn in runs:  # warm-up
            fn(prompts[:b], 4)
        for _ in range(args.reps):
            for name, b, fn in runs:
                if name.endswith(("lookup", "ngram")):  # batch 1, one prompt after another
                    dt, dc, toks = 0.0, 0.0, []
                    for p in prompts:
                        t, c, out = fn([p], args.new_tokens)
                        dt, dc = dt + t, dc + c
                        toks += out
                    dt, dc = dt / len(prompts), dc / len(prompts)
                else:
                    dt, dc, toks = fn(prompts[:b], args.new_tokens)
                times.setdefault((name, b), []).append(dt)
                cpu_times.setdefault((name, b), []).append(dc)
                outputs[(name, b)] = toks

    def tps(name: str, b: int, clock: dict | None = None) -> float:
        return b * args.new_tokens / statistics.median((clock or times)[(name, b)])

    def row(mode: str, hf_name: str, sp_name: str, b: int) -> dict:
        return {"mode": mode, "batch": b,
                "transformers_tok_s": tps(hf_name, b), "specpath_tok_s": tps(sp_name, b),
                "ratio": tps(sp_name, b) / tps(hf_name, b),
                "cpu_ratio": tps(sp_name, b, cpu_times) / tps(hf_name, b, cpu_times),
                "identical_tokens": outputs[(hf_name, b)] == outputs[(sp_name, b)]}

    rows = [row("greedy", "transformers", "specpath", b) for b in batches]
    if args.lookup:
        r = row(f"prompt lookup K={args.lookup}", "transformers+lookup", "specpath+ngram", 1)
        if 1 in batches:
            r["transformers_speedup"] = tps("transformers+lookup", 1) / tps("transformers", 1)
            r["specpath_speedup_over_hf_greedy"] = tps("specpath+ngram", 1) / tps("transformers", 1)
            r["specpath_speedup_over_own_greedy"] = tps("specpath+ngram", 1) / tps("specpath", 1)
        rows.append(r)
    if args.json:
        print(json.dumps({"model": str(path), "new_tokens": args.new_tokens, "prompt_len": args.prompt_len,
                          "threads": args.threads, "reps": args.reps, "rows": rows}))
        return 0
    print(f"model: {path}  prompt {args.prompt_len} tokens, {args.new_tokens} new tokens, greedy, "
          f"{args.threads} thread(s), median of {args.reps} interleaved reps")
    print(f"{'mode':<20} {'batch':>5}  {'transformers tok/s':>18}  {'specpath tok/s':>14}  {'specpath / HF':>13}  "
          f"{'same, CPU time':>14}  identical tokens")
    for r in rows:
        print(f"{r['mode']:<20} {r['batch']:>5}  {r['transformers_tok_s']:>18.1f}  {r['specpath_tok_s']:>14.1f}  "
              f"{r['ratio']:>12.2f}x  {r['cpu_ratio']:>13.2f}x  {'yes' if r['identical_tokens'] else 'no'}")
    for r in rows:
        if "transformers_speedup" in r:
            print(f"prompt lookup speedup over transformers greedy: transformers {r['transformers_speedup']:.2f}x, "
                  f"specpath {r['specpath_speedup_over_hf_greedy']:.2f}x "
                  f"({r['specpath_speedup_over_own_greedy']:.2f}x over specpath greedy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
