"""draft_model (autoregressive, PARD, heterogeneous vocabulary) against plain decoding, in one run.

Workload and table: the benchmark harness (:mod:`specpath_engine.harness`: the demo prompts,
batch 1, greedy, the shipped drafts, interleaved rounds after a quiet-machine gate), plus the share
of wall time spent in the drafter's ``propose``.

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

from specpath_engine import harness


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

    from specpath_engine.model import LlamaModel
    from specpath_drafting.kv import DrafterKV

    model = LlamaModel.from_pretrained(path)
    cfg = model.config
    kv = DrafterKV(num_layers=cfg.num_hidden_layers, num_kv_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
                   row_len=512, num_rows=1, dtype=torch.float32, device="cpu")
    row = kv.row("r")
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            start = time.perf_counter()
            attention = kv.row_attention([row], [300], [1])
            model.forward(torch.zeros(1, dtype=torch.long), attention.positions, attention)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated subset: baseline,ar,pard,tli,ngram")
    parser.add_argument("--drafts", help="folder with ar/, pard/, bpe/ drafts (default: the shipped ones)")
    harness.add_benchmark_arguments(parser)
    args = parser.parse_args()

    from specpath_engine.model import default_model_path

    only = set(args.only.split(",")) | {"baseline"} if args.only else None
    runs = configurations(only, args.drafts)
    spent: dict[str, list[float]] = {}

    def time_the_drafter(name: str, llm) -> None:
        spent[name] = [0.0]
        speculator = llm.speculator
        if speculator is None:
            return
        propose = speculator.propose

        def timed(batch, propose=propose, box=spent[name]):
            start = time.perf_counter()
            out = propose(batch)
            box[0] += time.perf_counter() - start
            return out

        speculator.propose = timed

    columns = (*harness.BENCHMARK_COLUMNS[:-1],
               ("draft%", lambda r: f"{100 * spent[r['method']][0] / r['seconds']:.1f}%"),
               harness.BENCHMARK_COLUMNS[-1])
    rows = harness.run_benchmark(args, runs, columns=columns, instrument=time_the_drafter)
    target = args.model or str(default_model_path())
    costs = {"target": per_call_cost(target, target)}
    for name, config in runs:
        kind = {"ar": "autoregressive", "tli": "heterogeneous"}.get(name.split()[0])
        if kind and kind not in costs:
            costs[kind] = per_call_cost(config["model"], target)
    print("per-call cost (one decode token at position 300): " + ", ".join(
        f"{k} {1000 * v:.2f} ms" for k, v in costs.items()))
    for kind in ("autoregressive", "heterogeneous"):
        if kind in costs:
            print(f"draft/target cost ratio ({kind} draft): {costs[kind] / costs['target']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rows": rows, "per_call_cost_s": costs,
                       "draft_time_share": {r["method"]: spent[r["method"]][0] / r["seconds"] for r in rows}},
                      fh, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
