"""Tokens/s alone and beside competing CPU load, side by side (issue 31, item 1).

Each engine configuration (model x kernel path x method x thread setting) runs in a process of
its own, built and warmed up on the machine as it is; then, round by round, it generates the same
prompt alone and beside ``--competitors`` processes that each run bursty 256x256 torch matmuls
on 2 threads at torch's defaults (as another engine would), in alternating order, so neither
side gains from coming first. Printed: median tokens/s alone, beside the load, and the ratio;
the goal is a ratio of at least 1/4 at default settings on every kernel path (about 1/3 would
be the share of the CPU left).

Thread settings: ``default`` (what ``LLM`` chooses: ``specpath_engine.threads``, then adapted
at run time for bf16 models: ``specpath_engine.adaptive_threads``; the row shows the count each
generation ended at and the switches so far), ``1``
(``--threads 1``), ``2`` (two threads, idle ones sleeping) and ``spin2`` (two threads, libgomp's
own spin-then-sleep waiting as before specpath chose the policy: ``GOMP_SPINCOUNT=300000``).

    python benchmarks/contention.py                      # embedded + smollm2-135m, plain + suffix
    python benchmarks/contention.py --models smollm2-135m --settings default,1,spin2 --max-tokens 24

The machine's load average is printed with every figure: on a shared machine "alone" is only
alone from this benchmark's competitors. llama.cpp's column needs ``llama_cpp`` (skipped with a
note otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PROMPT = "def quicksort(items):\n    \"\"\"Sort a list of numbers with quicksort.\"\"\"\n"

LOAD = """
import sys, time, torch
torch.set_num_threads(2)
burst, gap = float(sys.argv[1]) / 1000, float(sys.argv[2]) / 1000
a = torch.randn(256, 256)
while True:
    end = time.perf_counter() + burst
    while time.perf_counter() < end:
        a = torch.tanh(a @ a)
    time.sleep(gap)
"""
"""A competitor: bursts of 256x256 matmuls on 2 threads, short pauses between (torch defaults)."""

KERNELS = {"native": {}, "torch": {"SPECPATH_NATIVE": "0"}}
"""Kernel paths of a bf16 model: the native C kernels, or torch's only."""
SETTINGS = {
    "default": (None, {}),
    "1": (1, {}),
    "2": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "spin2": (2, {"GOMP_SPINCOUNT": "300000"}),
}
"""Thread setting -> (num_threads, extra environment)."""


def loadavg() -> float:
    return os.getloadavg()[0]


def competitor_env() -> dict:
    """The competitors run at torch's defaults, whatever this process's environment says."""
    return {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}


class Load:
    """``n`` competing processes, started and stopped around each loaded measurement."""

    def __init__(self, n: int, burst_ms: float, gap_ms: float) -> None:
        self.n, self.args, self.procs = n, (str(burst_ms), str(gap_ms)), []

    def __enter__(self) -> "Load":
        self.procs = [subprocess.Popen([sys.executable, "-c", LOAD, *self.args], env=competitor_env())
                      for _ in range(self.n)]
        time.sleep(1.5)  # torch imported, bursts under way
        return self

    def __exit__(self, *_: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


# ------------------------------------------------------------------------------------- worker
def worker(spec: dict) -> None:
    """Build one engine, then answer each line on stdin with one timed generation (JSON)."""
    from specpath_engine.llm import LLM, SamplingParams
    from specpath_engine.threads import wait_policy

    method = None if spec["method"] == "plain" else {"method": spec["method"], "num_speculative_tokens": 4}
    model = None if spec["model"] == "embedded" else spec["model"]
    llm = LLM(model, method, num_threads=spec["threads"], dtype=spec["dtype"])
    params = SamplingParams(max_tokens=spec["max_tokens"], ignore_eos=True)
    llm.generate([PROMPT], params)  # warm-up (and suffix's tree holds this prompt's reply, both sides alike)
    print(json.dumps({"threads": llm.threads.num_threads, "why": llm.threads.reason, "wait": wait_policy(),
                      "dtype": llm.engine_config.model_config.dtype}), flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        out = llm.generate([PROMPT], params)[0]
        stats = llm.thread_stats()
        print(json.dumps({"tok_s": len(out.token_ids) / (time.perf_counter() - start), "now": stats["num_threads"],
                          "switches": stats.get("num_switches")}), flush=True)


def llama_cpp_worker(spec: dict) -> None:  # pragma: no cover - needs llama_cpp
    import llama_cpp

    from specpath_engine.modeling.named_models import resolve_model_path

    llm = llama_cpp.Llama(str(resolve_model_path(spec["model"])), n_threads=2, verbose=False)
    llm(PROMPT, max_tokens=4)
    print(json.dumps({"threads": 2, "why": "n_threads", "wait": "llama.cpp's", "dtype": "gguf"}), flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        out = llm(PROMPT, max_tokens=spec["max_tokens"], temperature=0.0)
        n = out["usage"]["completion_tokens"]
        print(json.dumps({"tok_s": n / (time.perf_counter() - start)}), flush=True)


# ------------------------------------------------------------------------------------- parent
def measure(spec: dict, env: dict, load: Load, rounds: int) -> dict:
    """Median tok/s alone and beside the load over ``rounds`` (alternating which comes first)."""
    proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(spec)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    info = json.loads(proc.stdout.readline() or "{}")
    if not info:
        proc.wait()
        return {"error": f"worker exited {proc.returncode}"}

    ends: dict[str, list] = {"alone": [], "loaded": []}

    def once(side: str) -> tuple[float, float]:
        before = loadavg()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        said = json.loads(proc.stdout.readline())
        ends[side].append(said.get("now"))
        if said.get("switches") is not None:
            info["switches"] = said["switches"]
        return said["tok_s"], before

    alone, loaded, loads = [], [], []
    for r in range(rounds):
        for side in (("alone", "loaded") if r % 2 == 0 else ("loaded", "alone")):
            if side == "alone":
                tok_s, la = once(side)
                alone.append(tok_s)
            else:
                with load:
                    tok_s, la = once(side)
                loaded.append(tok_s)
            loads.append(la)
    proc.stdin.close()
    proc.wait()
    a, b = statistics.median(alone), statistics.median(loaded)
    return {**info, "alone": a, "loaded": b, "ratio": b / a if a else 0.0, "load": (min(loads), max(loads)),
            "ends": ends}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--models", default="embedded,smollm2-135m")
    ap.add_argument("--methods", default="plain,suffix")
    ap.add_argument("--kernels", default="native,torch", help="kernel paths of bf16 models (native, torch)")
    ap.add_argument("--settings", default="default,1", help=f"thread settings: {', '.join(SETTINGS)}")
    ap.add_argument("--competitors", type=int, default=2)
    ap.add_argument("--burst-ms", type=float, default=50.0)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        (llama_cpp_worker if spec["method"] == "llama.cpp" else worker)(spec)
        return 0

    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"--settings: unknown {', '.join(unknown)} (allowed: {', '.join(SETTINGS)})")
    load = Load(args.competitors, args.burst_ms, args.gap_ms)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"{cpu}, {os.cpu_count()} CPUs; {args.competitors} competitors x 2 threads "
          f"({args.burst_ms:g} ms bursts, {args.gap_ms:g} ms pauses); {args.max_tokens} tokens, greedy, batch 1, "
          f"median of {args.rounds} round(s); load average at start {loadavg():.2f}")
    try:
        import llama_cpp  # noqa: F401
        have_llama = True
    except ImportError:
        have_llama = False
        print("llama.cpp: skipped (llama_cpp does not import; pip install llama-cpp-python for its column)")

    rows = []
    for model in args.models.split(","):
        paths = ["torch (fp32)"] if model == "embedded" else args.kernels.split(",")
        for path in paths:
            for method in args.methods.split(","):
                row = {"model": model, "kernels": path, "method": method}
                for setting in settings:
                    threads, env = SETTINGS[setting]
                    spec = {"model": model, "method": method, "threads": threads, "max_tokens": args.max_tokens,
                            "dtype": "auto" if model == "embedded" else "bfloat16"}
                    row[setting] = measure(spec, {**env, **KERNELS.get(path, {})}, load, args.rounds)
                rows.append(row)
                print(format_row(row, settings), flush=True)
        if have_llama and model != "embedded":  # pragma: no cover - needs llama_cpp
            spec = {"model": model, "method": "llama.cpp", "threads": 2, "max_tokens": args.max_tokens}
            row = {"model": model, "kernels": "llama.cpp", "method": "plain", "2": measure(spec, {}, load, args.rounds)}
            rows.append(row)
            print(format_row(row, ["2"]), flush=True)
    print(f"load average at end {loadavg():.2f}; ratio = tok/s beside the load / alone (goal >= 0.25 at default)")
    for r in rows:
        default = r.get("default", {})
        if "error" in default:
            print(f"failed: {r['model']} {r['kernels']} {r['method']} at default settings ({default['error']})")
        elif default and default["ratio"] < 0.25:
            print(f"below 1/4: {r['model']} {r['kernels']} {r['method']} at default settings")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def format_row(row: dict, settings: list[str]) -> str:
    cells = [f"{row['model']:<13} {row['kernels']:<12} {row['method']:<7}"]
    for s in settings:
        m = row.get(s, {})
        if "error" in m:
            cells.append(f"{s}: {m['error']}")
            continue
        adapted = ""
        if m.get("switches") is not None:  # run-time adaptation: the count each generation ended at
            ends = m.get("ends", {})
            adapted = (f" adaptive: ended alone at {','.join(map(str, ends.get('alone', [])))}, loaded at "
                       f"{','.join(map(str, ends.get('loaded', [])))}, {m['switches']} switches;")
        cells.append(f"{s} [{m['threads']}t {m['wait'].split(' (')[0][:8]}]: {m['alone']:6.1f} -> {m['loaded']:6.1f} "
                     f"tok/s = {m['ratio']:.2f} ({adapted.lstrip()}load {m['load'][0]:.1f}-{m['load'][1]:.1f})")
    return " | ".join(cells)


if __name__ == "__main__":
    sys.exit(main())
