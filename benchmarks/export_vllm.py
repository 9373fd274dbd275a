"""Exported SmolLM2 drafters run natively in vLLM (CPU), against specpath on the same prompts.

For each drafter vLLM 0.32 has a module for (the EAGLE-3 head in vLLM's layout and as a
speculators checkpoint, the shared-embedding draft model as a standalone HF model):
``specpath export`` writes it, vLLM serves it with SmolLM2-135M (fp32, greedy, K=4, the same
prompt token ids), and the report compares vLLM's greedy output with specpath's plain output
and vLLM's τ / acceptance by position with specpath's own run of the original checkpoint::

    python benchmarks/export_vllm.py --vllm-python ~/.cache/specpath/venvs/vllm/bin/python

One file, two roles: run with ``--worker`` by the vLLM interpreter it imports only vLLM (one
``LLM`` per process; vLLM's engine core is a spawned process, hence the ``__main__`` guard),
and without it it drives specpath and starts one worker per drafter. Results: one JSON line
per drafter (``tests/export/test_export_vllm.py`` runs a short version when
``SPECPATH_VLLM_PYTHON`` is set).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "Write a Python function that checks whether a string is a palindrome.",
    "Write a Python function that sorts a list of numbers with bubble sort.",
    "Write a Python function that counts the words in a text file.",
]
"""Four code-writing chat requests (the chat template is applied by specpath's tokenizer)."""

DRAFTERS = {
    "eagle3-vllm": ("eagle3", "specpath_eagle3", "heads/eagle3-smollm2", "vllm"),
    "eagle3-speculators": ("eagle3", "specpath_eagle3", "heads/eagle3-smollm2", "speculators"),
    "draft_model-vllm": ("draft_model", "specpath_draft_model", "checkpoints/smollm2-shared", "vllm"),
}
"""label -> (method, plugin package, checkpoint under it, export format)."""

TARGET = "smollm2-135m"


# -- the vLLM side (imports only vllm) ------------------------------------------------------


def _metric(metrics, name):
    for m in metrics:
        if m.name == name:
            return list(m.values) if hasattr(m, "values") else m.value
    return None


def worker(args: argparse.Namespace) -> int:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    job = json.loads(Path(args.worker).read_text())
    options = dict(dtype="float32", max_model_len=1024, max_num_seqs=1, disable_log_stats=False, seed=0,
                   enforce_eager=True, skip_tokenizer_init=True)  # token ids in and out; no compile wait
    if job["format"] == "speculators":  # the checkpoint names its verifier: serve it as the model
        llm = LLM(model=job["draft"], **options)
    else:
        llm = LLM(model=job["target"], speculative_config={"method": job["method"], "model": job["draft"],
                                                           "num_speculative_tokens": job["k"]}, **options)
    # EOS is ignored unless the job says otherwise (train_to_vllm.py compares with `specpath run`, which stops at it)
    params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=job.get("ignore_eos", True))
    start = time.perf_counter()
    outs = [llm.generate([{"prompt_token_ids": p}], params, use_tqdm=False)[0] for p in job["prompts"]]
    seconds = time.perf_counter() - start
    metrics = llm.get_metrics()
    result = {
        "token_ids": [list(o.outputs[0].token_ids) for o in outs],
        "num_drafts": _metric(metrics, "vllm:spec_decode_num_drafts"),
        "num_draft_tokens": _metric(metrics, "vllm:spec_decode_num_draft_tokens"),
        "num_accepted_tokens": _metric(metrics, "vllm:spec_decode_num_accepted_tokens"),
        "accepted_per_pos": _metric(metrics, "vllm:spec_decode_num_accepted_tokens_per_pos"),
        "seconds": round(seconds, 1),
    }
    Path(job["out"]).write_text(json.dumps(result))
    return 0


# -- the specpath side ----------------------------------------------------------------------


def prompt_ids(target: str) -> list[list[int]]:
    from specpath_engine.modeling.named_models import hf_checkpoint_dir
    from specpath_train.target_text import chat_template, load_tokenizer, render_chat

    path = hf_checkpoint_dir(target)
    tok, template = load_tokenizer(path), chat_template(path)
    return [tok.encode(render_chat(template, [{"role": "user", "content": p}])).ids for p in PROMPTS]


def specpath_run(target: str, spec: dict | None, prompts: list[list[int]], max_tokens: int) -> dict:
    from specpath_engine.llm import LLM, SamplingParams

    llm = LLM(target, spec, dtype="float32", max_model_len=1024, max_num_seqs=1)
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    outs = [llm.generate([p], params)[0] for p in prompts]
    result = {"token_ids": [list(o.token_ids) for o in outs]}
    if spec is not None:
        k = spec["num_speculative_tokens"]
        drafts = sum(o.metrics.num_drafts for o in outs)
        accepted = [sum(o.metrics.accepted_by_position[i] for o in outs if len(o.metrics.accepted_by_position) > i)
                    for i in range(k)]
        result.update(tau=round(1 + sum(accepted) / max(drafts, 1), 3),
                      acceptance_by_position=[round(a / max(drafts, 1), 3) for a in accepted])
    return result


def vllm_run(python: str, job: dict, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="specpath-vllm-") as tmp:
        job = {**job, "out": str(Path(tmp) / "out.json")}
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        proc = subprocess.run([python, os.path.abspath(__file__), "--worker", str(Path(tmp) / "job.json")],
                              capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if proc.returncode != 0 or not Path(job["out"]).is_file():
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            return {"error": f"vLLM exited {proc.returncode}: {tail[-400:]}"}
        out = json.loads(Path(job["out"]).read_text())
    drafts = out["num_drafts"] or 0
    per_pos = out["accepted_per_pos"] or []
    out["tau"] = round(1 + (out["num_accepted_tokens"] or 0) / max(drafts, 1), 3)
    out["acceptance_by_position"] = [round(a / max(drafts, 1), 3) for a in per_pos]
    return out


def compare(label: str, args: argparse.Namespace, prompts: list[list[int]], plain: dict, tmp: Path) -> dict:
    import importlib

    from specpath_engine.modeling.named_models import hf_checkpoint_dir
    from specpath_train.export import export_checkpoint

    method, package, sub, fmt = DRAFTERS[label]
    source = Path(importlib.import_module(package).__file__).parent / sub
    out = tmp / label
    export_checkpoint(source, fmt, out, target=TARGET, num_speculative_tokens=args.k, overwrite=True)
    ours = specpath_run(TARGET, {"method": method, "model": str(source), "num_speculative_tokens": args.k},
                        prompts, args.max_tokens)
    load = os.getloadavg()
    theirs = vllm_run(args.vllm_python, {"format": fmt, "method": method, "draft": str(out), "k": args.k,
                                         "target": str(hf_checkpoint_dir(TARGET)), "prompts": prompts,
                                         "max_tokens": args.max_tokens}, args.timeout)
    row = {"drafter": label, "k": args.k, "max_tokens": args.max_tokens, "prompts": len(prompts),
           "specpath_tau": ours["tau"], "specpath_acceptance": ours["acceptance_by_position"],
           "specpath_spec_equals_plain": sum(a == b for a, b in zip(ours["token_ids"], plain["token_ids"])),
           "load_before_vllm": [round(x, 2) for x in load]}
    if "error" in theirs:
        return {**row, "vllm_error": theirs["error"]}
    return {**row, "vllm_tau": theirs["tau"], "vllm_acceptance": theirs["acceptance_by_position"],
            "vllm_equals_specpath_plain": sum(a == b for a, b in zip(theirs["token_ids"], plain["token_ids"])),
            "vllm_seconds": theirs["seconds"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", metavar="JOB.json", help=argparse.SUPPRESS)
    p.add_argument("--vllm-python", default=os.environ.get("SPECPATH_VLLM_PYTHON"),
                   help="the interpreter of a venv with vllm (default: $SPECPATH_VLLM_PYTHON)")
    p.add_argument("--drafters", nargs="+", default=list(DRAFTERS), choices=list(DRAFTERS))
    p.add_argument("--prompts", type=int, default=4, help="how many of the four prompts")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per vLLM process")
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    if not args.vllm_python:
        print("export_vllm: error: pass --vllm-python or set SPECPATH_VLLM_PYTHON", file=sys.stderr)
        return 1
    prompts = prompt_ids(TARGET)[: args.prompts]
    plain = specpath_run(TARGET, None, prompts, args.max_tokens)
    with tempfile.TemporaryDirectory(prefix="specpath-export-") as tmp:
        for label in args.drafters:
            print(json.dumps(compare(label, args, prompts, plain, Path(tmp))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
