"""draft_model (autoregressive, PARD, heterogeneous vocabulary) against plain decoding, in one run.

Workload: ``specpath demo``'s code-completion prompts (``specpath.engine.cli_run.DEMO_PROMPTS``),
batch 1 (one prompt at a time), greedy, ``--max-tokens`` each, on the embedded default target with
the shipped drafts, one torch thread. Every configuration gets a warm-up, then ``--repeats``
rounds that interleave the configurations, so background load hits all alike. Printed per
configuration: τ (tokens per target step, bonus included), acceptance rate by draft position,
tokens/s and speedup over the baseline (median over rounds), the share of wall time spent in the
drafter's ``propose``, and whether the output equals the baseline's.

Also printed: the per-call cost of one draft forward against one target forward (one decode
token at position ~300, through the same contiguous-KV attention), i.e. the draft/target cost
ratio that decides whether a separate draft model can pay off on this CPU.

    python3 benchmarks/draft_model.py [--repeats 3] [--max-tokens 128] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def configurations(only: set[str] | None, drafts: str | None) -> list[tuple[str, dict | None]]:
    from specpath_draft_model.config import SHIPPED_DRAFTS, shipped_draft

    if drafts:
        ar, pard, bpe = (f"{drafts}/{SHIPPED_DRAFTS[k]}" for k in ("autoregressive", "parallel", "heterogeneous"))
    else:
        ar, pard, bpe = shipped_draft("autoregressive"), shipped_draft("parallel"), shipped_draft("heterogeneous")
    rows: list[tuple[str, dict | None]] = [("baseline", None)]
    for k in (2, 4, 6, 8):
        rows.append((f"ar K={k}", {"method": "draft_model", "model": ar, "num_speculative_tokens": k}))
    for k in (3, 4, 6, 8):
        rows.append((f"pard K={k}", {"method": "draft_model", "model": pard, "num_speculative_tokens": k,
                                     "parallel_drafting": True}))
    for k in (4, 6, 8):
        rows.append((f"tli K={k}", {"method": "draft_model", "model": bpe, "num_speculative_tokens": k,
                                    "use_heterogeneous_vocab": True}))
    rows.append(("ngram K=4 (reference)", {"method": "ngram", "num_speculative_tokens": 4}))
    return [r for r in rows if only is None or r[0].split()[0] in only]


def per_call_cost(path: str, target_path: str, repeats: int = 200) -> float:
    """Median seconds of one single-token forward at position 300 (contiguous KV)."""
    import torch

    from specpath.engine.model import LlamaModel
    from specpath_draft_model.kv import DraftKV

    model = LlamaModel.from_pretrained(path)
    cfg = model.config
    kv = DraftKV(num_layers=cfg.num_hidden_layers, num_kv_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
                 max_len=512, max_rows=1, dtype=torch.float32, device="cpu")
    row = kv.row("r")
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            start = time.perf_counter()
            attention = kv.attention([row], [300], [1])
            model.forward(torch.zeros(1, dtype=torch.long), attention.positions, attention)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", help="comma-separated subset: baseline,ar,pard,tli,ngram")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--model", help="target checkpoint (default: the embedded model)")
    parser.add_argument("--drafts", help="folder with ar/, pard/, bpe/ drafts (default: the shipped ones)")
    args = parser.parse_args()

    import torch

    from specpath.engine.cli_run import DEMO_PROMPTS
    from specpath.engine.llm import LLM, SamplingParams
    from specpath.engine.metrics import SpecMetrics
    from specpath.engine.model import default_model_path
    torch.set_num_threads(1)
    only = set(args.only.split(",")) | {"baseline"} if args.only else None
    runs = configurations(only, args.drafts)
    params = SamplingParams(max_tokens=args.max_tokens, ignore_eos=True)
    engines = []
    for name, config in runs:
        llm = LLM(args.model, config, num_threads=1)
        llm.generate([DEMO_PROMPTS[0]], SamplingParams(max_tokens=8, ignore_eos=True))  # warm-up
        spent = [0.0]
        speculator = llm.speculator
        if speculator is not None:  # time the drafter's share of each step
            propose = speculator.propose

            def timed(batch, propose=propose, spent=spent):
                start = time.perf_counter()
                out = propose(batch)
                spent[0] += time.perf_counter() - start
                return out

            speculator.propose = timed
        engines.append((name, config, llm, spent))

    speedups: dict[str, list[float]] = {name: [] for name, *_ in engines}
    last: dict[str, tuple] = {}
    for _ in range(args.repeats):
        round_tps = {}
        for name, config, llm, spent in engines:
            parts, tokens, elapsed = [], [], 0.0
            spent[0] = 0.0
            for prompt in DEMO_PROMPTS:
                start = time.perf_counter()
                out = llm.generate([prompt], params)[0]
                elapsed += time.perf_counter() - start
                parts.append(out.metrics)
                tokens.append(out.token_ids)
            total = SpecMetrics.total(parts, elapsed_s=elapsed)
            round_tps[name] = total.tokens_per_s
            last[name] = (total, tokens, spent[0] / elapsed)
        for name in round_tps:
            speedups[name].append(round_tps[name] / round_tps["baseline"])

    baseline_tokens = last["baseline"][1]
    rows = []
    for name, config, *_ in engines:
        total, tokens, draft_share = last[name]
        rows.append({
            "config": name,
            "tau": total.mean_acceptance_length,
            "acceptance_by_position": total.acceptance_rate_by_position,
            "tokens_per_s": total.tokens_per_s,
            "speedup_median": statistics.median(speedups[name]),
            "speedups": speedups[name],
            "target_steps": total.num_steps,
            "draft_time_share": draft_share,
            "identical": tokens == baseline_tokens,
        })
    target = args.model or str(default_model_path())
    costs = {"target": per_call_cost(target, target)}
    for name, config in runs:
        kind = {"ar": "autoregressive", "tli": "heterogeneous"}.get(name.split()[0])
        if kind and kind not in costs:
            costs[kind] = per_call_cost(config["model"], target)

    print(f"{len(DEMO_PROMPTS)} demo prompts x {args.max_tokens} tokens, batch 1, greedy, 1 thread, "
          f"{args.repeats} interleaved rounds")
    print(f"{'config':24} {'tau':>5} {'tok/s':>7} {'speedup':>8} {'steps':>6} {'draft%':>7} same  acceptance by position")
    for r in rows:
        rates = " ".join(f"{a:.2f}" for a in r["acceptance_by_position"]) or "-"
        print(f"{r['config']:24} {r['tau']:5.2f} {r['tokens_per_s']:7.0f} {r['speedup_median']:7.2f}x "
              f"{r['target_steps']:6d} {100 * r['draft_time_share']:6.1f}% {'yes' if r['identical'] else 'NO':4}  {rates}")
    print("per-call cost (one decode token at position 300): " + ", ".join(
        f"{k} {1000 * v:.2f} ms" for k, v in costs.items()))
    for kind in ("autoregressive", "heterogeneous"):
        if kind in costs:
            print(f"draft/target cost ratio ({kind} draft): {costs[kind] / costs['target']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "per_call_cost_s": costs}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
