"""How far each weight format moves SmolLM2 from its float32 self: next-token agreement, KL, perplexity.

A quantised target is another model: speculation is lossless with respect to it, not to the bf16
or float32 one. This script measures how much another: every mode runs the same windows of text
teacher-forced (``LlamaModel.forward_batch``) and is compared position by position with float32
(the GGUF's Q4_1 weights dequantised exactly): top-1 agreement, mean KL(float32 || mode) in nats
and perplexity of the text. Text: ``--windows`` windows of ``--length`` tokens from the held-out
Python stdlib files (``specpath_engine.corpus``) and the same number of chat turns (the demo's
chat prompts answered by the float32 model, ChatML). Not part of the tests; timing plays no part.

    python benchmarks/quantization_quality.py --model smollm2-135m
"""

from __future__ import annotations

import argparse
import json

MODES = {
    "fp32": {"dtype": "float32"},
    "bf16": {"dtype": "bfloat16"},
    "int8 (bf16)": {"dtype": "bfloat16", "quantization": "int8"},
    "int4 (bf16)": {"dtype": "bfloat16", "quantization": "int4"},
    "int4 (fp32)": {"dtype": "float32", "quantization": "int4"},
}
"""Mode -> LLM arguments; fp32 is the reference."""


def windows(llm, count: int, length: int) -> list[tuple[str, list[int]]]:
    """(kind, ids) of ``count`` stdlib windows and ``count`` chat turns, each ``length`` tokens."""
    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.corpus import read_heldout_asset
    from specpath_engine.llm import SamplingParams

    tok = llm.tokenizer
    out = []
    for _, text in read_heldout_asset()[:count]:
        ids = tok.encode(text.decode("utf-8", "replace"))
        if len(ids) >= length:
            out.append(("code", ids[:length]))
    chats = [p for kind, p in REAL_DEMO_PROMPTS if kind == "chat"]
    params = SamplingParams(temperature=0.0, max_tokens=length, ignore_eos=True)
    for i in range(count):
        turn = llm.chat(chats[i % len(chats)], params)[0]  # a message list
        ids = list(turn.prompt_token_ids) + list(turn.token_ids)
        out.append(("chat", ids[:length]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--windows", type=int, default=4, help="windows of each kind")
    ap.add_argument("--length", type=int, default=192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    from specpath_engine.llm import LLM

    torch.set_num_threads(args.threads)
    engines = {mode: LLM(args.model, None, max_model_len=1024, num_threads=args.threads, **kw) for mode, kw in MODES.items()}
    texts = windows(engines["fp32"], args.windows, args.length)
    rows = []
    with torch.inference_mode():
        ref = [torch.log_softmax(engines["fp32"].model.forward_batch(torch.tensor([ids])).float()[0, :-1], -1)
               for _, ids in texts]
        for mode, llm in engines.items():
            agree = kl = nll = n = 0.0
            by_kind: dict[str, list[float]] = {}
            for (kind, ids), r in zip(texts, ref):
                logp = torch.log_softmax(llm.model.forward_batch(torch.tensor([ids])).float()[0, :-1], -1)
                hits = (logp.argmax(-1) == r.argmax(-1)).float()
                agree += float(hits.sum())
                kl += float((r.exp() * (r - logp)).sum())
                nll -= float(logp.gather(-1, torch.tensor(ids[1:])[:, None]).sum())
                n += len(ids) - 1
                by_kind.setdefault(kind, []).append(float(hits.mean()))
            rows.append({"mode": mode, "top1_agreement_with_fp32": agree / n, "kl_from_fp32": kl / n,
                         "perplexity": float(torch.tensor(nll / n).exp()),
                         "agreement_by_window": {k: [round(v, 3) for v in vs] for k, vs in by_kind.items()}})
    print(f"{args.model}: {len(texts)} windows x {args.length} tokens ({args.windows} stdlib code, {args.windows} chat), "
          "teacher forced")
    print(f"{'mode':<13}{'top-1 = fp32':>14}{'KL (nats)':>12}{'perplexity':>12}  per window (code | chat)")
    for r in rows:
        w = r["agreement_by_window"]
        print(f"{r['mode']:<13}{r['top1_agreement_with_fp32']:>14.4f}{r['kl_from_fp32']:>12.5f}{r['perplexity']:>12.3f}  "
              f"{' '.join(f'{v:.3f}' for v in w.get('code', []))} | {' '.join(f'{v:.3f}' for v in w.get('chat', []))}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
