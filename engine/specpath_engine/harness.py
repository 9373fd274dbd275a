"""The one benchmark harness: ``specpath demo`` and every benchmark script run through it.

- :data:`DEMO_PROMPTS`: code-completion prompts in the style of the embedded model's corpus;
- :func:`build_engines`: one warmed-up ``LLM`` per (name, speculative config), a failing method
  reported and skipped (the baseline, named ``"baseline"``, must build);
- :func:`run_rounds`: ``repeats`` rounds, prompt-major (each prompt runs through every engine
  before the next, in an order that rotates from prompt to prompt, so no engine always runs
  first or right after another's burst of work), batch 1 (the latency setting), so load on a
  shared machine hits all alike;
- :func:`summarise`: per engine τ, acceptance by position, tokens/s and the speedup over the
  baseline of the same round (medians over rounds), target steps, per-prompt tokens/s, and
  whether the output is identical to the baseline's;
- :func:`machine_load` / :func:`wait_for_quiet`: the quiet-machine gate (load average per core);
- :func:`first_difference` / :func:`top2_margin`: where a method's greedy output parts from the
  baseline's, and how close the target's choice was there (a near-tie in low precision, or a bug);
- :func:`add_chat_benchmark_arguments` / :func:`warm_llms` / :func:`chat_row`: the SmolLM2
  chat-prompt benchmarks' shared options, warmed engines and per-engine summary line;
- :func:`format_table`: the printed table; :func:`timed_call`: the GPU check scripts' timer.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

DEMO_PROMPTS: tuple[str, ...] = (
    'import os\nimport sys\n\n\ndef main(argv=None):\n    """Parse the command line and run."""\n',
    "class Queue:\n    def __init__(self, maxsize=0):\n        self.maxsize = maxsize\n        self.queue = []\n\n    def put(self, item):\n",
    "def _read_file(path, encoding='utf-8'):\n    with open(path, encoding=encoding) as f:\n",
    "    def __repr__(self):\n        return '%s(%r)' % (self.__class__.__name__, self.",
    "import unittest\n\n\nclass TestParser(unittest.TestCase):\n\n    def test_empty(self):\n        self.assertEqual(",
    "def split_lines(text):\n    lines = []\n    for line in text.splitlines():\n        line = line.strip()\n        if not line:\n",
)
"""Code-completion prompts in the style of the standard library (the default model's corpus)."""

BASELINE = "baseline"

Progress = Callable[[str], None]
"""Called with what is about to run (an engine's name, or ``"loading <name>"``)."""


WARM_UP_PROMPT = "def add(a, b):\n    return a + b\n"
"""What engines generate once before they are timed: a text in no prompt set, because some
methods remember earlier answers across requests (suffix decoding's global tree), so warming up
on a timed prompt would hand them that prompt's answer."""


def _quiet(_: str) -> None:
    return None


def build_engines(runs: Iterable[tuple[str, Mapping | None]], *, model: str | None = None, threads: int = 1,
                  enable_prefix_caching: bool = False, warmup_tokens: int = 8, progress: Progress = _quiet,
                  instrument: Callable[[str, Any], None] | None = None,
                  ) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, str]]]:
    """``([(name, config, llm)], [(name, reason skipped)])``; each engine generated once, then
    handed to ``instrument(name, llm)`` (e.g. to time its drafter)."""
    from specpath_engine.llm import LLM, SamplingParams

    engines, skipped = [], []
    for name, config in runs:
        progress(f"loading {name}")
        try:
            llm = LLM(model, config, num_threads=threads, enable_prefix_caching=enable_prefix_caching)
            llm.generate([WARM_UP_PROMPT], SamplingParams(max_tokens=warmup_tokens, ignore_eos=True))
            if instrument is not None:
                instrument(name, llm)
            engines.append((name, config, llm))
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the others
            if name == BASELINE:
                raise
            skipped.append((name, " ".join(str(exc).split()) or type(exc).__name__))
    return engines, skipped


def forget_responses(llms: Iterable[Any]) -> None:
    """Before a round that repeats earlier prompts: every drafting engine drops what finished
    requests taught its drafter (``BaseSpeculator.forget_responses``; suffix decoding's global
    tree would otherwise draft the answers it saw in an earlier round)."""
    for llm in llms:
        speculator = getattr(llm, "speculator", None)
        if speculator is not None:
            speculator.forget_responses()


def run_rounds(engines: Sequence[tuple[str, Any, Any]], *, prompts: Sequence[str] = DEMO_PROMPTS,
               max_tokens: int = 128, repeats: int = 1, progress: Progress = _quiet) -> dict[str, list[dict]]:
    """Per engine name, one dict per round: ``metrics`` (per prompt), ``seconds`` (per prompt),
    ``tokens`` (per prompt token ids). Each round starts with the drafters' memory of earlier
    responses dropped (:func:`forget_responses`): a repeated prompt is not a new one."""
    from specpath_engine.llm import SamplingParams

    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    rounds: dict[str, list[dict]] = {name: [] for name, _, _ in engines}
    from specpath_engine.demo_table import rotation

    by_name = {name: llm for name, _, llm in engines}
    turn = 0
    for _ in range(repeats):
        this = {name: {"metrics": [], "seconds": [], "tokens": []} for name, _, _ in engines}
        forget_responses(by_name.values())
        for prompt in prompts:
            order, turn = rotation(list(by_name), turn), turn + 1
            for name in order:
                llm = by_name[name]
                progress(name)
                start = time.perf_counter()
                out = llm.generate([prompt], params)[0]
                this[name]["seconds"].append(time.perf_counter() - start)
                this[name]["metrics"].append(out.metrics)
                this[name]["tokens"].append(out.token_ids)
        for name in this:
            rounds[name].append(this[name])
    return rounds


def summarise(engines: Sequence[tuple[str, Any, Any]], rounds: dict[str, list[dict]]) -> list[dict]:
    """One row per engine (see the module docstring); speedups are against :data:`BASELINE`."""
    from specpath_engine.metrics import SpecMetrics

    def total(r: dict) -> Any:
        return SpecMetrics.total(r["metrics"], elapsed_s=sum(r["seconds"]))

    base = rounds[BASELINE]
    base_tps = [total(r).tokens_per_s for r in base]
    rows = []
    for name, config, _ in engines:
        totals = [total(r) for r in rounds[name]]
        last = totals[-1]
        speedups = [t.tokens_per_s / b if b else 0.0 for t, b in zip(totals, base_tps)]
        rows.append({
            "method": name,
            "config": config,
            "mean_acceptance_length": last.mean_acceptance_length if name != BASELINE else 1.0,
            "acceptance_rate_by_position": last.acceptance_rate_by_position,
            "tokens_per_s": statistics.median(t.tokens_per_s for t in totals),
            "speedup": statistics.median(speedups),
            "speedups": speedups,
            "target_steps": last.num_steps,
            "tokens": last.num_generated_tokens,
            "turn_speedups": [(len(tok) / s) / (len(btok) / bs) if s and bs and btok else 0.0
                              for r, b in zip(rounds[name], base)
                              for tok, s, btok, bs in zip(r["tokens"], r["seconds"], b["tokens"], b["seconds"])],
            "seconds": sum(sum(r["seconds"]) for r in rounds[name]),
            "drafts_per_step": last.num_draft_tokens / max(1, last.num_steps),
            "prompt_tokens_per_s": [len(tok) / s if s else 0.0
                                    for tok, s in zip(rounds[name][-1]["tokens"], rounds[name][-1]["seconds"])],
            "greedy_identical": all(r["tokens"] == b["tokens"] for r, b in zip(rounds[name], base)),
        })
    return rows


def compare(runs: Iterable[tuple[str, Mapping | None]], *, model: str | None = None, threads: int = 1,
            max_tokens: int = 128, repeats: int = 1, prompts: Sequence[str] = DEMO_PROMPTS,
            enable_prefix_caching: bool = False, progress: Progress = _quiet,
            instrument: Callable[[str, Any], None] | None = None) -> tuple[list[dict], list[tuple[str, str]]]:
    """Build, run and summarise ``runs`` (the baseline is added first when absent)."""
    runs = list(runs)
    if not any(name == BASELINE for name, _ in runs):
        runs.insert(0, (BASELINE, None))
    engines, skipped = build_engines(runs, model=model, threads=threads, enable_prefix_caching=enable_prefix_caching,
                                     progress=progress, instrument=instrument)
    rounds = run_rounds(engines, prompts=prompts, max_tokens=max_tokens, repeats=repeats, progress=progress)
    return summarise(engines, rounds), skipped


# -- the quiet-machine gate ----------------------------------------------------------------


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first token where ``a`` and ``b`` differ (the shorter length when one is a
    prefix of the other); None when they are equal."""
    if list(a) == list(b):
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def top2_margin(model: Any, ids: Sequence[int]) -> float:
    """The target's top-2 logit margin for the token after ``ids`` (one causal pass, in the
    model's own dtype): the gap a greedy divergence there had to cross. bf16 rounds logits of
    SmolLM2's size to 1/16-1/8, so margins of that order are near-ties; a large one is a bug."""
    import torch

    with torch.inference_mode():
        logits = model.forward_batch(torch.tensor([list(ids)]), last_only=True)[0, -1]
    top = logits.topk(2).values
    return float(top[0] - top[1])


class PromptTimings(NamedTuple):
    """One engine's run over a prompt list: per prompt its tok/s and output, and the totals."""

    rates: list[float]
    outputs: list[Any]
    tokens: int
    seconds: float


def time_chat_prompts(engines: Mapping[str, Any], prompts: Sequence[tuple[str, Any]], params: Any,
                      ) -> dict[str, PromptTimings]:
    """Each ``LLM`` of ``engines`` in turn on each ``(kind, prompt)`` (``"chat"``: messages through
    ``LLM.chat``, else text), batch 1, prompt-major in a rotating order (load on a shared machine
    hits all alike)."""
    from specpath_engine.demo_table import rotation

    out = {name: PromptTimings([], [], 0, 0.0) for name in engines}
    for turn, (kind, prompt) in enumerate(prompts):
        for name in rotation(list(engines), turn):
            engine = engines[name]
            start = time.perf_counter()
            result = (engine.chat(prompt, params) if kind == "chat" else engine.generate([prompt], params))[0]
            seconds = time.perf_counter() - start
            t = out[name]
            t.rates.append(len(result.token_ids) / seconds)
            t.outputs.append(result)
            out[name] = t._replace(tokens=t.tokens + len(result.token_ids), seconds=t.seconds + seconds)
    return out


def add_chat_benchmark_arguments(parser: Any, *, rounds: int = 1) -> None:
    """The options the SmolLM2 chat-prompt benchmarks share (length, threads, rounds, gate)."""
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")


def warm_llms(configs: Mapping[str, Mapping | None], make: Callable[[Mapping | None], Any]) -> dict[str, Any]:
    """One ``make(config)`` engine per name, each warmed up with a short greedy run."""
    from specpath_engine.request import SamplingParams

    engines = {name: make(config) for name, config in configs.items()}
    warm = SamplingParams(max_tokens=8, ignore_eos=True)
    for engine in engines.values():
        engine.generate([WARM_UP_PROMPT], warm)
    return engines


class ChatRow(NamedTuple):
    """One engine over rounds of :func:`time_chat_prompts`: tok/s, ratio to ``"plain"``, τ,
    greedy matches with plain of ``n`` replies, and the mean tok/s per prompt as printed."""

    rate: float
    speedup: float
    tau: float
    same: int
    n: int
    per_prompt: str

    def line(self, name: str, *, width: int = 30, middle: str = "") -> str:
        """The printed row: ``middle`` (a benchmark's own columns) goes before the greedy check."""
        return (f"{name:{width}s} {self.rate:6.1f} tok/s  {self.speedup:.2f}x  τ {self.tau:.2f}  {middle}"
                f"greedy = plain {self.same}/{self.n}  per prompt: {self.per_prompt}")


def chat_row(rounds: Sequence[Mapping[str, PromptTimings]], name: str) -> ChatRow:
    """Sum ``name``'s rounds against the ``"plain"`` engine's (see :class:`ChatRow`)."""
    from specpath_engine.metrics import SpecMetrics

    def rate_of(key: str) -> float:
        return sum(r[key].tokens for r in rounds) / sum(r[key].seconds for r in rounds)

    rate = rate_of(name)
    metrics = SpecMetrics.total([o.metrics for r in rounds for o in r[name].outputs], elapsed_s=0.0)
    pairs = [(o, p) for r in rounds for o, p in zip(r[name].outputs, r["plain"].outputs)]
    prompts = len(rounds[0][name].rates)
    per_prompt = " ".join(f"{sum(r[name].rates[i] for r in rounds) / len(rounds):.0f}" for i in range(prompts))
    return ChatRow(rate, rate / rate_of("plain"), metrics.mean_acceptance_length,
                   sum(o.token_ids == p.token_ids for o, p in pairs), len(pairs), per_prompt)


def machine_load() -> float:
    """The 1-minute load average per CPU core (0 where the platform has none)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0


def wait_for_quiet(max_load: float, *, timeout_s: float = 300.0, poll_s: float = 10.0,
                   log: Callable[[str], None] = print) -> float:
    """Wait (at most ``timeout_s``) until the load per core is at most ``max_load``; returns the
    load measured last, and says so when the machine never got quiet (results are then noisy)."""
    deadline = time.monotonic() + timeout_s
    load = machine_load()
    while load > max_load and time.monotonic() < deadline:
        time.sleep(poll_s)
        load = machine_load()
    if load > max_load:
        log(f"warning: load {load:.2f} per core after {timeout_s:.0f}s (gate {max_load:.2f}): a noisy machine")
    return load


def add_benchmark_arguments(parser: Any, *, repeats: int = 3) -> None:
    """The options every benchmark script shares (target, length, rounds, subset, output, gate)."""
    parser.add_argument("--model", default=None, help="target checkpoint (default: the embedded model)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=repeats, help="interleaved rounds")
    parser.add_argument("--methods", default=None, help="comma-separated subset (baseline always runs)")
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--max-load", type=float, default=0.5, help="quiet-machine gate: load average per core")
    parser.add_argument("--wait", type=float, default=300.0, help="seconds to wait for a quiet machine")


def run_benchmark(args: Any, runs: Sequence[tuple[str, Mapping | None]], *,
                  columns: Sequence[tuple[str, Callable[[dict], str]]] | None = None, note: str = "",
                  instrument: Callable[[str, Any], None] | None = None) -> list[dict]:
    """A benchmark script's body: one torch thread, the gate, ``args.repeats`` interleaved
    rounds, the table (with per-prompt tokens/s), and ``--json``."""
    import json

    import torch

    torch.set_num_threads(1)
    only = set(args.methods.split(",")) if args.methods else None
    runs = [(n, c) for n, c in runs if n == BASELINE or only is None or n in only]
    load = wait_for_quiet(args.max_load, timeout_s=args.wait)
    rows, skipped = compare(runs, model=args.model, max_tokens=args.max_tokens, repeats=args.repeats,
                            instrument=instrument)
    print(format_table(rows, columns or BENCHMARK_COLUMNS))
    print(f"\n{len(DEMO_PROMPTS)} demo prompts x {args.max_tokens} tokens, batch 1, greedy, 1 torch thread; "
          f"medians of {args.repeats} interleaved rounds; load {load:.2f} per core at the start"
          f"{' (noisy)' if load > args.max_load else ''}. {note}".rstrip())
    for name, reason in skipped:
        print(f"skipped {name}: {reason}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"max_tokens": args.max_tokens, "repeats": args.repeats, "load_per_core": load,
                       "rows": rows, "skipped": skipped}, f, indent=2, default=str)
    return rows


def timed_call(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """``(fn(*args), milliseconds)``, synchronising CUDA around the call (the GPU check scripts)."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    start = time.perf_counter()
    out = fn(*args)
    sync()
    return out, (time.perf_counter() - start) * 1e3


def kernel_check_args(doc: str) -> Any:
    """``--device`` (default cuda) and ``--small`` (tiny shapes, for the CPU interpreter)."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="tiny shapes (for the CPU interpreter)")
    return parser.parse_args()


def check_kernel(label: str, reference: Callable[..., Any], kernel: Callable[..., Any], *inputs: Any,
                 same: Callable[[Any, Any], bool] | None = None) -> bool:
    """Run a Triton kernel and its torch reference on the same inputs; print one line (match,
    both times) and return whether the outputs agree (``same``; default: every tensor equal)."""
    import torch

    want, t_ref = timed_call(reference, *inputs)
    got, t_ker = timed_call(kernel, *inputs)
    ok = same(want, got) if same is not None else all(torch.equal(a, b) for a, b in zip(want, got))
    print(f"{label}: {'match' if ok else 'MISMATCH'}  ref {t_ref:.2f} ms  kernel {t_ker:.2f} ms", flush=True)
    return ok


# -- the table --------------------------------------------------------------------------------


def format_rates(rates: Sequence[float]) -> str:
    return " ".join(f"{r:.2f}" for r in rates) if rates else "-"


DEFAULT_COLUMNS: tuple[tuple[str, Callable[[dict], str]], ...] = (
    ("method", lambda r: r["method"]),
    ("τ", lambda r: f"{r['mean_acceptance_length']:.2f}"),
    ("acceptance by position", lambda r: format_rates(r["acceptance_rate_by_position"])),
    ("tokens/s", lambda r: f"{r['tokens_per_s']:.0f}"),
    ("speedup", lambda r: f"{r['speedup']:.2f}x"),
    ("greedy identical", lambda r: "yes" if r["greedy_identical"] else "NO"),
)
"""The demo's columns; benchmarks add their own (``(header, cell(row))``)."""


def format_table(rows: Sequence[dict], columns: Sequence[tuple[str, Callable[[dict], str]]] = DEFAULT_COLUMNS) -> str:
    header = [h for h, _ in columns]
    cells = [[cell(r) for _, cell in columns] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *cells)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(values, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, cells)])


BENCHMARK_COLUMNS: tuple[tuple[str, Callable[[dict], str]], ...] = (
    *DEFAULT_COLUMNS[:2],
    ("drafts/step", lambda r: f"{r['drafts_per_step']:.2f}"),
    *DEFAULT_COLUMNS[2:5],
    ("steps", lambda r: str(r["target_steps"])),
    ("per-prompt tok/s", lambda r: " ".join(f"{t:.0f}" for t in r["prompt_tokens_per_s"])),
    DEFAULT_COLUMNS[5],
)
"""The demo's columns plus drafts per step, target steps and per-prompt tokens/s."""
