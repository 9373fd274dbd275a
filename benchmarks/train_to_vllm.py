"""From a jsonl file to a drafter served natively by vLLM: the four user commands, timed in one run.

    python benchmarks/train_to_vllm.py --minutes 4 --work runs/train-to-vllm

writes a small ``prompts.jsonl`` (written here, no public evaluation set), then runs, each as a
subprocess and timed with the load average around it:

1. ``specpath train eagle3 --target smollm2-135m --data prompts.jsonl --out RUN --minutes M``
2. ``specpath export RUN --format vllm OUT``
3. vLLM serving the target with ``OUT`` as its native EAGLE-3 drafter (fp32, greedy, K=4): the
   ``LLM(target, speculative_config={"method": "eagle3", "model": OUT, ...})`` of
   ``benchmarks/export_vllm.py``'s worker, run by the vLLM interpreter (``--vllm-python``)
4. ``specpath run --model smollm2-135m --chat --speculative-config '{"model": RUN, ...}'`` on the
   same prompts, and once more without speculation (the reference output)

and prints a table (step, seconds, load average) and vLLM's τ / acceptance by position next to
specpath's, and whether vLLM's greedy output equals specpath's plain output. It lives beside
``export_vllm.py`` (whose vLLM worker it reuses) because it is a measurement, not a build step;
``tests/train/test_train_to_vllm.py`` checks its plumbing, and runs it for real when
``SPECPATH_VLLM_PYTHON`` is set.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_VLLM_PYTHON = "~/.cache/specpath/venvs/vllm/bin/python"
TARGET = "smollm2-135m"

TRAIN_PROMPTS = [
    "Write a Python function that merges two sorted lists into one sorted list.",
    "Write a Python function that returns the largest prime factor of a number.",
    "Write a Python class for a queue with enqueue, dequeue and a size method.",
    "Write a Python function that removes duplicate items from a list and keeps their order.",
    "Write a Python function that converts a temperature from Celsius to Fahrenheit.",
    "Write a Python function that reads a CSV file and returns the rows as dictionaries.",
    "Write a Python function that counts how often each letter appears in a string.",
    "Write a Python function that flattens a nested list.",
    "Write a Python function that checks whether two words are anagrams.",
    "Write a Python function that returns the median of a list of numbers.",
    "Write a Python function that formats a number of seconds as hours, minutes and seconds.",
    "Write a Python function that finds the longest word in a sentence.",
    "Explain what a Python dictionary is and when to use one.",
    "Explain the difference between a list and a tuple in Python.",
    "What does the `with` statement do in Python?",
    "How do I read a text file line by line in Python?",
    "Give me three tips for naming variables well.",
    "What is a good way to learn a new programming language?",
    "Suggest a simple recipe for a vegetable soup.",
    "How can I make my mornings less rushed?",
    "Write a short poem about autumn leaves.",
    "What should I pack for a weekend hiking trip?",
    "Describe how a bicycle gear system works in simple words.",
    "Give me a few ideas for a rainy afternoon at home.",
    "Explain why the sky looks blue during the day.",
    "How do I politely decline an invitation to a party?",
    "Write a short story opening about a lighthouse keeper.",
    "What are the benefits of taking short breaks while working?",
]
"""Chat requests written for this script: two fifths code, the rest everyday chat."""

CODE_PREFIXES = [
    "def is_even(n):\n",
    "class Point:\n    def __init__(self, x, y):\n",
    "def word_lengths(words):\n    \"\"\"Return the length of each word.\"\"\"\n",
    "import os\n\n\ndef list_python_files(folder):\n",
]
"""Code to continue (``{"prompt": ...}`` lines): the file mixes both kinds, as users' files do."""

EVAL_PROMPTS = [
    "Write a Python function that returns the sum of the digits of a number.",
    "Write a Python function that reverses the words in a sentence.",
    "Give me two tips for keeping a desk tidy.",
]
"""Served in step 3 and 4: not in the training file."""


def write_prompts(path: Path) -> int:
    """``prompts.jsonl``: one JSON object a line, both forms ``specpath train --data`` reads."""
    lines = [{"messages": [{"role": "user", "content": p}]} for p in TRAIN_PROMPTS]
    lines += [{"prompt": p} for p in CODE_PREFIXES]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return len(lines)


# -- the four commands ----------------------------------------------------------------------


def train_command(data: Path, run: Path, args: argparse.Namespace) -> list[str]:
    return ["specpath", "train", "eagle3", "--target", TARGET, "--data", str(data), "--out", str(run),
            "--minutes", f"{args.minutes:g}", "--max-new-tokens", str(args.max_new_tokens),
            "--window", str(args.window), "--eval-prompts", str(args.eval_prompts),
            "--eval-tokens", str(args.eval_tokens), "--no-progress", "--overwrite"]


def export_command(run: Path, out: Path) -> list[str]:
    return ["specpath", "export", str(run), "--format", "vllm", str(out), "--overwrite"]


def specpath_run_command(prompt: str, run: Path | None, args: argparse.Namespace) -> list[str]:
    """``specpath run`` in fp32 (vLLM's dtype here, where greedy outputs must be identical) and
    drafting K every step as vLLM does (``draft_length_policy: fixed``, as ``specpath train``
    evaluates); without ``run`` the plain reference."""
    cmd = ["specpath", "run", "--model", TARGET, "--chat", "--prompt", prompt, "--dtype", "float32",
           "--max-tokens", str(args.max_tokens), "--json"]
    if run is not None:
        cmd += ["--speculative-config", json.dumps({"model": str(run), "num_speculative_tokens": args.k,
                                                    "draft_length_policy": "fixed"})]
    return cmd


def vllm_job(draft: Path, target_dir: str, prompts: list[list[int]], args: argparse.Namespace) -> dict:
    """What ``export_vllm.py --worker`` serves: the target, the exported head, K, the prompt ids;
    EOS ends a reply, as in ``specpath run --chat``."""
    return {"format": "vllm", "method": "eagle3", "draft": str(draft), "k": args.k, "target": target_dir,
            "prompts": prompts, "max_tokens": args.max_tokens, "ignore_eos": False}


def shell(cmd: list[str]) -> str:
    """A command as a user types it (arguments quoted where the shell needs it)."""
    import shlex

    return " ".join(shlex.quote(c) for c in cmd)


def run_specpath(cmd: list[str]) -> subprocess.CompletedProcess:
    """``specpath ...`` through this interpreter (``python -m specpath``), so the same
    installation (or PYTHONPATH) runs it; output captured, a failure is one line."""
    proc = subprocess.run([sys.executable, "-m", *cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise StepError(f"{cmd[0]} {cmd[1]} exited {proc.returncode}: {tail[-500:]}")
    return proc


class StepError(RuntimeError):
    """One of the four commands failed (the message is its last lines)."""


# -- what the steps report ------------------------------------------------------------------


def chat_prompt_ids(target: str, prompts: list[str]) -> list[list[int]]:
    """The token ids ``specpath run --chat`` feeds the target (its tokenizer, chat template and
    rendering as ``LLM.chat`` does it), so that vLLM gets exactly the same prompts."""
    from specpath_engine.chat import render_chat
    from specpath_engine.llm import _model_path
    from specpath_engine.tokenizer import load_tokenizer

    tok = load_tokenizer(_model_path(target))
    rendered = [render_chat(tok.chat_template, [{"role": "user", "content": p}], bos_token=tok.bos_token,
                            eos_token=tok.eos_token, add_generation_prompt=True) for p in prompts]
    return [list(tok.encode(text)) for text in rendered]


def specpath_summary(outputs: list[dict], k: int) -> dict:
    """τ and acceptance by position over several ``specpath run --json`` outputs, counted as
    vLLM counts them: accepted at depth i / drafting steps (every step drafts K here)."""
    drafts = sum(o["metrics"]["num_drafts"] for o in outputs)
    accepted = [0.0] * k
    for o in outputs:
        for i, rate in enumerate(o["metrics"]["acceptance_rate_by_position"][:k]):
            accepted[i] += rate * o["metrics"]["num_drafts"]
    total = sum(o["metrics"]["num_accepted_tokens"] for o in outputs)
    return {"tau": round(1 + total / max(drafts, 1), 3),
            "acceptance_by_position": [round(a / max(drafts, 1), 3) for a in accepted]}


def same_tokens(a: list[int], b: list[int], eos: int | None) -> bool:
    """Equal replies, whether or not an engine lists the EOS that ended them."""
    strip = lambda ids: ids[:-1] if ids and ids[-1] == eos else ids  # noqa: E731
    return strip(list(a)) == strip(list(b))


def format_table(steps: list[dict]) -> str:
    """``step | seconds | load average (1 min) before -> after`` as a Markdown table."""
    rows = ["| step | seconds | load average (1 min) before -> after |", "|---|---|---|"]
    for s in steps:
        rows.append(f"| {s['step']} | {s['seconds']:.1f} | {s['load_before']:.2f} -> {s['load_after']:.2f} |")
    return "\n".join(rows)


def format_comparison(vllm: dict, ours: dict, equal: int, n: int) -> str:
    pos = lambda xs: " / ".join(f"{x:.3f}" for x in xs)  # noqa: E731
    return "\n".join([
        "| | τ | acceptance by position | greedy output = specpath plain |",
        "|---|---|---|---|",
        f"| vLLM, exported head | {vllm['tau']:.3f} | {pos(vllm['acceptance_by_position'])} | {equal}/{n} |",
        f"| specpath, the run's checkpoint | {ours['tau']:.3f} | {pos(ours['acceptance_by_position'])} | "
        f"{ours['equal_plain']}/{n} |",
    ])


def summary_line(metrics: dict, vllm: dict, args: argparse.Namespace) -> str:
    """What the run's ``metrics.json`` says (steps, stage times, held-out τ) and vLLM's
    generation time, in one line."""
    t, held = metrics.get("timings", {}), metrics.get("heldout", {})
    accept = " ".join(f"{a:.2f}" for a in held.get("acceptance_by_position", []))
    return (f"{len(EVAL_PROMPTS)} chat prompts x at most {args.max_tokens} tokens, fp32, greedy, K={args.k}; "
            f"vLLM generation {vllm.get('seconds')} s. train: {metrics.get('steps', '?')} steps; data "
            f"{t.get('data_s', '?')} s, train {t.get('train_s', '?')} s, evaluate {t.get('eval_s', '?')} s; "
            f"held-out τ {held.get('tau', '?')} ({accept})")


def _export_vllm():
    spec = importlib.util.spec_from_file_location("export_vllm", HERE / "export_vllm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Steps:
    """Times each step and keeps its row (wall seconds, the 1-minute load before and after)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def timed(self, step: str, command: str, fn):
        print(f"$ {command}", file=sys.stderr, flush=True)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        result = fn()
        self.rows.append({"step": step, "seconds": time.perf_counter() - start,
                          "load_before": load, "load_after": os.getloadavg()[0]})
        print(f"[{step}: {self.rows[-1]['seconds']:.1f} s, load {load:.2f} -> {os.getloadavg()[0]:.2f}]",
              file=sys.stderr, flush=True)
        return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vllm-python", default=os.environ.get("SPECPATH_VLLM_PYTHON", DEFAULT_VLLM_PYTHON),
                   help=f"the interpreter of a venv with vllm (default: $SPECPATH_VLLM_PYTHON, "
                        f"else {DEFAULT_VLLM_PYTHON})")
    p.add_argument("--work", type=Path, default=Path("runs/train-to-vllm"),
                   help="directory for prompts.jsonl, the run and the export")
    p.add_argument("--minutes", type=float, default=4.0, help="specpath train's budget")
    p.add_argument("--max-new-tokens", type=int, default=96, help="length of the target's training answers")
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--eval-prompts", type=int, default=3)
    p.add_argument("--eval-tokens", type=int, default=48)
    p.add_argument("--max-tokens", type=int, default=64, help="tokens served per prompt in steps 3 and 4")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds for the vLLM process")
    p.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    args = p.parse_args(argv)
    vllm_python = os.path.expanduser(args.vllm_python)
    if not os.access(vllm_python, os.X_OK):
        print(f"train_to_vllm: error: no vLLM interpreter at {vllm_python}; pass --vllm-python (a venv with "
              f"vllm, docs/bridges/vllm.md)", file=sys.stderr)
        return 1
    try:
        return _run(args, vllm_python)
    except StepError as exc:
        print(f"train_to_vllm: error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, vllm_python: str) -> int:
    from specpath_engine.modeling.named_models import hf_checkpoint_dir

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    data, run, out = work / "prompts.jsonl", work / "run", work / "eagle3-vllm"
    n_lines = write_prompts(data)
    print(f"[{data}: {n_lines} prompts]", file=sys.stderr, flush=True)
    steps = Steps()

    cmd = train_command(data, run, args)
    steps.timed("1. specpath train", shell(cmd), lambda: run_specpath(cmd))
    cmd = export_command(run, out)
    steps.timed("2. specpath export", shell(cmd), lambda: run_specpath(cmd))

    target_dir = str(hf_checkpoint_dir(TARGET))  # vLLM reads HF directories (cached conversion of the GGUF)
    prompts = chat_prompt_ids(TARGET, EVAL_PROMPTS)
    job = vllm_job(out, target_dir, prompts, args)
    theirs = steps.timed("3. vLLM, exported head as its EAGLE-3 drafter",
                         f"{vllm_python} benchmarks/export_vllm.py --worker JOB.json  # LLM({target_dir}, "
                         f"speculative_config={{'method': 'eagle3', 'model': {str(out)!r}, ...}})",
                         lambda: _export_vllm().vllm_run(vllm_python, job, args.timeout))
    if "error" in theirs:
        raise StepError(theirs["error"])

    def serve(with_run: Path | None) -> list[dict]:
        return [json.loads(run_specpath(specpath_run_command(p, with_run, args)).stdout) for p in EVAL_PROMPTS]

    spec = steps.timed(f"4. specpath run, the run's checkpoint ({len(EVAL_PROMPTS)} processes)",
                       shell(specpath_run_command("...", run, args)),
                       lambda: serve(run))
    plain = steps.timed(f"specpath run, plain: the reference ({len(EVAL_PROMPTS)} processes)",
                        shell(specpath_run_command("...", None, args)),
                        lambda: serve(None))

    eos = json.loads(Path(target_dir, "config.json").read_text()).get("eos_token_id")
    ours = specpath_summary(spec, args.k)
    ours["equal_plain"] = sum(same_tokens(s["token_ids"], q["token_ids"], eos) for s, q in zip(spec, plain))
    equal = sum(same_tokens(v, q["token_ids"], eos) for v, q in zip(theirs["token_ids"], plain))
    metrics = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").is_file() else {}
    print(format_table(steps.rows))
    print()
    print(format_comparison(theirs, ours, equal, len(EVAL_PROMPTS)))
    print("\n" + summary_line(metrics, theirs, args))
    if args.json:
        print(json.dumps({"steps": steps.rows, "vllm": {k: theirs[k] for k in ("tau", "acceptance_by_position")},
                          "specpath": ours, "vllm_equals_specpath_plain": equal, "prompts": len(EVAL_PROMPTS),
                          "train_metrics": metrics}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
