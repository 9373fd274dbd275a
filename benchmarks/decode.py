"""Baseline decode speed: specpath's reference engine vs ``transformers`` ``generate()``.

Same checkpoint (the embedded default model when present, else a random Llama of the same
shape saved to a temporary directory), same prompts, greedy, exactly ``--new-tokens`` new
tokens (EOS ignored), no speculation, batch 1 and batch 8, reps interleaved so machine noise
hits both engines alike. Prints one table with both engines side by side and their ratio, and
checks that the two produce the same tokens at batch 1.

    python benchmarks/decode.py [--model DIR] [--new-tokens 128] [--reps 3] [--threads 1]
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

    from specpath.engine.model import default_model_path

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
    from specpath.engine.model import LlamaConfig, LlamaModel, default_model_path

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


def _hf_generate(model, prompts: list[list[int]], new_tokens: int) -> tuple[float, list[list[int]]]:
    ids = torch.tensor(prompts)  # equal-length prompts: no padding needed
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return time.perf_counter() - start, out[:, ids.shape[1]:].tolist()


def _ours(llm, prompts: list[list[int]], new_tokens: int) -> tuple[float, list[list[int]]]:
    from specpath.engine.request import SamplingParams

    start = time.perf_counter()
    outs = llm.generate(prompts, SamplingParams(max_tokens=new_tokens, ignore_eos=True))
    return time.perf_counter() - start, [o.token_ids for o in outs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="checkpoint directory (default: the embedded model)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both engines")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    from specpath.engine.llm import LLM

    hf_logging.set_verbosity_error()
    batches = [int(b) for b in args.batches.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = _checkpoint(args.model, tmp)
        hf = LlamaForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
        ours = LLM(str(path), max_num_seqs=max(batches), max_num_batched_tokens=max(batches) * args.prompt_len)
        prompts = _prompts(max(batches), args.prompt_len)
        times: dict[tuple[str, int], list[float]] = {}
        outputs: dict[tuple[str, int], list[list[int]]] = {}
        for b in batches:  # warm-up
            _hf_generate(hf, prompts[:b], 4)
            _ours(ours, prompts[:b], 4)
        for _ in range(args.reps):
            for b in batches:
                for name, fn, model in (("transformers", _hf_generate, hf), ("specpath", _ours, ours)):
                    dt, toks = fn(model, prompts[:b], args.new_tokens)
                    times.setdefault((name, b), []).append(dt)
                    outputs[(name, b)] = toks

    rows = []
    for b in batches:
        hf_tps = b * args.new_tokens / statistics.median(times[("transformers", b)])
        sp_tps = b * args.new_tokens / statistics.median(times[("specpath", b)])
        same = outputs[("transformers", b)] == outputs[("specpath", b)]
        rows.append({"batch": b, "transformers_tok_s": hf_tps, "specpath_tok_s": sp_tps,
                     "ratio": sp_tps / hf_tps, "identical_tokens": same})
    if args.json:
        print(json.dumps({"model": str(path), "new_tokens": args.new_tokens, "prompt_len": args.prompt_len,
                          "threads": args.threads, "reps": args.reps, "rows": rows}))
        return 0
    print(f"model: {path}  prompt {args.prompt_len} tokens, {args.new_tokens} new tokens, greedy, "
          f"{args.threads} thread(s), median of {args.reps} interleaved reps")
    print(f"{'batch':>5}  {'transformers tok/s':>18}  {'specpath tok/s':>14}  {'specpath / HF':>13}  identical tokens")
    for r in rows:
        print(f"{r['batch']:>5}  {r['transformers_tok_s']:>18.1f}  {r['specpath_tok_s']:>14.1f}  "
              f"{r['ratio']:>12.2f}x  {'yes' if r['identical_tokens'] else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
